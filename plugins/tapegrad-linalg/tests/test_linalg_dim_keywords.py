"""tg.linalg's norm/vector_norm/cross/vecdot take torch.linalg's dim=/keepdim=, with the
meaning of NumPy's axis=/keepdims= (the same in both libraries for these functions)."""

import numpy as np
import pytest
import tapegrad as tg

A = np.random.default_rng(0).standard_normal((3, 4))
B = np.random.default_rng(1).standard_normal((4, 3))


@pytest.mark.parametrize("call, reference", [
    (lambda x: tg.linalg.norm(x, dim=1, keepdim=True),
     lambda a: np.linalg.norm(a, axis=1, keepdims=True)),
    (lambda x: tg.linalg.norm(x, 1, dim=0), lambda a: np.linalg.norm(a, 1, axis=0)),
    (lambda x: tg.linalg.vector_norm(x, dim=0, keepdim=True),
     lambda a: np.linalg.vector_norm(a, axis=0, keepdims=True)),
    (lambda x: tg.linalg.vecdot(x, x, dim=0), lambda a: np.linalg.vecdot(a, a, axis=0)),
])
def test_dim_keywords_equal_numpys_axis_keywords(call, reference):
    x = tg.tensor(A, requires_grad=True)
    np.testing.assert_allclose(call(x).numpy(), reference(A), rtol=1e-13)
    assert tg.gradcheck(call, x)


def test_cross_takes_dim():
    x = tg.tensor(B, requires_grad=True)
    y = tg.tensor(B[::-1].copy())
    np.testing.assert_allclose(tg.linalg.cross(x, y, dim=-1).numpy(),
                               np.linalg.cross(B, B[::-1], axis=-1), rtol=1e-13)
    assert tg.gradcheck(lambda v: tg.linalg.cross(v, y, dim=1), x)


def test_dim_and_axis_together_is_a_type_error():
    with pytest.raises(TypeError, match="dim"):
        tg.linalg.norm(tg.tensor(A), axis=0, dim=0)
