"""Forward mode (issue 17, item 1): tg.jvp, tg.forward_ad, tg.jacfwd/jacrev, tg.linearize,
tg.hessian(outer_jacobian_strategy="forward-mode"), nested levels, and the engine's
refusals. References: central finite differences, and reverse mode (tg.jacobian), which is
independently checked against finite differences by the contract kit."""

import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _engine, _forward

fwAD = tg.forward_ad
RNG = np.random.default_rng(17)


def fd_jvp(f, x, v, eps=1e-6):
    """Central difference of f along v (float64)."""
    xa, va = np.asarray(x, dtype=np.float64), np.asarray(v, dtype=np.float64)
    hi = np.asarray(f(tg.tensor(xa + eps * va)))
    lo = np.asarray(f(tg.tensor(xa - eps * va)))
    return (hi - lo) / (2 * eps)


def fd_jacobian(f, x, eps=1e-6):
    xa = np.asarray(x, dtype=np.float64)
    cols = []
    for e in range(xa.size):
        v = np.zeros(xa.size)
        v[e] = 1.0
        cols.append(fd_jvp(f, xa, v.reshape(xa.shape), eps))
    return np.stack(cols, axis=-1).reshape(np.shape(cols[0]) + xa.shape)


FUNCTIONS = {
    "tanh_matvec": lambda x: tg.tanh(tg.tensor(np.arange(12.0).reshape(3, 4) / 7) @ x),
    "softmax": lambda x: tg.exp(2.0 * x) / tg.exp(2.0 * x).sum(),
    "norm_ratio": lambda x: x / tg.sqrt((x * x).sum() + 1.0),
    "exp_log": lambda x: tg.log1p(tg.exp(x)) * tg.sin(x),
    "reshape_sum": lambda x: tg.reshape(x, (2, 2)).sum(axis=0) ** 3,
    "where_max": lambda x: tg.where(x > 0.1, x * x, -x).max() + tg.cumsum(x, axis=0),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jvp_matches_finite_differences_and_reverse_mode(name):
    f = FUNCTIONS[name]
    x = RNG.standard_normal(4)
    v = RNG.standard_normal(4)
    out, t = tg.jvp(f, tg.tensor(x), tg.tensor(v))
    np.testing.assert_allclose(out.numpy(), np.asarray(f(tg.tensor(x))), rtol=1e-12)
    np.testing.assert_allclose(t.numpy(), fd_jvp(f, x, v), rtol=1e-6, atol=1e-8)
    jac = tg.jacobian(f, tg.tensor(x)).numpy()
    np.testing.assert_allclose(t.numpy(), jac @ v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jacfwd_equals_jacrev_and_finite_differences(name):
    f = FUNCTIONS[name]
    x = tg.tensor(RNG.standard_normal(4))
    fwd = tg.jacfwd(f)(x).numpy()
    rev = tg.jacrev(f)(x).numpy()
    np.testing.assert_allclose(fwd, rev, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fwd, fd_jacobian(f, x.numpy()), rtol=1e-6, atol=1e-8)


def test_jvp_is_forward_mode_no_backward_pass():
    # A forward-mode jvp runs no backward: nothing is recorded on a leaf that requires grad.
    x = tg.tensor([0.3, -0.2])
    out, t = tg.jvp(lambda x: tg.exp(x) * x, x, tg.tensor([1.0, 1.0]))
    assert not out.requires_grad and not t.requires_grad
    np.testing.assert_allclose(t.numpy(), np.exp(x.numpy()) * (1 + x.numpy()), rtol=1e-12)


def test_jvp_several_inputs_and_outputs():
    a, b = tg.tensor([0.5, 1.5]), tg.tensor([2.0, -1.0])
    va, vb = tg.tensor([1.0, 0.0]), tg.tensor([0.0, 1.0])
    outs, ts = tg.jvp(lambda a, b: (a * b, tg.sin(a) + b), (a, b), (va, vb))
    np.testing.assert_allclose(ts[0].numpy(), va.numpy() * b.numpy() + a.numpy() * vb.numpy())
    np.testing.assert_allclose(ts[1].numpy(), np.cos(a.numpy()) * va.numpy() + vb.numpy())


def test_jvp_output_independent_of_input_is_zero_or_refused_when_strict():
    x = tg.tensor([1.0, 2.0])
    _, t = tg.jvp(lambda x: tg.ones(3) * 2.0, x, tg.tensor([1.0, 1.0]))
    np.testing.assert_array_equal(t.numpy(), np.zeros(3))
    with pytest.raises(RuntimeError, match="strict"):
        tg.jvp(lambda x: tg.ones(3), x, tg.tensor([1.0, 1.0]), strict=True)


def test_forward_ad_dual_level_make_unpack():
    x = tg.tensor([0.0, 1.0])
    with fwAD.dual_level() as level:
        d = fwAD.make_dual(x, tg.tensor([1.0, 2.0]))
        y = d * d
        primal, tangent = fwAD.unpack_dual(y)
        np.testing.assert_array_equal(primal.numpy(), [0.0, 1.0])
        np.testing.assert_array_equal(tangent.numpy(), [0.0, 4.0])
        assert fwAD.unpack_dual(primal).tangent is None
        assert fwAD.unpack_dual(x).tangent is None        # the primal itself is untouched
        assert fwAD.unpack_dual(y, level=level).tangent is tangent
    # after the level closed, nothing carries its tangent
    assert fwAD.unpack_dual(y).tangent is None
    assert not _engine.forward_active()


def test_forward_ad_errors():
    x = tg.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="no forward level is open"):
        fwAD.make_dual(x, tg.tensor([1.0, 1.0]))
    with fwAD.dual_level():
        with pytest.raises(ValueError, match="shape"):
            fwAD.make_dual(x, tg.tensor([1.0, 1.0, 1.0]))
        with pytest.raises(TypeError, match="dtype"):
            fwAD.make_dual(x, tg.tensor([1.0, 1.0], dtype=np.float32))
        with pytest.raises(TypeError, match="floating-point"):
            fwAD.make_dual(tg.tensor([1, 2]), tg.tensor([1.0, 1.0]))
    outer = fwAD.enter_dual_level()
    inner = fwAD.enter_dual_level()
    with pytest.raises(RuntimeError, match="reverse order"):
        fwAD.exit_dual_level(level=outer)
    fwAD.exit_dual_level(level=inner)
    fwAD.exit_dual_level()
    assert not _engine.forward_active()


def test_forward_mode_is_not_affected_by_no_grad():
    with tg.no_grad():
        _, t = tg.jvp(lambda x: x ** 3, tg.tensor(2.0), tg.tensor(1.0))
    assert float(t) == pytest.approx(12.0)


def test_nested_levels_give_second_derivative_without_perturbation_confusion():
    # d/dx [x * d/dy (x * y)] = d/dx [x * x] = 2x; confusing the levels gives x or 3x.
    x0 = 1.5

    def outer(x):
        return x * tg.jvp(lambda y: x * y, tg.tensor(1.0), tg.tensor(1.0))[1]

    _, t = tg.jvp(outer, tg.tensor(x0), tg.tensor(1.0))
    assert float(t) == pytest.approx(2 * x0, rel=1e-12)


def f_scalar(x):
    return (tg.exp(x) * tg.tanh(x)).sum() + (x[0] * x[1] * x[2])


def test_hessian_forward_over_reverse_matches_reverse_over_reverse_and_fd():
    x = tg.tensor(RNG.standard_normal(3))
    fwd = tg.hessian(f_scalar, x, outer_jacobian_strategy="forward-mode").numpy()
    rev = tg.hessian(f_scalar, x).numpy()
    np.testing.assert_allclose(fwd, rev, rtol=1e-10, atol=1e-12)
    grad = lambda z: tg.jacrev(f_scalar)(z)
    np.testing.assert_allclose(fwd, fd_jacobian(grad, x.numpy()), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="outer_jacobian_strategy"):
        tg.hessian(f_scalar, x, outer_jacobian_strategy="sideways")


@pytest.mark.parametrize("outer,inner", [("jacfwd", "jacrev"), ("jacrev", "jacfwd"),
                                         ("jacfwd", "jacfwd"), ("jacrev", "jacrev")])
def test_nested_jacobians_give_the_hessian(outer, inner):
    x = tg.tensor(RNG.standard_normal(3))
    h = getattr(tg, outer)(getattr(tg, inner)(f_scalar))(x).numpy()
    np.testing.assert_allclose(h, tg.hessian(f_scalar, x).numpy(), rtol=1e-10, atol=1e-12)


def test_third_derivative_forward_over_forward_over_reverse():
    f = lambda x: tg.sin(x) * x
    x0 = 0.7
    d3 = tg.jacfwd(tg.jacfwd(tg.jacrev(f)))(tg.tensor(x0))
    # d3/dx3 (x sin x) = -3 sin x - x cos x
    assert float(d3) == pytest.approx(-3 * np.sin(x0) - x0 * np.cos(x0), rel=1e-10)


def test_reverse_over_forward_grad_of_a_jvp():
    # d/dx <J(x) v, u> for f = x^3 elementwise: 6 x v u
    x = tg.tensor([0.5, -1.0], requires_grad=True)
    v, u = tg.tensor([1.0, 2.0]), tg.tensor([3.0, 1.0])
    _, t = tg.jvp(lambda z: z ** 3, x, v)
    assert t.requires_grad
    (g,) = tg.grad((t * u).sum(), x)
    np.testing.assert_allclose(g.numpy(), 6 * x.numpy() * v.numpy() * u.numpy(), rtol=1e-12)


def test_jacfwd_argnums_and_shapes():
    f = lambda a, b: tg.reshape(a, (2, 1)) * b
    a, b = tg.tensor([1.0, 2.0]), tg.tensor([3.0, 4.0, 5.0])
    ja, jb = tg.jacfwd(f, argnums=(0, 1))(a, b)
    assert ja.shape == (2, 3, 2) and jb.shape == (2, 3, 3)
    ra, rb = tg.jacrev(f, argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ja.numpy(), ra.numpy())
    np.testing.assert_allclose(jb.numpy(), rb.numpy())
    assert tg.jacfwd(f, argnums=1)(a, b).shape == (2, 3, 3)
    with pytest.raises(ValueError, match="argnums"):
        tg.jacfwd(f, argnums=2)(a, b)


def test_linearize():
    f = lambda x: tg.sin(x) * x
    x = tg.tensor([0.2, 0.9])
    out, f_jvp = tg.linearize(f, x)
    np.testing.assert_allclose(out.numpy(), np.sin(x.numpy()) * x.numpy())
    v = tg.tensor([1.0, -2.0])
    np.testing.assert_allclose(f_jvp(v).numpy(), fd_jvp(f, x.numpy(), v.numpy()), rtol=1e-7)
    with pytest.raises(TypeError, match="tangents"):
        f_jvp(v, v)


def test_in_place_on_a_dual_tensor_updates_its_tangent():
    x = tg.tensor([1.0, 2.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, tg.tensor([1.0, 1.0])) * 1.0     # a non-view dual
        d.mul_(d)                                               # d <- d^2
        np.testing.assert_allclose(fwAD.unpack_dual(d).tangent.numpy(), [2.0, 4.0])
        d[0] = 0.0                                              # constant written in
        np.testing.assert_allclose(fwAD.unpack_dual(d).tangent.numpy(), [0.0, 4.0])
        view = d[1:]
        with pytest.raises(RuntimeError, match="view"):
            view.mul_(2.0)


def test_tg_function_without_jvp_is_refused_and_with_jvp_works():
    class Cube(tg.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return tg.tensor(x.numpy() ** 3)            # arrays: no tangent would flow

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    with pytest.raises(NotImplementedError, match="jvp"):
        tg.jvp(Cube.apply, tg.tensor(2.0), tg.tensor(1.0))

    class CubeJ(Cube):
        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 3 * x * x * t

    _, t = tg.jvp(CubeJ.apply, tg.tensor(2.0), tg.tensor(1.0))
    assert float(t) == pytest.approx(12.0)


@pytest.fixture
def op_without_jvp():
    """A third-party op (cube) registered without a JVP rule."""
    def vjp(g, ans, x):
        return (g * 3.0 * x * x,)

    op = _engine.Op("_test_cube_nojvp", "tests", {"cpu": lambda a: a ** 3}, vjp, None, 1,
                    False, (), None, False, True, [], "", None, True)
    _forward._warned.discard(op.name)
    return op


def test_op_without_jvp_falls_back_to_the_exact_double_vjp_with_a_note(op_without_jvp):
    x = tg.tensor([0.5, 2.0])
    with pytest.warns(_forward.ForwardFallbackWarning, match="_test_cube_nojvp"):
        _, t = tg.jvp(op_without_jvp, x, tg.tensor([1.0, 1.0]))
    np.testing.assert_allclose(t.numpy(), 3 * x.numpy() ** 2, rtol=1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # one-time: the second call is silent
        tg.jvp(op_without_jvp, x, tg.tensor([1.0, 1.0]))


def test_reverse_over_the_fallback_is_refused_not_zero(op_without_jvp):
    x = tg.tensor([0.5, 2.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, t = tg.jvp(op_without_jvp, x, tg.tensor([1.0, 1.0]))
    with pytest.raises(NotImplementedError, match="no forward-mode"):
        tg.grad(t.sum(), x)


def test_compiled_function_inside_forward_mode_runs_eagerly_with_a_warning():
    step = tg.compile(lambda x: tg.sin(x) * x)
    x = tg.tensor([0.3, 1.2])
    step(x)                                       # recorded outside forward mode
    with pytest.warns(tg.CompileWarning, match="forward-mode"):
        _, t = tg.jvp(step, x, tg.tensor([1.0, 1.0]))
    np.testing.assert_allclose(t.numpy(), np.cos(x.numpy()) * x.numpy() + np.sin(x.numpy()),
                               rtol=1e-12)
