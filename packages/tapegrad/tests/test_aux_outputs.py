"""register_op(aux=k): kernels that return auxiliary arrays for the first-order rule.

The test ops are written here with the core alone: ``aux_cube(x) = x**3``, whose kernel
also returns 3 x**2 (its derivative) as the auxiliary array. References are formulas
(3 x**2 g, 6 x g h) and finite differences, never the op's own output.
"""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing
from tapegrad import _engine
from tapegrad._engine import run_backward
from tapegrad._plugins import PluginError


def grad(y, x, g, create_graph=False):
    """tg.grad's core (tapegrad-higher's tg.grad is not a dependency of the core)."""
    return run_backward((y,), (g,), True, create_graph, (x,), True)

SEEN = []           # per rule call: whether it got aux arrays


def _mul_vjp(g, ans, a, b):
    return (tg.aux_mul(g, b) if tg.needs_grad(a) else None,
            tg.aux_mul(g, a) if tg.needs_grad(b) else None)


def _cube_kernel(x):
    return x ** 3, 3.0 * x * x


def _cube_vjp(g, ans, x, *, aux=None):
    SEEN.append(aux is not None)
    if aux is not None:
        return (tg.aux_mul(g, aux[0]),)
    return (tg.aux_mul(g, tg.aux_mul(tg.aux_mul(x, x), 3.0)),)


def _wrong_aux_vjp(g, ans, x, *, aux=None):       # wrong only where it reuses aux
    if aux is not None:
        return (tg.aux_mul(g, tg.aux_mul(aux[0], 2.0)),)
    return _cube_vjp(g, ans, x)


def _wrong_recompute_vjp(g, ans, x, *, aux=None):  # wrong only where it recomputes
    if aux is not None:
        return (tg.aux_mul(g, aux[0]),)
    return (tg.aux_mul(g, tg.aux_mul(x, 3.0)),)


SAMPLES = [(np.random.default_rng(0).uniform(-2, 2, (3, 2)),)]


class AuxOps:
    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        pair = [(np.array([0.5, -1.5]), np.array([2.0, 3.0]))]
        registry.register_op("aux_mul", kernels={"cpu": np.multiply}, vjp=_mul_vjp,
                             save_ans=False, samples=pair)
        registry.register_op("aux_cube", kernels={"cpu": _cube_kernel}, vjp=_cube_vjp,
                             save_ans=False, aux=1, samples=SAMPLES)
        registry.register_op("aux_cube_alone", kernels={"cpu": lambda x: x ** 3},
                             vjp=_cube_vjp, save_ans=False, aux=1, samples=SAMPLES)
        registry.register_op("aux_cube_wrong_aux", kernels={"cpu": _cube_kernel},
                             vjp=_wrong_aux_vjp, save_ans=False, aux=1, samples=SAMPLES)
        registry.register_op("aux_cube_wrong_recompute", kernels={"cpu": _cube_kernel},
                             vjp=_wrong_recompute_vjp, save_ans=False, aux=1, samples=SAMPLES)
        registry.register_op("aux_bad_length", kernels={"cpu": lambda x: (x * 1.0, x, x)},
                             vjp=_cube_vjp, aux=1, samples=SAMPLES)
        registry.register_op("aux_is_output", kernels={"cpu": lambda x: (lambda y: (y, y))(x * 2)},
                             vjp=_cube_vjp, aux=1, samples=SAMPLES)
        registry.register_op("aux_views_input", kernels={"cpu": lambda x: (x * 2, x[:1])},
                             vjp=_cube_vjp, aux=1, samples=SAMPLES)


@pytest.fixture(scope="module", autouse=True)
def aux_ops():
    name = tg.register_plugin(AuxOps(), name="aux-ops")
    yield
    tg.unregister_plugin(name)


def leaf(a):
    return tg.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


X = np.array([0.5, -1.0, 2.0])
G = np.array([1.0, 2.0, -0.5])


def test_a_plain_backward_hands_the_rule_its_aux_arrays():
    SEEN.clear()
    x = leaf(X)
    tg.aux_cube(x).backward(tg.tensor(G))
    assert SEEN == [True]
    np.testing.assert_allclose(x.grad.numpy(), 3 * X ** 2 * G)


def test_under_create_graph_the_rule_recomputes_so_second_order_is_right():
    SEEN.clear()
    x = leaf(X)
    (gx,) = grad(tg.aux_cube(x), x, tg.tensor(G), create_graph=True)
    assert SEEN == [False]
    h = np.array([0.3, -2.0, 1.5])
    (hx,) = grad(gx, x, tg.tensor(h))
    # d/dx <h, 3 x^2 g> = 6 x g h; with aux taken as a constant it would be 0.
    np.testing.assert_allclose(hx.numpy(), 6 * X * G * h)
    assert tg.gradgradcheck(lambda x: tg.aux_cube(x), [leaf(X)])


