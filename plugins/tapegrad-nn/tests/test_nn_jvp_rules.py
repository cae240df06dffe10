"""Forward-mode (JVP) rules of tapegrad-nn's ops (issue 17).

Every op of the plugin with a VJP has a JVP rule, and the contract kit checks each one
against finite differences and against its VJP (transpose); the kit gives every input a
tangent at once, so the tests below also push ONE input's tangent at a time (the None
paths of each rule) and check it against central finite differences in float64, an
independent reference. A few hand tests cover boundaries the samples do not (-inf
logits, softplus at its threshold, ignored labels, float32).
"""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tt
from tapegrad import _engine

PLUGIN = "tapegrad-nn"

# Ops of the plugin with a VJP but no JVP rule, with the reason (the engine falls back
# to an exact double VJP for them). Empty: every differentiable op has one.
NO_JVP_RULE = {}


def _ops():
    return {n: op for n, op in _engine.ops_table().items() if op.plugin == PLUGIN}


DIFFERENTIABLE = sorted(n for n, op in _ops().items() if op.vjp is not None)


def test_the_plugin_has_differentiable_ops():
    # (guards the parametrisations below against an empty list)
    assert len(DIFFERENTIABLE) >= 30


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_every_op_with_a_vjp_has_a_jvp_rule(name):
    op = _ops()[name]
    if name in NO_JVP_RULE:
        assert op.jvp is None, f"{name} has a rule now: take it off NO_JVP_RULE"
    else:
        assert op.jvp is not None, f"{name} has a VJP but no JVP rule"


@pytest.mark.parametrize("name", sorted(set(DIFFERENTIABLE) - set(NO_JVP_RULE)))
def test_contract_kit_checks_the_jvp_rule(name):
    checks = tt.check_op(name).checks
    n_samples = len(_ops()[name].samples)
    assert checks.count("float64 JVP rule vs finite differences") == n_samples
    assert checks.count("JVP rule is the transpose of the VJP rule") == n_samples
    assert "float64 JVP rule differentiable (reverse over forward)" in checks


# ---------------------------------------------------------------------------------------
# One tangent at a time, against finite differences
# ---------------------------------------------------------------------------------------

def _float_positions(op, args):
    return [i for i, a in enumerate(args)
            if isinstance(a, np.ndarray) and a.dtype.kind == "f" and op.is_differentiable(i)]


def _as_tensors(args, dtype=np.float64):
    return [tg.asarray(a.astype(dtype) if a.dtype.kind == "f" else a)
            if isinstance(a, np.ndarray) else a for a in args]


def _one_input_cases():
    cases = []
    for name in sorted(set(DIFFERENTIABLE) - set(NO_JVP_RULE)):
        op = _ops()[name]
        for k, sample in enumerate(op.samples):
            positions = _float_positions(op, sample.args)
            if len(positions) < 2:
                continue            # one input: the kit's check is this one already
            for i in positions:
                cases.append(pytest.param(name, k, i, id=f"{name}-s{k}-in{i}"))
    return cases


def _central_difference(op, args, kwargs, i, v, eps=1e-6):
    def at(step):
        moved = list(args)
        moved[i] = args[i] + step * v
        with tg.no_grad():
            return op(*_as_tensors(moved), **kwargs).numpy()
    return (at(eps) - at(-eps)) / (2 * eps)


@pytest.mark.parametrize("name, k, i", _one_input_cases())
def test_jvp_rule_with_one_input_tangent_matches_finite_differences(name, k, i):
    op = _ops()[name]
    sample = op.samples[k]
    args = [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
            else a for a in sample.args]
    v = np.random.default_rng(10 * k + i).standard_normal(args[i].shape)
    xs = _as_tensors(args)
    tangents = [None] * len(xs)
    tangents[i] = tg.asarray(v)
    with tg.no_grad():
        ans = op(*xs, **sample.kwargs)
        got = op.jvp(tuple(tangents), ans, *xs, **sample.kwargs)
    assert isinstance(got, tg.Tensor)
    got = np.broadcast_to(got.numpy(), ans.shape)
    expected = _central_difference(op, args, sample.kwargs, i, v)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", sorted(set(DIFFERENTIABLE) - set(NO_JVP_RULE)))
def test_jvp_rule_keeps_float32(name):
    op = _ops()[name]
    sample = op.samples[0]
    xs = _as_tensors(list(sample.args), np.float32)
    positions = _float_positions(op, sample.args)
    rng = np.random.default_rng(3)
    tangents = [tg.asarray(rng.standard_normal(xs[j].shape).astype(np.float32))
                if j in positions else None for j in range(len(xs))]
    with tg.no_grad():
        ans = op(*xs, **sample.kwargs)
        got = op.jvp(tuple(tangents), ans, *xs, **sample.kwargs)
    assert ans.dtype == np.float32
    assert got.dtype == np.float32, f"{name}: the tangent of a float32 op is {got.dtype}"


