"""vjp, jvp, jacobian, hessian, hvp: structure, shapes, strategies, options and errors."""

import numpy as np
import pytest
import tapegrad as tg


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _numeric_jacobian(f, x0, eps=1e-6):
    """d f / d x by central differences, shape f(x).shape + x.shape (NumPy in, NumPy out)."""
    out = np.asarray(f(x0))
    J = np.zeros(out.shape + x0.shape)
    for k in np.ndindex(*x0.shape):
        d = np.zeros_like(x0)
        d[k] = eps
        J[(Ellipsis,) + k] = (np.asarray(f(x0 + d)) - np.asarray(f(x0 - d))) / (2 * eps)
    return J


W = _rand(3, 4, seed=1)


def f_matrix_out(x):                # (4,) -> (3, 2)
    h = tg.tanh(tg.tensor(W) @ x)
    return tg.stack([h, h * h], axis=1)


def np_matrix_out(x):
    h = np.tanh(W @ x)
    return np.stack([h, h * h], axis=1)


# -- jacobian ----------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["auto", "reverse-mode", "forward-mode"])
def test_jacobian_keeps_output_then_input_shapes(strategy):
    x0 = _rand(4)
    J = tg.jacobian(f_matrix_out, tg.tensor(x0), strategy=strategy)
    assert J.shape == (3, 2, 4)
    np.testing.assert_allclose(J.numpy(), _numeric_jacobian(np_matrix_out, x0), atol=1e-8)
    assert not J.requires_grad


def test_jacobian_of_a_matrix_input_and_a_scalar_output():
    x0 = _rand(2, 3)
    J = tg.jacobian(lambda x: (x * x).sum(), tg.tensor(x0))
    assert J.shape == (2, 3)
    np.testing.assert_allclose(J.numpy(), 2 * x0)
    J = tg.jacobian(lambda x: tg.exp(x), tg.tensor(x0))
    assert J.shape == (2, 3, 2, 3)
    np.testing.assert_allclose(J.numpy().reshape(6, 6), np.diag(np.exp(x0).ravel()))


def test_jacobian_with_several_inputs_and_outputs_is_nested_tuples():
    x0, y0 = _rand(3), _rand(2, seed=2)

    def f(x, y):
        return x * y.sum(), (x[:2] * y).sum()

    (Jxa, Jya), (Jxb, Jyb) = tg.jacobian(f, (tg.tensor(x0), tg.tensor(y0)))
    assert (Jxa.shape, Jya.shape, Jxb.shape, Jyb.shape) == ((3, 3), (3, 2), (3,), (2,))
    np.testing.assert_allclose(Jxa.numpy(), np.eye(3) * y0.sum())
    np.testing.assert_allclose(Jya.numpy(), np.outer(x0, np.ones(2)))
    np.testing.assert_allclose(Jxb.numpy(), np.r_[y0, 0.0])
    np.testing.assert_allclose(Jyb.numpy(), x0[:2])
    # a 1-tuple of inputs gives 1-tuples; a single tensor gives a tensor
    (J,) = tg.jacobian(lambda x: x * 2.0, (tg.tensor(x0),))
    assert J.shape == (3, 3)


def test_tall_and_wide_jacobians_agree_across_strategies():
    A = _rand(40, 3, seed=4)
    x = tg.tensor(_rand(3))
    f = lambda x: tg.sin(tg.tensor(A) @ x)                  # tall: 40 x 3
    Js = [tg.jacobian(f, x, strategy=s).numpy() for s in ("auto", "reverse-mode", "forward-mode")]
    for J in Js[1:]:
        np.testing.assert_allclose(J, Js[0], atol=1e-14)
    Jv = tg.jacobian(lambda x: tg.sin(x @ tg.tensor(A).T), x, vectorize=True).numpy()
    np.testing.assert_allclose(Jv, Js[0], atol=1e-14)


def test_auto_strategy_uses_columns_only_for_tall_jacobians(monkeypatch):
    from tapegrad_higher import functional
    used = []
    for name in ("_rows", "_columns"):
        real = getattr(functional, name)
        monkeypatch.setattr(functional, name,
                            lambda *a, _r=real, _n=name: used.append(_n) or _r(*a))
    x = tg.tensor(_rand(2))
    tg.jacobian(lambda x: tg.stack([x[0], x[1], x[0] * x[1], x[0] + x[1], x[1] * 2.0]), x)
    tg.jacobian(lambda x: tg.stack([x[0] * x[1], x[0]]), x)
    assert used == ["_columns", "_rows"]


