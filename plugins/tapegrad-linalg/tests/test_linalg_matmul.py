"""matmul and the @ operator: values against NumPy for every case, gradient shapes and
values against the closed forms, second derivatives, and errors."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import gradcheck

RNG = np.random.default_rng(5)

# (x shape, y shape): every case numpy.matmul has.
CASES = [
    ((3,), (3,)),                  # vector . vector -> 0-d
    ((2, 3), (3,)),                # matrix @ vector
    ((3,), (3, 4)),                # vector @ matrix
    ((2, 3), (3, 4)),              # matrix @ matrix
    ((2, 2, 3), (2, 3, 4)),        # batch @ batch
    ((2, 1, 3, 4), (5, 4, 2)),     # batch dimensions broadcast -> (2, 5, 3, 2)
    ((1, 3, 4), (2, 4, 2)),        # a length-1 batch axis stretches
    ((2, 3, 4), (4, 2)),           # batch @ matrix
    ((3, 4), (2, 4, 5)),           # matrix @ batch
    ((4,), (2, 4, 3)),             # vector @ batch
    ((2, 3, 4), (4,)),             # batch @ vector
    ((2, 1, 3, 4), (4,)),          # 4-d batch @ vector
    ((0, 3), (3, 2)),              # empty
    ((2, 0), (0, 3)),              # empty inner dimension: zeros
]
IDS = [f"{a}@{b}" for a, b in CASES]


def rand(shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def leaf(a):
    return tg.tensor(a, requires_grad=True)


def numpy_grads(a, b, g):
    """d <g, a @ b> / d(a, b) by the textbook rule on promoted operands, in NumPy."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = np.asarray(g)
    if b.ndim == 1:
        g2 = g2[..., None]
    if a.ndim == 1:
        g2 = np.expand_dims(g2, -2)
    ga = g2 @ np.swapaxes(b2, -1, -2)
    gb = np.swapaxes(a2, -1, -2) @ g2

    def down(t, shape):
        lead = t.ndim - len(shape)
        t = t.sum(axis=tuple(range(lead)))
        axes = tuple(i for i, s in enumerate(shape) if s == 1 and t.shape[i] != 1)
        return t.sum(axis=axes, keepdims=True)

    ga = down(ga, a2.shape).reshape(a.shape)
    gb = down(gb, b2.shape).reshape(b.shape)
    return ga, gb


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("xs, ys", CASES, ids=IDS)
def test_values_match_numpy(xs, ys, dtype):
    a, b = rand(xs, dtype), rand(ys, dtype)
    out = leaf(a) @ leaf(b)
    expected = np.matmul(a, b)
    assert isinstance(out, tg.Tensor)
    assert out.shape == expected.shape
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(tg.matmul(a, leaf(b)).numpy(), expected)


def test_broadcast_batch_shape():
    assert (leaf(rand((2, 1, 3, 4))) @ leaf(rand((5, 4, 2)))).shape == (2, 5, 3, 2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("xs, ys", CASES, ids=IDS)
def test_gradients_match_the_closed_form_in_shape_and_dtype(xs, ys, dtype):
    a, b = rand(xs, dtype), rand(ys, dtype)
    x, y = leaf(a), leaf(b)
    out = x @ y
    g = rand(out.shape, dtype)
    out.backward(tg.tensor(g))
    ga, gb = numpy_grads(a, b, g)
    assert x.grad.shape == a.shape and y.grad.shape == b.shape
    assert x.grad.dtype == dtype and y.grad.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(x.grad.numpy(), ga, rtol=tol, atol=tol)
    np.testing.assert_allclose(y.grad.numpy(), gb, rtol=tol, atol=tol)


@pytest.mark.parametrize("xs, ys", [c for c in CASES if 0 not in c[0] + c[1]],
                         ids=[i for i, c in zip(IDS, CASES) if 0 not in c[0] + c[1]])
def test_gradients_match_finite_differences(xs, ys):
    assert gradcheck(tg.matmul, (leaf(rand(xs)), leaf(rand(ys))))


def test_only_the_inputs_that_require_grad_get_one():
    x, w = tg.tensor(rand((4, 3))), leaf(rand((3, 2)))
    (x @ w).sum().backward()
    assert x.grad is None
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ np.ones((4, 2)))


def test_mixed_dtypes_promote_and_cast_each_gradient_back():
    x, w = leaf(rand((4, 3), np.float32)), leaf(rand((3, 2)))
    out = x @ w
    assert out.dtype == np.float64
    out.sum().backward()
    assert x.grad.dtype == np.float32 and w.grad.dtype == np.float64


def test_an_integer_operand_is_a_constant():
    w = leaf(rand((3, 2)))
    out = tg.tensor(np.arange(6).reshape(2, 3)) @ w
    np.testing.assert_array_equal(out.numpy(), np.arange(6).reshape(2, 3) @ w.numpy())
    out.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.arange(6).reshape(2, 3).T @ np.ones((2, 2)))


