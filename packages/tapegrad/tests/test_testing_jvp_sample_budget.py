"""How many samples the contract kit spends on each JVP check: the rule against finite
differences and against the VJP rule on every sample, its own gradient (reverse over
forward) on the first two samples and the first broadcasting one. Core ops and
test-defined plugins only."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt

VALUES = "float64 JVP rule vs finite differences"
TRANSPOSE = "JVP rule is the transpose of the VJP rule"
REVERSE_OVER_FORWARD = "float64 JVP rule differentiable (reverse over forward)"


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# Three samples of equal shapes, then (index 3) one that broadcasts, then one more.
SAMPLES = [(_rand(3, 4, seed=s), _rand(3, 4, seed=s + 10)) for s in range(3)]
SAMPLES += [(_rand(3, 4, seed=3), _rand(4, seed=13)), (_rand(2, 2, seed=4), _rand(2, 2, seed=14))]


def _times_jvp_detaching_y_when_broadcast(t, ans, x, y):
    # Right values everywhere; but where y broadcasts, y is cut off the rule's graph, so
    # the tangent's derivative in y is a silent zero: only reverse over forward sees it.
    y_in_rule = y.detach() if x.shape != y.shape else y
    return tg.add(tg.times(t[0], y_in_rule), tg.times(x, t[1]))


class JvpBudgetPlugin:
    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        registry.register_op(
            "times_right_jvp", kernels={"cpu": np.multiply},
            vjp=lambda g, ans, x, y: (tg.times(g, y), tg.times(g, x)),
            jvp=lambda t, ans, x, y: tg.add(tg.times(t[0], y), tg.times(x, t[1])),
            save_ans=False, samples=SAMPLES)
        registry.register_op(
            "times_jvp_graph_cut_when_broadcast", kernels={"cpu": np.multiply},
            vjp=lambda g, ans, x, y: (tg.times(g, y), tg.times(g, x)),
            jvp=_times_jvp_detaching_y_when_broadcast, save_ans=False, samples=SAMPLES)


@pytest.fixture
def jvp_budget(times):
    name = tg.register_plugin(JvpBudgetPlugin(), name="test-jvp-budget")
    yield
    tg.unregister_plugin(name)


def test_values_and_transpose_are_checked_on_every_sample_and_the_rules_gradient_on_three(
        jvp_budget):
    checks = tgt.check_op("times_right_jvp").checks
    assert checks.count(VALUES) == len(SAMPLES) == 5
    assert checks.count(TRANSPOSE) == 5
    assert checks.count(REVERSE_OVER_FORWARD) == 3          # samples 0, 1 and 3


def test_a_rule_whose_graph_is_cut_only_when_broadcasting_is_caught_on_that_sample(jvp_budget):
    # The rule is wrong there (gradcheck of its output along fixed tangents: the finite
    # differences in y give t_x, the rule's graph gives zero) ...
    rule = tg.registry().ops["times_jvp_graph_cut_when_broadcast"].jvp
    x, y = SAMPLES[3]
    tangents = (tg.tensor(_rand(*x.shape, seed=5)), tg.tensor(_rand(*y.shape, seed=6)))
    with pytest.raises(tgt.GradcheckError):
        tg.gradcheck(lambda a, b: rule(tangents, None, a, b),
                     (tg.tensor(x, requires_grad=True), tg.tensor(y, requires_grad=True)))
    # ... right on the other samples, and the kit finds it on sample 3, a broadcasting one.
    with pytest.raises(tgt.GradcheckError, match=r"(?s)sample 3 .*reverse over forward"):
        tgt.check_op("times_jvp_graph_cut_when_broadcast")
