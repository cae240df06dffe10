import numpy as np
import pytest
import tapegrad as tg


def test_manual_seed_makes_draws_reproducible():
    tg.manual_seed(123)
    a, b = tg.random.rand(5), tg.random.randn(2, 3)
    tg.manual_seed(123)
    assert tg.random.rand(5).tolist() == a.tolist()
    assert tg.random.randn((2, 3)).tolist() == b.tolist()


def test_distributions_and_dtypes():
    tg.manual_seed(0)
    u = tg.random.uniform(-2.0, 3.0, (10000,))
    assert u.numpy().min() >= -2.0 and u.numpy().max() < 3.0
    n = tg.random.normal(1.0, 2.0, 20000, dtype=np.float32)
    assert n.dtype == np.float32 and abs(float(n.numpy().mean()) - 1.0) < 0.1
    assert tg.random.rand(2, requires_grad=True).requires_grad
    with pytest.raises(TypeError, match="floating-point"):
        tg.random.rand(2, dtype=np.int64)


def test_state_can_be_saved_and_restored():
    state = tg.random.get_state()
    a = tg.random.rand(4)
    tg.random.set_state(state)
    assert tg.random.rand(4).tolist() == a.tolist()


def test_negative_seed_is_refused():
    with pytest.raises(ValueError, match="non-negative"):
        tg.manual_seed(-1)
