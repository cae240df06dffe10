import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt


class WrongRule:
    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        registry.register_op(
            "wrong_double", kernels={"cpu": lambda x: x + x},
            vjp=lambda g, ans, x: (g,),            # should be 2g
            save_inputs=(False,), save_ans=False,
            samples=[(np.array([1.0, 2.0, 3.0]),)])
        registry.register_op(
            "no_samples", kernels={"cpu": lambda x: x + x},
            vjp=lambda g, ans, x: (g + g,), save_inputs=(False,), save_ans=False)


@pytest.fixture
def wrong():
    plugin = WrongRule()
    name = tg.register_plugin(plugin, name="wrong")
    yield plugin
    tg.unregister_plugin(name)


def test_gradcheck_passes_a_correct_gradient(times):
    x = tg.tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
    y = tg.tensor(np.random.default_rng(1).standard_normal(3), requires_grad=True)
    assert tg.gradcheck(lambda a, b: times(a, b) + a, (x, y)) is True


def test_gradcheck_reports_the_worst_entry(wrong):
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(tgt.GradcheckError, match=r"input 0 at index \(\d,\).*analytic 1 vs numeric 2"):
        tg.gradcheck(tg.wrong_double, x)


def test_gradcheck_refuses_float32_unless_upcast(times):
    x = tg.tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(TypeError, match="float64.*rounding"):
        tg.gradcheck(lambda a: times(a, a), x)
    assert tg.gradcheck(lambda a: times(a, a), x, upcast=True)


def test_gradcheck_needs_an_input_that_requires_grad():
    with pytest.raises(ValueError, match="nothing to check"):
        tg.gradcheck(lambda a: a + 1.0, tg.tensor([1.0]))


def test_check_op_and_check_plugin(wrong):
    with pytest.raises(tgt.GradcheckError, match="wrong_double"):
        tgt.check_op("wrong_double")
    with pytest.raises(tgt.ContractError, match="no_samples.*registers no samples"):
        tgt.check_op("no_samples")
    with pytest.raises(tgt.ContractError, match="2 of 2 ops fail"):
        tgt.check_plugin(wrong)


def test_check_op_refuses_a_rule_that_reads_the_values_of_its_gradient_in_python():
    # Within gradcheck's tolerance, but a Python number taken from g is baked into any
    # recording: a replay with another g would compute something else.
    class ReadsG:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_op(
                "reads_g", kernels={"cpu": lambda x: x + x},
                vjp=lambda g, ans, x: (g + g + 1e-9 * float(g.numpy().flat[0]),),
                save_inputs=(False,), save_ans=False,
                samples=[(np.array([1.0, -2.0, 0.5]),)])

    name = tg.register_plugin(ReadsG(), name="reads_g")
    try:
        with pytest.raises(tgt.ContractError, match="reads_g.*replayed with another differs.*"
                                                    "no Python branching"):
            tgt.check_op("reads_g")
    finally:
        tg.unregister_plugin(name)
    assert "gradient rule replays for any output gradient" in tgt.check_op("add").checks


def test_check_op_checks_a_function_that_writes_in_place_on_a_copy():
    # np.copyto-like functions write into an argument and return None: the kit checks
    # "write into a copy, return the copy", and refuses one that returns something.
    def add_into(dst, src):
        dst += src

    def add_into_returning(dst, src):
        dst += src
        return dst

    class Writers:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            for name, fn in [("add_into", add_into), ("add_into_returning", add_into_returning)]:
                registry.register_function(name, fn, method=False, writes_into=0,
                                           samples=[(np.array([1.0, 2.0]), np.array([0.5]))])

    name = tg.register_plugin(Writers(), name="writers")
    try:
        checks = tgt.check_op("add_into").checks
        assert "float64 gradient vs finite differences" in checks
        assert "float64 second derivatives (gradgradcheck)" in checks
        with pytest.raises(tgt.ContractError, match="add_into_returning.*must return None"):
            tgt.check_op("add_into_returning")
    finally:
        tg.unregister_plugin(name)