def test_outputs_that_do_not_depend_on_an_input_give_zeros_or_raise_when_strict():
    x, y = tg.tensor(_rand(3)), tg.tensor(_rand(2))
    Jx, Jy = tg.jacobian(lambda x, y: x * 2.0, (x, y))
    assert Jy.shape == (3, 2) and not Jy.numpy().any()
    J = tg.jacobian(lambda x: tg.ones(2), x)                 # constant function
    assert J.shape == (2, 3) and not J.numpy().any()
    with pytest.raises(RuntimeError, match="output 0 does not depend on input 1"):
        tg.jacobian(lambda x, y: x * 2.0, (x, y), strict=True)


def test_jacobian_with_create_graph_is_differentiable():
    x = tg.tensor([0.5, -0.3], requires_grad=True)
    J = tg.jacobian(lambda z: z ** 3, x, create_graph=True)
    assert J.requires_grad
    (g,) = tg.grad(J.sum(), x)                               # d/dx sum(diag(3x^2)) = 6x
    np.testing.assert_allclose(g.numpy(), 6 * x.numpy())


def test_jacobian_does_not_touch_the_inputs_graph_or_grad():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3.0
    J = tg.jacobian(lambda z: z * z, h)
    np.testing.assert_allclose(J.numpy(), np.diag([6.0, 12.0]))
    assert not J.requires_grad and x.grad is None


def test_float32_stays_float32():
    x = tg.tensor(np.array([0.5, 1.5], np.float32))
    J = tg.jacobian(lambda z: tg.exp(z), x)
    assert J.dtype == np.float32
    assert tg.hessian(lambda z: (z ** 3).sum(), x).dtype == np.float32


def test_vectorize_is_exact_for_functions_that_mix_a_leading_axis():
    # vectorize=True is vmap over the backward pass (issue 17 item 3): f is not
    # re-evaluated on a batch, so it need not treat a leading axis independently (the old
    # batched-evaluation path refused these)
    x = tg.tensor(_rand(3))
    Wt = tg.tensor(_rand(3, 3))
    A = tg.tensor(_rand(2, 3))
    for f in (lambda z: z[0:2] + z[1:3], lambda z: Wt @ z, lambda z: A @ z):
        np.testing.assert_allclose(tg.jacobian(f, x, vectorize=True).numpy(),
                                   tg.jacobian(f, x).numpy(), rtol=1e-13, atol=1e-15)


def test_jacobian_errors():
    with pytest.raises(TypeError, match="input 0 has dtype int64"):
        tg.jacobian(lambda z: z, tg.tensor([1, 2]))
    with pytest.raises(TypeError, match="output 1 is float"):
        tg.jacobian(lambda z: (z, 1.0), tg.tensor([1.0]))
    with pytest.raises(ValueError, match="strategy must be"):
        tg.jacobian(lambda z: z, tg.tensor([1.0]), strategy="sideways")


# -- hessian -------------------------------------------------------------------------------

def test_hessian_of_several_inputs_is_a_tuple_of_tuples():
    x0, y0 = _rand(2), _rand(3, seed=5)

    def f(x, y):
        return (x ** 2).sum() * (y ** 3).sum()

    (Hxx, Hxy), (Hyx, Hyy) = tg.hessian(f, (tg.tensor(x0), tg.tensor(y0)))
    assert (Hxx.shape, Hxy.shape, Hyx.shape, Hyy.shape) == ((2, 2), (2, 3), (3, 2), (3, 3))
    np.testing.assert_allclose(Hxx.numpy(), 2 * np.eye(2) * (y0 ** 3).sum())
    np.testing.assert_allclose(Hxy.numpy(), np.outer(2 * x0, 3 * y0 ** 2))
    np.testing.assert_allclose(Hyx.numpy(), Hxy.numpy().T)
    np.testing.assert_allclose(Hyy.numpy(), np.diag(6 * y0) * (x0 ** 2).sum())


def test_hessian_of_a_matrix_input_keeps_its_shape():
    x0 = _rand(2, 2)
    H = tg.hessian(lambda x: (x ** 3).sum(), tg.tensor(x0))
    assert H.shape == (2, 2, 2, 2)
    np.testing.assert_allclose(H.numpy().reshape(4, 4), np.diag(6 * x0.ravel()))


def test_hessian_of_a_linear_function_is_zero():
    H = tg.hessian(lambda x: (x * 3.0).sum(), tg.tensor(_rand(3)))
    assert H.shape == (3, 3) and not H.numpy().any()


