"""cross_entropy's plain backward without op dispatch (functional._plain_labels_vjp,
session 10 "w2eager"): in a plain first-order backward with integer labels, 'mean', no
weight or smoothing, the rule computes (softmax - one_hot) * g / N straight from the
forward's softmax. Checked here: the gradient against that formula written in NumPy
from the forward's softmax (bit for bit: the same IEEE operations in the same dtype)
and against the extended-precision closed form; an upstream gradient other than 1; and
the cases that must leave the fast path and keep the general path's semantics (an
ignored row, create_graph, other reductions)."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad_nn import _kernels as K

DTYPES = [np.float32, np.float64]


def _data(dtype, n=32, c=10, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, c)) * 3).astype(dtype), rng.integers(0, c, n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("upstream", [1.0, 3.0, -0.7])
def test_gradient_is_the_formula_bit_for_bit(dtype, upstream):
    x_np, t = _data(dtype)
    x = tg.tensor(x_np, requires_grad=True)
    (tg.cross_entropy(x, t) * upstream).backward()
    _, probs = K.cross_entropy_rows(x_np, t)
    hot = probs.copy()
    hot[np.arange(len(t)), t] -= 1
    # g flowing into cross_entropy is upstream (a 0-d array of x's dtype); 'mean' divides
    # it by N in that dtype, then scales every row
    g = np.asarray(upstream, dtype) * np.ones((), dtype)
    want = hot * (g / dtype(len(t)))
    assert x.grad.dtype == dtype
    np.testing.assert_array_equal(x.grad.numpy().view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_against_extended_precision(dtype):
    x_np, t = _data(dtype, n=7, c=129, seed=4)
    x = tg.tensor(x_np, requires_grad=True)
    tg.cross_entropy(x, t).backward()
    z = x_np.astype(np.longdouble)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    p[np.arange(7), t] -= 1
    tol = dict(rtol=3e-6, atol=3e-7) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(x.grad.numpy(), (p / 7).astype(np.float64), **tol)


def test_an_ignored_row_keeps_the_general_path():
    # label -100 (the default ignore_index) in one row: that row gets no gradient and the
    # mean is over the other rows (PyTorch's), not the fast path's division by N
    x_np, t = _data(np.float64, n=5, c=4, seed=2)
    t[3] = -100
    x = tg.tensor(x_np, requires_grad=True)
    tg.cross_entropy(x, t).backward()
    e = np.exp(x_np - x_np.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    kept = [0, 1, 2, 4]
    p[kept, t[kept]] -= 1
    p[3] = 0
    np.testing.assert_allclose(x.grad.numpy(), p / 4, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_other_reductions_match_the_closed_form(reduction):
    x_np, t = _data(np.float64, n=6, c=5, seed=5)
    x = tg.tensor(x_np, requires_grad=True)
    tg.sum(tg.cross_entropy(x, t, reduction=reduction)).backward()
    e = np.exp(x_np - x_np.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    p[np.arange(6), t] -= 1
    np.testing.assert_allclose(x.grad.numpy(), p, rtol=1e-13, atol=1e-15)


def test_create_graph_keeps_a_differentiable_gradient():
    # under create_graph the rule gets no aux (the fast path does not run) and the
    # gradient must itself be differentiable: d/dx of sum(grad * v) is softmax's Hessian
    # applied to v, checked against central finite differences of the closed form
    x_np, t = _data(np.float64, n=3, c=4, seed=6)
    v = np.random.default_rng(7).standard_normal((3, 4))
    x = tg.tensor(x_np, requires_grad=True)
    tg.cross_entropy(x, t).backward(create_graph=True)      # (tg.grad is tapegrad-higher's)
    gx = x.grad
    assert gx.requires_grad
    x.grad = None
    tg.sum(gx * tg.tensor(v)).backward()
    hv = x.grad

    def grad_of(xv):
        e = np.exp(xv - xv.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        p[np.arange(3), t] -= 1
        return p / 3

    h = 1e-6
    fd = np.zeros_like(x_np)
    for i in np.ndindex(x_np.shape):
        d = np.zeros_like(x_np)
        d[i] = h
        fd[i] = ((grad_of(x_np + d) - grad_of(x_np - d)) * v).sum() / (2 * h)
    np.testing.assert_allclose(hv.numpy(), fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gx.numpy(), grad_of(x_np), rtol=1e-13, atol=1e-15)