def test_check_plugin_registers_an_unregistered_plugin():
    class Neg:
        @tg.hookimpl
        def tapegrad_register_ops(self, registry):
            registry.register_op("neg_t", kernels={"cpu": np.negative},
                                 vjp=lambda g, ans, x: (tg.neg_t(g),),
                                 save_inputs=(False,), save_ans=False,
                                 samples=[(np.array([1.0, -2.0]),)])

    plugin = Neg()
    try:
        reports = tgt.check_plugin(plugin)
        assert reports[0].name == "neg_t" and "float64 gradient vs finite differences" in reports[0].checks
    finally:
        tg.unregister_plugin(tg.registry().plugin_name(plugin))


@pytest.mark.parametrize("name", sorted(n for n, op in tg.registry().ops.items() if op.plugin == "tapegrad"))
def test_core_ops_keep_the_contract(name):
    report = tgt.check_op(name)
    assert report.checks


# -- check_jvp ----------------------------------------------------------------------------
# (ops with their own JVP rules: the double-VJP fallback needs multiply, which the core
# alone does not have)

def _times_jvp(t, ans, x, y):
    tx, ty = t
    terms = ([tg.times(tx, y)] if tx is not None else []) + \
        ([tg.times(x, ty)] if ty is not None else [])
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


class ForwardRules:
    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        registry.register_op(
            "times_with_jvp", kernels={"cpu": np.multiply},
            vjp=lambda g, ans, x, y: (tg.times(g, y), tg.times(g, x)), jvp=_times_jvp,
            samples=[(np.ones(2), np.ones(2))])
        registry.register_op(
            "double_with_wrong_jvp", kernels={"cpu": lambda x: x + x},
            vjp=lambda g, ans, x: (g + g,), jvp=lambda t, ans, x: t[0],   # should be 2 t
            save_inputs=(False,), save_ans=False, samples=[(np.ones(2),)])


@pytest.fixture
def forward_rules(times):
    name = tg.register_plugin(ForwardRules(), name="test-forward-rules")
    yield
    tg.unregister_plugin(name)


def test_check_jvp_passes_forward_mode_and_returns_the_tangent(forward_rules):
    rng = np.random.default_rng(0)
    x, y, tx, ty = (rng.standard_normal(s) for s in ((2, 3), (3,), (2, 3), (3,)))
    got = tgt.check_jvp(lambda a, b: tg.times_with_jvp(a, b) + a, (x, y), (tx, ty))
    np.testing.assert_allclose(got, tx * y + x * ty + tx, rtol=1e-12)
    # one input held constant (None), a NumPy reference, a number input
    got = tgt.check_jvp(tg.times_with_jvp, (x, y), (None, ty), reference=np.multiply)
    np.testing.assert_allclose(got, x * ty, rtol=1e-12)
    np.testing.assert_array_equal(tgt.check_jvp(tg.add, (x, 2.5), (tx, None)), tx)


def test_check_jvp_of_a_tuple_output_returns_a_tuple():
    x, t = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    got = tgt.check_jvp(lambda a: (a + a, tg.add(a, 1.0)), x, t)
    assert isinstance(got, tuple) and len(got) == 2
    np.testing.assert_array_equal(got[0], 2 * t)
    np.testing.assert_array_equal(got[1], t)


def test_check_jvp_reports_a_dropped_tangent():
    x = np.array([1.0, 2.0, 3.0])
    with pytest.raises(tgt.GradcheckError, match=r"JVP check failed for output 0 at index "
                                                 r"\(\d,\): forward mode 1 vs numeric 2"):
        tgt.check_jvp(lambda a: a.detach() + a, x, np.ones(3))


def test_check_jvp_reports_a_wrong_rule(forward_rules):
    with pytest.raises(tgt.GradcheckError, match="forward mode 1 vs numeric 2"):
        tgt.check_jvp(tg.double_with_wrong_jvp, np.array([1.0, 2.0, 3.0]), np.ones(3))


def test_check_jvp_refuses_what_it_cannot_check():
    x = np.array([1.0, 2.0])
    with pytest.raises(ValueError, match="2 inputs but 1 tangents"):
        tgt.check_jvp(tg.add, (x, x), (x,))
    with pytest.raises(ValueError, match="no input has a tangent"):
        tgt.check_jvp(tg.add, (x, x), (None, None))
    with pytest.raises(TypeError, match="input 1 .* is not a floating-point tensor"):
        tgt.check_jvp(tg.add, (x, np.array([1, 2])), (x, x))
    with pytest.raises(ValueError, match=r"tangent 0 has shape \(3,\), its input \(2,\)"):
        tgt.check_jvp(tg.add, (x, x), (np.ones(3), None))
