"""gradgradcheck, the contract kit's second-order and JVP checks, capability tags, and ops
registered with twice_differentiable=False. Core ops and test-defined plugins only."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


class SecondOrderPlugin:
    """Test ops whose first derivative is right and whose second is not (or is declared
    missing), and one with a forward-mode rule."""

    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        cube = lambda x: x ** 3
        # The rule computes 3x^2 with NumPy: right value, but a constant for the engine,
        # so the second derivative comes out as a silent zero.
        registry.register_op(
            "cube_numpy_rule", kernels={"cpu": cube},
            vjp=lambda g, ans, x: (tg.times(g, tg.asarray(3.0 * np.asarray(x) ** 2)),),
            save_ans=False, samples=[(_rand(3),)])
        # The same rule, declared: differentiating its gradient must raise.
        registry.register_op(
            "cube_declared", kernels={"cpu": lambda x, scale=1.0: scale * x ** 3},
            vjp=lambda g, ans, x, scale=1.0: (
                tg.times(g, tg.asarray(3.0 * scale * np.asarray(x) ** 2)),),
            twice_differentiable=False, save_ans=False,
            samples=[(_rand(3),), tg.Sample(_rand(2, 2), scale=2.0)])
        # Right in x, but the rule cuts g off the graph: wrong in grad_outputs.
        registry.register_op(
            "double_detached_g", kernels={"cpu": lambda x: x + x},
            vjp=lambda g, ans, x: (tg.add(g.detach(), g.detach()),),
            save_inputs=(False,), save_ans=False, samples=[(_rand(3),)])
        # A forward-mode rule (right), and one that is wrong.
        registry.register_op(
            "times_jvp", kernels={"cpu": np.multiply},
            vjp=lambda g, ans, x, y: (tg.times(g, y), tg.times(g, x)),
            jvp=lambda t, ans, x, y: tg.add(tg.times(t[0], y), tg.times(x, t[1])),
            save_ans=False, samples=[(_rand(3, 4), _rand(4, seed=1))])
        registry.register_op(
            "wrong_jvp", kernels={"cpu": lambda x: x + x},
            vjp=lambda g, ans, x: (tg.add(g, g),),
            jvp=lambda t, ans, x: t[0],                  # should be 2 t
            save_inputs=(False,), save_ans=False, samples=[(_rand(3),)])


@pytest.fixture
def second_order(times):
    name = tg.register_plugin(SecondOrderPlugin(), name="test-second-order")
    yield
    tg.unregister_plugin(name)


# -- gradgradcheck ---------------------------------------------------------------------

def test_gradgradcheck_passes_correct_second_derivatives(times):
    x = tg.tensor(_rand(2, 3), requires_grad=True)
    y = tg.tensor(_rand(3, seed=1), requires_grad=True)
    assert tg.gradgradcheck(lambda a, b: tg.add(tg.times(a, b), tg.cube(a)), (x, y)) is True


def test_gradgradcheck_passes_a_linear_function_whose_second_derivative_is_zero():
    x = tg.tensor(_rand(4), requires_grad=True)
    assert tg.gradgradcheck(lambda a: tg.add(a, tg.sum_to_shape(tg.broadcast_to(a, (2, 4)), shape=(4,))), x)


def test_gradgradcheck_is_exported_lazily_from_the_core():
    assert tg.gradgradcheck is tgt.gradgradcheck
    assert tg.GradcheckError is tgt.GradcheckError


def test_gradgradcheck_reports_a_silent_zero_second_derivative(second_order):
    x = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    assert tg.gradcheck(tg.cube_numpy_rule, x)              # the first derivative is right
    with pytest.raises(tgt.GradcheckError) as info:
        tg.gradgradcheck(tg.cube_numpy_rule, x)
    msg = str(info.value)
    # The worst entry: d/dx_2 of the gradient of input 0 is 6 x_2 = 12 times the seed.
    assert "second-order gradient check failed for input 0 at index (2,)" in msg
    assert "the gradient of input 0, element 2" in msg
    assert "analytic 0 vs numeric" in msg


def test_gradgradcheck_names_a_grad_output_the_gradient_is_cut_from(second_order):
    x = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    assert tg.gradcheck(tg.double_detached_g, x)
    with pytest.raises(tgt.GradcheckError, match=r"for grad_output 0 at index \(\d,\).*analytic 0 vs numeric 2"):
        tg.gradgradcheck(tg.double_detached_g, x)


def test_gradgradcheck_takes_grad_outputs(times):
    x = tg.tensor(_rand(3), requires_grad=True)
    v = tg.tensor(_rand(3, seed=4))                    # a constant: checked in x only
    assert tg.gradgradcheck(tg.cube, x, v)
    assert tg.gradgradcheck(tg.cube, x, (tg.tensor(_rand(3, seed=5), requires_grad=True),))
    with pytest.raises(ValueError, match="grad_output 0 has shape \\(2,\\), but output 0 has shape \\(3,\\)"):
        tg.gradgradcheck(tg.cube, x, tg.ones(2))
    with pytest.raises(ValueError, match="2 grad_outputs for 1 outputs"):
        tg.gradgradcheck(tg.cube, x, (tg.ones(3), tg.ones(3)))


def test_gradgradcheck_refuses_float32_unless_upcast(times):
    x = tg.tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(TypeError, match="gradgradcheck: input 0 is float32.*float64"):
        tg.gradgradcheck(tg.cube, x)
    assert tg.gradgradcheck(tg.cube, x, upcast=True)


def test_gradgradcheck_needs_something_to_differentiate():
    with pytest.raises(ValueError, match="no input requires grad"):
        tg.gradgradcheck(lambda a: tg.add(a, 1.0), tg.tensor([1.0]))
    x = tg.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="no output of f requires grad"):
        tg.gradgradcheck(lambda a: a.detach(), x)


def test_gradgradcheck_shares_the_finite_difference_engine(times, monkeypatch):
    calls = []
    real = tgt.numeric_jacobian
    monkeypatch.setattr(tgt, "numeric_jacobian", lambda *a: calls.append(1) or real(*a))
    tg.gradgradcheck(tg.cube, tg.tensor(_rand(2), requires_grad=True))
    assert calls == [1]


def test_gradgradcheck_within_no_grad_still_builds_the_graph(times):
    x = tg.tensor(_rand(3), requires_grad=True)
    with tg.no_grad():
        assert tg.gradgradcheck(tg.cube, x)
        assert tg.gradcheck(tg.cube, x)


# -- twice_differentiable=False ----------------------------------------------------------

def test_an_op_that_is_not_twice_differentiable_raises_when_differentiated_twice(second_order):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = tg.cube_declared(x)
    y.backward(tg.ones(2), create_graph=True)
    assert x.grad.tolist() == [3.0, 12.0]                  # the first derivative works
    assert x.grad.requires_grad
    with pytest.raises(RuntimeError, match="'cube_declared' is not twice differentiable"):
        tg.backward(x.grad, tg.ones(2))


def test_not_twice_differentiable_costs_nothing_without_create_graph(second_order):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    tg.cube_declared(x, 2.0).backward(tg.ones(2))          # parameters still bind by position
    assert x.grad.tolist() == [6.0, 24.0]
    assert not x.grad.requires_grad


def test_gradgradcheck_of_an_op_that_is_not_twice_differentiable_raises(second_order):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="not twice differentiable"):
        tg.gradgradcheck(tg.cube_declared, x)


def test_check_op_checks_that_double_backward_raises(second_order):
    report = tgt.check_op("cube_declared")
    assert "double backward raises (twice_differentiable=False)" in report.checks
    assert "float64 second derivatives (gradgradcheck)" not in report.checks
    assert report.capabilities == {"backward"}


def test_check_op_catches_a_silent_zero_second_derivative(second_order):
    with pytest.raises(tgt.GradcheckError, match="cube_numpy_rule.*second-order gradient check failed"):
        tgt.check_op("cube_numpy_rule")


def test_check_op_reports_a_function_that_calls_an_undeclared_op(second_order):
    class Fn:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_function("uses_declared", lambda x: tg.add(tg.cube_declared(x), x),
                                       samples=[(_rand(3),)])

    name = tg.register_plugin(Fn(), name="test-uses-declared")
    try:
        report = tgt.check_op("uses_declared")
        assert any("double backward raises" in c for c in report.checks)
        assert report.capabilities == {"backward"}
    finally:
        tg.unregister_plugin(name)


# -- forward-mode rules and capabilities -----------------------------------------------------

def test_check_op_checks_a_jvp_rule(second_order):
    report = tgt.check_op("times_jvp")
    assert "float64 JVP rule vs finite differences" in report.checks
    assert report.capabilities == {"backward", "double_backward", "forward_mode", "jvp_rule"}
    with pytest.raises(tgt.GradcheckError, match="wrong_jvp.*JVP check failed"):
        tgt.check_op("wrong_jvp")


def test_capabilities_of_core_ops():
    assert tgt.capabilities("add") == {"backward", "double_backward", "forward_mode", "jvp_rule",
                                       "batching_rule"}
    assert tgt.capabilities(tg.registry().ops["zeros_like"]) == {"batching_rule"}


@pytest.mark.parametrize("name", sorted(n for n, op in tg.registry().ops.items()
                                        if op.plugin == "tapegrad" and op.vjp is not None))
def test_core_ops_pass_gradgradcheck_in_the_kit(name):
    report = tgt.check_op(name)
    assert "float64 second derivatives (gradgradcheck)" in report.checks
    assert "double_backward" in report.capabilities