def test_integer_tensors_multiply_without_a_graph():
    a = np.arange(6).reshape(2, 3)
    out = tg.tensor(a) @ tg.tensor(a.T)
    assert out.dtype == np.int64 and not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), a @ a.T)


def test_operator_forms_and_numpy_dispatch():
    a, b = rand((2, 3)), rand((3, 4))
    x = leaf(a)
    for out in (x @ b, a @ leaf(b), np.matmul(x, b), x.matmul(b), tg.matmul(x, b)):
        assert isinstance(out, tg.Tensor) and out.requires_grad
        np.testing.assert_array_equal(out.numpy(), a @ b)


def test_the_rule_saves_the_inputs_and_not_the_result():
    # An in-place change of the result does not invalidate matmul's gradient (h = x @ w;
    # h += b is the Linear layer), while a change of an input it reads is caught.
    x, w, b = leaf(rand((4, 3))), leaf(rand((3, 2))), leaf(rand(2))
    h = x @ w
    h += b
    h.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), x.numpy().T @ np.ones((4, 2)))
    u = tg.tanh(leaf(rand((3, 2))))
    h = x @ u
    u += 1.0
    with pytest.raises(RuntimeError, match="matmul"):
        h.sum().backward()


# NOTE: [matmul's BLAS calls] (docs/linalg.md, "Matmul and the BLAS"): a linear layer's
# product and gradients are NumPy's own calls, x @ w, g @ w.T and x.T @ g on transposed
# views, so they have NumPy's bits and C order (relu_backward's C loop and tg.compile's
# reused outputs need C order). (64, 32, 128) runs OpenBLAS's unpacked "direct" sgemm
# for the forward; (64, 512, 512) is past its size limit, where every call is packed.
@pytest.mark.parametrize("batch, n_in, n_out", [(32, 64, 128), (64, 32, 128), (64, 512, 512)],
                         ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_linear_layer_has_numpy_hand_written_bits_and_c_order(batch, n_in, n_out, dtype):
    a, w0, g = rand((batch, n_in), dtype), rand((n_in, n_out), dtype), rand((batch, n_out), dtype)
    x, w = leaf(a), leaf(w0)
    out = x @ w
    out.backward(tg.tensor(g))
    for got, expected in ((out, a @ w0), (x.grad, g @ w0.T), (w.grad, a.T @ g)):
        assert got.numpy().flags.c_contiguous
        np.testing.assert_array_equal(got.numpy(), expected)


def test_the_plain_backward_shortcut_is_taken_only_where_nothing_records():
    # matmul's 2-D rule computes g @ y.T and x.T @ g on the raw arrays in a plain backward
    # (tapegrad._engine.plain_gradient); under create_graph it must record instead, so
    # the gradient is differentiable: d<df/dX, V>/dX = 2 A^T A V for f = sum((A X)^2).
    from tapegrad._engine import log_reads, plain_gradient
    A_, X_, V_ = rand((4, 3)), rand((3, 2)), rand((3, 2))
    A, X = leaf(A_), leaf(X_)
    ((A @ X) ** 2).sum().backward()
    assert not X.grad.requires_grad and X.grad.grad_fn is None
    np.testing.assert_allclose(X.grad.numpy(), 2 * A_.T @ A_ @ X_, rtol=1e-12)
    A.grad = X.grad = None
    ((A @ X) ** 2).sum().backward(create_graph=True)
    gX = X.grad
    assert gX.requires_grad
    X.grad = A.grad = None
    (gX * tg.tensor(V_)).sum().backward()
    np.testing.assert_allclose(X.grad.numpy(), 2 * A_.T @ A_ @ V_, rtol=1e-12)
    # the predicate: off with grad mode on, with an open read log, for tangents
    g = tg.ones((2, 2))
    assert not plain_gradient(g)
    with tg.no_grad():
        assert plain_gradient(g)
        previous = log_reads([])
        try:
            assert not plain_gradient(g)
        finally:
            log_reads(previous)
        assert plain_gradient(g) and not plain_gradient(np.ones(2))


# ---------------------------------------------------------------------------------------
# Second derivatives
# ---------------------------------------------------------------------------------------

def test_hessian_vector_product_of_a_squared_norm():
    # f(A, x) = sum((A @ x) ** 2): df/dx = 2 A^T A x, and d<df/dx, v>/dx = 2 A^T A v,
    # d<df/dx, v>/dA = 2 (A v) x^T + 2 (A x) v^T.
    A_, x_, v_ = rand((4, 3)), rand(3), rand(3)
    A, x = leaf(A_), leaf(x_)
    f = ((A @ x) ** 2).sum()
    f.backward(create_graph=True)
    gx = x.grad
    np.testing.assert_allclose(gx.numpy(), 2 * A_.T @ A_ @ x_, rtol=1e-12)
    assert gx.requires_grad
    x.grad = A.grad = None
    (gx * tg.tensor(v_)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * A_.T @ A_ @ v_, rtol=1e-12)
    np.testing.assert_allclose(A.grad.numpy(), 2 * np.outer(A_ @ v_, x_) + 2 * np.outer(A_ @ x_, v_),
                               rtol=1e-12)


@pytest.mark.parametrize("xs, ys", [c for c in CASES if 0 not in c[0] + c[1]],
                         ids=[i for i, c in zip(IDS, CASES) if 0 not in c[0] + c[1]])
def test_second_derivatives_match_finite_differences(xs, ys):
    # d/dy of (g @ y^T) and d/dx of (x^T @ g): the gradient of each input, differentiated
    # again with respect to the other input.
    a, b = rand(xs), rand(ys)
    g = rand(np.matmul(a, b).shape)

    def grad_x(y):
        x = leaf(a)
        with tg.enable_grad():       # gradcheck's finite differences run under no_grad
            (x @ y).backward(tg.tensor(g), create_graph=True)
        return x.grad

    def grad_y(x):
        y = leaf(b)
        with tg.enable_grad():
            (x @ y).backward(tg.tensor(g), create_graph=True)
        return y.grad

    assert gradcheck(grad_x, leaf(b))
    assert gradcheck(grad_y, leaf(a))


def test_third_derivative_of_a_cubic_form():
    # f(x) = (x @ A @ x) * (x @ x); gradcheck of the Hessian-vector product checks third
    # derivatives through matmul.
    A_ = rand((3, 3))
    v = tg.tensor(rand(3))

    def hvp(x):
        with tg.enable_grad():       # gradcheck's finite differences run under no_grad
            if not x.requires_grad:
                x = x.detach().requires_grad_()
            f = (x @ tg.tensor(A_) @ x) * (x @ x)
            (gx,) = _grads(f, x)
            (h,) = _grads((gx * v).sum(), x)
        return h

    assert gradcheck(hvp, leaf(rand(3)))


def _grads(out, x):
    """d out / d x with a graph, without touching x.grad for the caller."""
    saved, x.grad = x.grad, None
    out.backward(create_graph=True)
    g, x.grad = x.grad, saved
    return (g,)


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("xs, ys", [((3, 4), (5, 2)), ((3,), (4,)), ((2, 3), (2,)),
                                    ((3,), (2, 3)), ((2, 3, 4), (2, 3, 2))], ids=str)
def test_mismatched_inner_dimensions_name_the_op_and_both_shapes(xs, ys):
    with pytest.raises(ValueError, match="matmul: inner dimensions differ") as info:
        leaf(rand(xs)) @ leaf(rand(ys))
    assert str(xs) in str(info.value) and str(ys) in str(info.value)


def test_batch_dimensions_that_do_not_broadcast_raise():
    with pytest.raises(ValueError, match=r"matmul: batch dimensions \(2,\).*\(5,\).*do not broadcast"):
        tg.ones((2, 3, 4)) @ tg.ones((5, 4, 2))


@pytest.mark.parametrize("x, y", [(lambda: tg.tensor(2.0), lambda: tg.ones(3)),
                                  (lambda: tg.ones((2, 3)), lambda: tg.tensor(1.0)),
                                  (lambda: tg.ones((2, 3)), lambda: 2.0)],
                         ids=["0-d x", "0-d y", "python scalar"])
def test_0d_operands_are_refused_as_in_numpy(x, y):
    with pytest.raises(ValueError, match="matmul: 0-d operands are not allowed"):
        x() @ y()


# Note: [matmul through a transposed copy] (tapegrad/_array_kernels.pyx): W2's g @ W.T
# runs through a C copy of W.T on every path, so all give one answer.
def test_a_linear_layer_gradient_eager_compiled_and_create_graph_agree_bit_for_bit():
    # every path that computes g @ W.T goes through the same kernel
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((32, 128)).astype(np.float32)
    w0 = rng.standard_normal((128, 128)).astype(np.float32)
    g0 = rng.standard_normal((32, 128)).astype(np.float32)

    def grads(create_graph=False):
        x, w = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
        (x @ w).backward(tg.tensor(g0), create_graph=create_graph)
        return x.grad.numpy(), w.grad.numpy()

    def step(x, w, g):
        (x @ w).backward(g)
        return x.grad, w.grad

    eager = grads()
    xs, ws = tg.tensor(x0, requires_grad=True), tg.tensor(w0, requires_grad=True)
    compiled = tg.compile(step)
    for _ in range(3):
        xs.grad = ws.grad = None
        cx, cw = compiled(xs, ws, tg.tensor(g0))
    for got in (grads(create_graph=True), (cx.numpy(), cw.numpy())):
        for a, b in zip(got, eager):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(eager[0], np.matmul(g0, np.ascontiguousarray(w0.T)))