# ---------------------------------------------------------------------------------------
# Boundaries
# ---------------------------------------------------------------------------------------

def _jvp(name, tangents, *args, **kwargs):
    op = _ops()[name]
    xs = _as_tensors(list(args))
    ts = tuple(None if v is None else tg.asarray(v) for v in tangents)
    with tg.no_grad():
        ans = op(*xs, **kwargs)
        return np.broadcast_to(op.jvp(ts, ans, *xs, **kwargs).numpy(), ans.shape)


@pytest.mark.parametrize("name, kwargs", [("softmax", {}), ("log_softmax", {}),
                                          ("_logsumexp", {"axis": -1})])
def test_minus_inf_logits_give_finite_tangents(name, kwargs):
    # a masked-out logit (attention masks): exp(-inf) = 0, no nan from inf - inf
    x = np.array([[0.3, -np.inf, 1.2, -0.4], [2.0, 0.1, -np.inf, -np.inf]])
    v = np.random.default_rng(0).standard_normal(x.shape)
    v = np.where(np.isinf(x), 0.0, v)           # the masked entries stay masked
    got = _jvp(name, [v], x, **kwargs)
    assert np.isfinite(got).all()
    with tg.no_grad():
        ans = _ops()[name](tg.asarray(x), **kwargs).numpy()
    kept = np.broadcast_to(np.isfinite(ans), got.shape)   # (log_softmax is -inf there)
    with np.errstate(invalid="ignore"):                   # -inf - -inf there
        expected = _central_difference(_ops()[name], [x], kwargs, 0, v)
    np.testing.assert_allclose(got[kept], expected[kept], rtol=1e-4, atol=1e-6)
    if name == "log_softmax":
        # a masked entry is x_i - logsumexp(x) with x_i constant: its (formal) tangent is
        # -sum(p * v), as PyTorch's (the VJP's transpose)
        p = np.exp(ans)
        expected_masked = np.broadcast_to(-(p * v).sum(-1, keepdims=True), x.shape)
        np.testing.assert_allclose(got[~kept], expected_masked[~kept], rtol=1e-12)


def test_softplus_tangent_at_and_around_the_threshold():
    # PyTorch's convention, as the VJP: the sigmoid branch at beta x == threshold, 1 above
    x = np.array([19.0, 20.0, 21.0, -3.0])
    got = _jvp("softplus", [np.ones(4)], x)
    sig = 1.0 / (1.0 + np.exp(-x))
    np.testing.assert_allclose(got, [sig[0], sig[1], 1.0, sig[3]], rtol=1e-12)
    got = _jvp("softplus", [np.ones(4)], x, beta=2.0, threshold=40.0)   # beta x: 38, 40, 42
    sig2 = 1.0 / (1.0 + np.exp(-2.0 * x))
    np.testing.assert_allclose(got, [sig2[0], sig2[1], 1.0, sig2[3]], rtol=1e-12)


def test_cross_entropy_tangent_with_ignored_labels_and_weights():
    # the weighted mean divides by the kept rows' weights (PyTorch's): against differences
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3))
    labels = np.array([0, -100, 2, 1, -100])
    v = rng.standard_normal(x.shape)
    w = np.array([0.5, 2.0, 1.5])
    kwargs = {"weight": w, "reduction": "mean"}
    got = _jvp("cross_entropy", [v, None], x, labels, **kwargs)
    expected = _central_difference(_ops()["cross_entropy"], [x, labels], kwargs, 0, v)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-8)
    # an ignored row's tangent does not count: changing it changes nothing
    v2 = v.copy()
    v2[[1, 4]] += 10.0
    np.testing.assert_allclose(_jvp("cross_entropy", [v2, None], x, labels, **kwargs), got,
                               rtol=1e-12)


def test_cross_entropy_tangent_in_the_probabilities_only():
    # a probability target is differentiable: its tangent alone is -sum(tt * log_softmax)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3))
    p = rng.uniform(0.1, 1.0, (4, 3))
    p /= p.sum(-1, keepdims=True)
    vt = rng.standard_normal(p.shape)
    lsm = x - np.log(np.exp(x).sum(-1, keepdims=True))
    got = _jvp("cross_entropy", [None, vt], x, p, reduction="sum")
    np.testing.assert_allclose(got, -(vt * lsm).sum(), rtol=1e-12)


def test_lstm_tangent_of_a_zero_state_tangent_is_zero():
    # h0's tangent alone, and zero: the recurrence starts from zero states and stays there
    op = _ops()["_lstm_sequence"]
    xw, h0, c0, w_hh = op.samples[0].args
    got = _jvp("_lstm_sequence", [None, np.zeros_like(h0), None, None], xw, h0, c0, w_hh)
    assert got.shape == (xw.shape[0], xw.shape[1], 2 * h0.shape[1])
    assert not got.any()