def test_hessian_needs_a_scalar_function():
    with pytest.raises(ValueError, match="hessian: f must return a single tensor with one element"):
        tg.hessian(lambda x: x * x, tg.tensor(_rand(3)))
    with pytest.raises(ValueError, match="scalar"):
        tg.hvp(lambda x: x * x, tg.tensor(_rand(3)), tg.tensor(_rand(3)))


# -- vjp, jvp, hvp ---------------------------------------------------------------------------

def test_vjp_is_v_transpose_J():
    x0 = _rand(4)
    v = _rand(3, 2, seed=7)
    out, g = tg.vjp(f_matrix_out, tg.tensor(x0), tg.tensor(v))
    J = _numeric_jacobian(np_matrix_out, x0)
    np.testing.assert_allclose(out.numpy(), np_matrix_out(x0))
    np.testing.assert_allclose(g.numpy(), np.tensordot(v, J, axes=2), atol=1e-8)
    assert not out.requires_grad and not g.requires_grad


def test_vjp_of_a_scalar_function_may_omit_v():
    out, g = tg.vjp(lambda x: (x * x).sum(), tg.tensor([1.0, 2.0]))
    assert out.item() == 5.0 and g.tolist() == [2.0, 4.0]
    with pytest.raises(ValueError, match="v may be omitted only"):
        tg.vjp(lambda x: x * x, tg.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="v\\[0\\] has shape \\(3,\\), but output 0 has shape \\(2,\\)"):
        tg.vjp(lambda x: x * x, tg.tensor([1.0, 2.0]), tg.ones(3))


def test_jvp_is_J_v_for_every_strategy_of_forming_it():
    x0 = _rand(4)
    v = _rand(4, seed=8)
    out, t = tg.jvp(f_matrix_out, tg.tensor(x0), tg.tensor(v))
    J = _numeric_jacobian(np_matrix_out, x0)
    assert t.shape == (3, 2)
    np.testing.assert_allclose(t.numpy(), J @ v, atol=1e-8)
    np.testing.assert_allclose(out.numpy(), np_matrix_out(x0))


def test_jvp_with_several_inputs_and_outputs():
    x, y = tg.tensor([1.0, 2.0]), tg.tensor(3.0)
    (a, b), (ta, tb) = tg.jvp(lambda x, y: (x * y, tg.sin(y)), (x, y),
                              (tg.tensor([1.0, 0.0]), tg.tensor(1.0)))
    np.testing.assert_allclose(ta.numpy(), [1.0 * 3.0 + 1.0 * 1.0, 2.0 * 1.0])
    np.testing.assert_allclose(tb.item(), np.cos(3.0))
    _, t = tg.jvp(lambda x: x ** 2, tg.tensor(3.0))             # v omitted: one element
    assert t.item() == 6.0


def test_jvp_with_create_graph_is_differentiable():
    x = tg.tensor([0.5, 1.5], requires_grad=True)
    v = tg.tensor([1.0, 1.0])
    _, t = tg.jvp(lambda z: z ** 3, x, v, create_graph=True)     # 3 x^2 v
    (g,) = tg.grad(t.sum(), x)
    np.testing.assert_allclose(g.numpy(), 6 * x.numpy())


def test_hvp_with_several_inputs():
    x, y = tg.tensor([1.0, 2.0]), tg.tensor([0.5])
    f = lambda x, y: (x * x).sum() * y.sum()
    _, (hx, hy) = tg.hvp(f, (x, y), (tg.tensor([1.0, 0.0]), tg.tensor([2.0])))
    # H = [[2y I, 2x], [2x^T, 0]]
    np.testing.assert_allclose(hx.numpy(), [2 * 0.5 * 1.0 + 2 * 1.0 * 2.0, 2 * 2.0 * 2.0])
    np.testing.assert_allclose(hy.numpy(), [2 * 1.0 * 1.0])


def test_hvp_of_a_function_linear_in_one_input_gives_zeros_or_raises_when_strict():
    x, y = tg.tensor([1.0, 2.0]), tg.tensor([0.5])
    _, (hx, hy) = tg.hvp(lambda x, y: (x * x).sum() + y.sum(), (x, y), (tg.ones(2), tg.ones(1)))
    assert hx.tolist() == [2.0, 2.0] and hy.tolist() == [0.0]
    with pytest.raises(RuntimeError, match="does not depend on input 1"):
        tg.hvp(lambda x, y: (x * x).sum() + y.sum(), (x, y), (tg.ones(2), tg.ones(1)), strict=True)


