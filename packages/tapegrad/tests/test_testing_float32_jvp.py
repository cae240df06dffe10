"""The contract kit checks that an op's JVP rule itself keeps a float32 output's dtype
(the engine casts a tangent to the output's dtype, which would hide a rule that
silently computes in float64). Core ops and test-defined plugins only."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt

CHECK = "float32 JVP rule keeps the dtype"
SAMPLES = [(np.random.default_rng(0).standard_normal((3, 4)),
            np.random.default_rng(1).standard_normal((3, 4)))]


def _product_jvp(t, ans, x, y):
    return tg.add(tg.times(t[0], y), tg.times(x, t[1]))


class Float32JvpPlugin:
    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        for name, jvp in (("times_f32_jvp", _product_jvp),
                          ("times_f64_jvp", lambda *a: tg.astype(_product_jvp(*a), np.float64))):
            registry.register_op(
                name, kernels={"cpu": np.multiply},
                vjp=lambda g, ans, x, y: (tg.times(g, y), tg.times(g, x)),
                jvp=jvp, save_ans=False, samples=SAMPLES)


@pytest.fixture
def float32_jvp_ops(times):
    name = tg.register_plugin(Float32JvpPlugin(), name="test-float32-jvp")
    yield
    tg.unregister_plugin(name)


def test_a_rule_that_keeps_float32_passes_the_check(float32_jvp_ops):
    assert CHECK in tgt.check_op("times_f32_jvp").checks


def test_a_rule_that_returns_float64_for_float32_inputs_is_caught(float32_jvp_ops):
    with pytest.raises(tgt.ContractError, match="JVP rule returned float64, the output is float32"):
        tgt.check_op("times_f64_jvp")