def test_a_replay_reuses_its_own_aux_not_the_recordings():
    SEEN.clear()
    f = tg.compile(lambda x: grad(tg.aux_cube(x), x, tg.tensor(G))[0])
    f.warn_when_eager = False
    f(leaf(X))
    assert SEEN == [True]           # recorded as eager runs it: the rule reuses aux
    x2 = np.array([1.5, 0.25, -3.0])
    np.testing.assert_allclose(f(leaf(x2)).numpy(), 3 * x2 ** 2 * G)
    assert f.cache_info().hits == 1 and SEEN == [True]


def test_a_replayed_backward_outside_reads_the_replays_aux():
    SEEN.clear()
    f = tg.compile(lambda x: tg.aux_cube(x))
    f.warn_when_eager = False
    f(leaf(X)).backward(tg.tensor(G))
    for x_new in (np.array([1.5, 0.25, -3.0]), np.array([-0.5, 4.0, 0.125])):
        x = leaf(x_new)
        y = f(x)
        y.backward(tg.tensor(G))
        np.testing.assert_allclose(y.numpy(), x_new ** 3)
        np.testing.assert_allclose(x.grad.numpy(), 3 * x_new ** 2 * G)   # not X's
    # the recording's hidden backward and its own eager one; replays run no rule
    assert f.cache_info().hits == 2 and SEEN == [True, True]


class _Toggle:
    """A kernel that returns (out, aux) when it records and the output alone later."""

    def __init__(self):
        self.with_aux = True

    def __call__(self, x):
        return (x ** 3, 3.0 * x * x) if self.with_aux else x ** 3


def test_a_replayed_aux_kernel_that_changes_its_result_form_is_refused():
    toggle = _Toggle()

    class TogglePlugin:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_op("aux_cube_toggle", kernels={"cpu": toggle}, vjp=_cube_vjp,
                                 save_ans=False, aux=1, samples=SAMPLES)

    name = tg.register_plugin(TogglePlugin(), name="aux-toggle")
    try:
        f = tg.compile(lambda x: grad(tg.aux_cube_toggle(x), x, tg.tensor(G))[0])
        f(leaf(X))
        toggle.with_aux = False
        with pytest.raises(RuntimeError, match="aux_cube_toggle|auxiliary arrays"):
            f(leaf(X))
    finally:
        tg.unregister_plugin(name)


def test_retain_graph_reuses_the_aux_arrays_for_a_second_backward():
    x = leaf(X)
    y = tg.aux_cube(x)
    assert len(y.grad_fn.saved_arrays()) == 2          # x and the aux array
    y.backward(tg.tensor(G), retain_graph=True)
    y.backward(tg.tensor(G))
    np.testing.assert_allclose(x.grad.numpy(), 2 * 3 * X ** 2 * G)
    assert y.grad_fn.saved_arrays() == []               # freed with the saved inputs


def test_without_grad_the_op_returns_the_output_only():
    with tg.no_grad():
        y = tg.aux_cube(leaf(X))
    assert isinstance(y, tg.Tensor) and y.shape == (3,)
    np.testing.assert_allclose(y.numpy(), X ** 3)


def test_a_kernel_may_return_the_output_alone_and_the_rule_then_recomputes():
    SEEN.clear()
    x = leaf(X)
    tg.aux_cube_alone(x).backward(tg.tensor(G))
    assert SEEN == [False]
    np.testing.assert_allclose(x.grad.numpy(), 3 * X ** 2 * G)


def test_bad_aux_results_raise_naming_the_op():
    with pytest.raises(TypeError, match=r"aux_bad_length.*aux=1.*length 3"):
        tg.aux_bad_length(leaf(X))
    with pytest.raises(ValueError, match=r"aux_is_output.*shares memory with the output"):
        tg.aux_is_output(leaf(X))
    with pytest.raises(ValueError, match=r"aux_views_input.*shares memory with input 0"):
        tg.aux_views_input(leaf(X))


@pytest.mark.parametrize("kwargs,match", [
    ({"aux": 1, "vjp": lambda g, ans, x: (g,)}, "must take a keyword argument aux=None"),
    ({"aux": -1, "vjp": _cube_vjp}, "aux must be the number"),
    ({"aux": True, "vjp": _cube_vjp}, "aux must be the number"),
    ({"aux": 1, "vjp": None, "nin": 1}, "needs a vjp"),
])
def test_register_op_refuses_a_bad_aux_declaration(kwargs, match):
    class Bad:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_op("aux_bad_decl", kernels={"cpu": _cube_kernel}, **kwargs)
    with pytest.raises(PluginError, match=match):
        tg.register_plugin(Bad(), name="aux-bad-decl")


def test_aux_is_not_taken_for_a_parameter_of_the_op():
    op = _engine.ops_table()["aux_cube"]
    assert op.params == () and op.n_aux == 1 and op.nin == 1


def test_the_contract_kit_checks_the_rule_with_and_without_aux():
    report = tapegrad.testing.check_op("aux_cube")
    assert "gradient with and without its aux arrays vs finite differences" in report.checks
    with pytest.raises(tapegrad.testing.GradcheckError):
        tapegrad.testing.check_op("aux_cube_wrong_aux")
    with pytest.raises(tapegrad.testing.GradcheckError, match="recomputing"):
        tapegrad.testing.check_op("aux_cube_wrong_recompute")