def test_transforms_accept_arrays_and_leave_user_tensors_alone():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    tg.hessian(lambda z: (z ** 3).sum(), x)
    tg.jacobian(lambda z: z * 2.0, np.array([1.0, 2.0]))
    assert x.grad is None and x.is_leaf


# -- the ambient grad mode ------------------------------------------------------------------
# A transform computes its derivative whatever the ambient mode (torch.func's rule); only
# the graph of its result follows the mode.

def _cube_sum(z):
    return (z ** 3).sum()


TRANSFORMS = {
    "vjp": lambda x, cg: tg.vjp(lambda z: z ** 3, x, tg.ones(3), create_graph=cg)[1],
    "jvp": lambda x, cg: tg.jvp(lambda z: z ** 3, x, tg.ones(3), create_graph=cg)[1],
    "hvp": lambda x, cg: tg.hvp(_cube_sum, x, tg.ones(3), create_graph=cg)[1],
    "jacobian": lambda x, cg: tg.jacobian(lambda z: z ** 3, x, create_graph=cg),
    "jacobian-vectorized": lambda x, cg: tg.jacobian(lambda z: z ** 3, x, create_graph=cg,
                                                     vectorize=True),
    "jacobian-columns": lambda x, cg: tg.jacobian(lambda z: tg.stack([z ** 3] * 3), x,
                                                  create_graph=cg, strategy="forward-mode"),
    "hessian": lambda x, cg: tg.hessian(_cube_sum, x, create_graph=cg),
}
X3 = np.array([0.5, -1.0, 2.0])


@pytest.mark.parametrize("name", TRANSFORMS)
@pytest.mark.parametrize("create_graph", [True, False])
def test_transforms_under_no_grad_compute_their_derivative(name, create_graph):
    expected = TRANSFORMS[name](tg.tensor(X3), False).numpy()
    assert np.any(expected != 0)
    x = tg.tensor(X3, requires_grad=True)
    with tg.no_grad():
        got = TRANSFORMS[name](x, create_graph)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-14)
    assert not got.requires_grad           # the result's graph follows the ambient mode
    got = TRANSFORMS[name](x, create_graph)
    assert got.requires_grad == create_graph


@pytest.mark.parametrize("name", TRANSFORMS)
def test_gradcheck_of_a_function_that_uses_a_transform(name):
    # gradcheck evaluates f under no_grad: it reported false failures before.
    assert tg.gradcheck(lambda x: TRANSFORMS[name](x, True), (tg.tensor(X3, requires_grad=True),))


@pytest.mark.parametrize("f", [
    lambda a: a * a.mean(),
    lambda a: (a - a.mean()) / a.std(),
    lambda a: a * tg.sum(a * a),
    lambda a: tg.stack([a.sum(), (a * a).sum()]),
], ids=["a*mean", "standardize", "a*sum(a^2)", "full-reductions"])
def test_vectorize_is_exact_for_functions_that_reduce_over_every_axis(f):
    # the functions that fooled the old batched evaluation (their rows looked
    # independent): vmap over the VJP gives their exact Jacobian
    x = tg.tensor(np.array([0.5, -1.0, 2.0, 0.25]))
    numeric = _numeric_jacobian(lambda v: f(tg.tensor(v)).numpy(), X4)
    np.testing.assert_allclose(tg.jacobian(f, x).numpy(), numeric, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(tg.jacobian(f, x, vectorize=True).numpy(), numeric,
                               rtol=1e-6, atol=1e-8)


X4 = np.array([0.5, -1.0, 2.0, 0.25])


def test_vectorized_hessian_is_exact_for_any_scalar_function():
    x = tg.tensor(X4)
    f = lambda a: (a ** 3 * a.mean()).sum()
    np.testing.assert_allclose(tg.hessian(f, x, vectorize=True).numpy(),
                               tg.hessian(f, x).numpy(), rtol=1e-13, atol=1e-15)
    g = lambda a: (a ** 3).sum(axis=-1)
    np.testing.assert_allclose(tg.hessian(g, x, vectorize=True).numpy(), np.diag(6 * X4), rtol=1e-14)


@pytest.mark.parametrize("f", [
    lambda a: tg.tanh(a) * 2, lambda a: a @ tg.tensor(W.T[:4, :3]), lambda a: a[..., ::-1] * a],
    ids=["elementwise", "matmul", "reverse"])
def test_vectorize_still_accepts_batch_independent_functions(f):
    x = tg.tensor(X4)
    np.testing.assert_allclose(tg.jacobian(f, x, vectorize=True).numpy(), tg.jacobian(f, x).numpy(),
                               rtol=1e-12, atol=1e-15)
