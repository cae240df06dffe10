"""Complex inputs where tg.linalg packs a real result with a complex one (eigh's
eigenvalues, svd's singular values, slogdet's logabsdet): they came back complex128
where NumPy gives float64; refused now (complex dtypes are tapegrad issue 18)."""

import numpy as np
import pytest
import tapegrad as tg

HERMITIAN = np.array([[1.0, 2.0 - 1j], [2.0 + 1j, 1.0]])


@pytest.mark.parametrize("name", ["eigh", "svd", "slogdet"])
def test_complex_input_is_refused_naming_the_op(name):
    assert np.linalg.eigh(HERMITIAN).eigenvalues.dtype == np.float64     # what NumPy gives
    with pytest.raises(TypeError, match=rf"linalg_{name}: complex input \(complex128\) is not "
                                        rf"supported yet \(tapegrad issue 18"):
        getattr(tg.linalg, name)(tg.tensor(HERMITIAN))


@pytest.mark.parametrize("name", ["eigvalsh", "svdvals", "inv", "det"])
def test_complex_input_where_the_result_is_unpacked_keeps_numpys_dtype(name):
    got = getattr(tg.linalg, name)(tg.tensor(HERMITIAN))
    want = getattr(np.linalg, name)(HERMITIAN)
    assert got.dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
