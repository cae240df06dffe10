"""Cross-entropy's C path (tapegrad_nn._kernels.cross_entropy_rows, minus_one_hot_rows;
issue 16): the loss and softmax against a float64 (longdouble where available) NumPy
reference and PyTorch, the gradient against the closed form softmax - one_hot, the
cases that must leave the C path (bad labels raise as before, non-finite logits keep
NumPy's NaN/inf semantics, ignored rows, other label dtypes), and a compiled training
step against eager bit for bit."""

import importlib.util

import numpy as np
import pytest
import tapegrad as tg
from tapegrad_nn import _kernels as K
from tapegrad_nn import functional as F

DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=3e-6, atol=3e-7), np.float64: dict(rtol=1e-14, atol=1e-15)}
SHAPES = [(32, 10), (1, 1), (5, 3), (7, 129), (2, 1000)]


def _ref(x, t):
    """(per-row loss, softmax) in extended precision, row by row."""
    z = x.astype(np.longdouble)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    lsm = z - np.log(s)
    return -lsm[np.arange(x.shape[0]), t], e / s


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_rows_kernel_against_reference(dtype, shape):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    t = rng.integers(0, shape[1], shape[0])
    picked, probs = K.cross_entropy_rows(x, t)
    assert picked.dtype == dtype and probs.dtype == dtype
    loss_ref, p_ref = _ref(x, t)
    np.testing.assert_allclose(-picked.astype(np.float64), loss_ref.astype(np.float64),
                               **TOL[dtype])
    np.testing.assert_allclose(probs, p_ref.astype(np.float64), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_op_value_and_gradient(dtype, reduction):
    rng = np.random.default_rng(3)
    x_np = (rng.standard_normal((32, 10)) * 3).astype(dtype)
    t = rng.integers(0, 10, 32)
    x = tg.tensor(x_np, requires_grad=True)
    loss = tg.cross_entropy(x, t, reduction=reduction)
    rows, p = _ref(x_np, t)
    want = {"mean": rows.mean(), "sum": rows.sum(), "none": rows}[reduction]
    np.testing.assert_allclose(loss.numpy().astype(np.float64), np.asarray(want, np.float64),
                               **TOL[dtype])
    assert loss.dtype == dtype
    tg.sum(loss).backward()
    hot = np.zeros_like(p)
    hot[np.arange(32), t] = 1
    g = (p - hot) / (32 if reduction == "mean" else 1)
    np.testing.assert_allclose(x.grad.numpy(), g.astype(np.float64), **TOL[dtype])


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
@pytest.mark.parametrize("dtype", DTYPES)
def test_against_torch(dtype):
    import torch
    rng = np.random.default_rng(4)
    x_np = (rng.standard_normal((64, 17)) * 5).astype(dtype)
    t = rng.integers(0, 17, 64)
    x = tg.tensor(x_np, requires_grad=True)
    loss = tg.cross_entropy(x, t)
    loss.backward()
    xt = torch.tensor(x_np, requires_grad=True)
    lt = torch.nn.functional.cross_entropy(xt, torch.tensor(t))
    lt.backward()
    np.testing.assert_allclose(loss.numpy(), lt.detach().numpy(), **TOL[dtype])
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), **TOL[dtype])


def test_bad_label_raises_as_before():
    x = np.zeros((3, 4), np.float32)
    assert K.cross_entropy_rows(x, np.array([0, 4, 1])) is None
    assert K.cross_entropy_rows(x, np.array([0, -1, 1])) is None
    assert K.minus_one_hot_rows(x, np.array([0, 4, 1])) is None
    with pytest.raises(IndexError):
        tg.cross_entropy(tg.tensor(x), np.array([0, 4, 1]))
    with pytest.raises(IndexError):
        F._minus_one_hot_kernel(x, np.array([0, -100, 1]))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_logits_take_numpys_path(bad):
    x = np.array([[0.0, 1.0, 2.0], [bad, 0.0, 1.0]])
    t = np.array([2, 1])
    assert K.cross_entropy_rows(x, t) is None
    got = tg.cross_entropy(tg.tensor(x), t, reduction="none").numpy()
    # the log_softmax op's own NumPy kernel keeps the semantics (inf - inf: NaN, ...)
    want = 0.0 - F._log_softmax_kernel(x, -1)[np.arange(2), t]
    np.testing.assert_array_equal(got, want)


def test_other_cases_keep_the_numpy_path():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 4))
    t = rng.integers(0, 4, 6)
    base = F._cross_entropy_c(x, t, "mean", None, -100, 0.0)
    assert base is not None
    for args in [(x, t.astype(np.int32), "mean", None, -100, 0.0),
                 (x, t, "mean", np.ones(4), -100, 0.0),
                 (x, t, "mean", None, -100, 0.1),
                 (x, t, "mean", None, 2, 0.0),               # a label may be ignored
                 (x.astype(np.float16), t, "mean", None, -100, 0.0),
                 (np.asfortranarray(x), t, "mean", None, -100, 0.0),
                 (x.reshape(2, 3, 4), t.reshape(2, 3), "mean", None, -100, 0.0)]:
        assert F._cross_entropy_c(*args) is None
    t2 = t.copy()
    t2[1] = -100                                     # an ignored row: the general path
    got = tg.cross_entropy(tg.tensor(x), t2).numpy()
    rows, _ = _ref(x, np.where(t2 < 0, 0, t2))
    np.testing.assert_allclose(got, rows[t2 >= 0].mean(), rtol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_minus_one_hot_is_bit_identical(dtype):
    rng = np.random.default_rng(6)
    p = rng.random((9, 5)).astype(dtype)
    t = rng.integers(0, 5, 9)
    want = p.copy()
    want[np.arange(9), t] -= 1
    got = F._minus_one_hot_kernel(p, t)
    assert got.dtype == dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_step_equals_eager_bit_for_bit(dtype):
    def make():
        rng = np.random.default_rng(7)
        w = tg.tensor((rng.standard_normal((8, 5)) * 0.3).astype(dtype), requires_grad=True)
        return w

    def step_of(w):
        def step(x, y):
            w.grad = None
            loss = tg.cross_entropy(tg.relu(x) @ w, y)
            loss.backward()
            with tg.no_grad():
                w.sub_(0.1 * w.grad)
            return loss
        return step

    we, wc = make(), make()
    eager, compiled = step_of(we), tg.compile(step_of(wc))
    rng = np.random.default_rng(8)
    for _ in range(4):
        x = (rng.standard_normal((16, 8))).astype(dtype)
        y = rng.integers(0, 5, 16)
        le, lc = eager(tg.tensor(x), y), compiled(tg.tensor(x), y)
        assert le.numpy().tobytes() == lc.numpy().tobytes()
        assert we.numpy().tobytes() == wc.numpy().tobytes()
        assert we.grad.numpy().tobytes() == wc.grad.numpy().tobytes()
    assert compiled.cache_info().hits >= 2


@pytest.mark.parametrize("dtype", DTYPES)
def test_rows_kernel_exponentials_are_numpys(dtype):
    # The kernel's softmax is NumPy's exp of the shifted logits over a row sum taken in
    # double, left to right (cumsum is sequential), rounded once: the same bits.
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((37, 13)) * 5).astype(dtype)
    t = rng.integers(0, 13, 37)
    picked, probs = K.cross_entropy_rows(x, t)
    z = x - x.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = np.cumsum(e.astype(np.float64), axis=1)[:, -1].astype(dtype)
    np.testing.assert_array_equal(probs, e / s[:, None])
    # the log is libm's (one a row), NumPy's is SIMD: an ulp apart at most
    np.testing.assert_array_max_ulp(picked, z[np.arange(37), t] - np.log(s), maxulp=1)
