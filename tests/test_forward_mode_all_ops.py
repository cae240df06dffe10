"""Issue 17, "Must show": forward mode THROUGH THE ENGINE agrees with reverse mode and with
finite differences, for every sample of every first-party op (float64).

The contract kit (tapegrad.testing.check_op) already checks each op's JVP *rule*, called
directly, against finite differences and against its VJP rule on every sample. What it
does not exercise is the path a user's ``tg.jvp`` takes: the engine handing the call to
the forward-mode dispatcher (tapegrad/_forward.py), which fills the tangents an input
does not have (zeros for ``jvp="linear"``), drops those of inputs that are not
differentiable, refuses those of inputs whose derivative is not implemented, fits the
rule's result to the output's shape and dtype, and falls back to the double-VJP for an op
without a rule. So each sample here runs as ``tg.jvp(op call, random tangent)`` and its
tangent J v is compared with

- central finite differences along v (tapegrad.testing.check_jvp: two calls per input,
  not a Jacobian, so every sample is cheap), and
- reverse mode: <u, J v> = <J^T u, v> with J^T u from ``tg.grad`` for a random u.

Ops without a derivative (comparisons, argmax, ...) must give a zero tangent, never an
error; a tangent on an input whose derivative is not implemented (polygamma's order, ...)
must be refused with a NotImplementedError naming the op.
"""

from pathlib import Path

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt
from tapegrad import _engine
from tapegrad._plugins import LOADER

ROOT = Path(__file__).resolve().parents[1]
# The core and every distribution under plugins/ (not the plugin template in examples/,
# nor a plugin a test registers at run time).
FIRST_PARTY = {"tapegrad"} | {p.name for p in (ROOT / "plugins").iterdir()
                              if (p / "pyproject.toml").exists()}
OPS = sorted(name for name, op in _engine.ops_table().items() if op.plugin in FIRST_PARTY)

EPS, ATOL, RTOL = 1e-6, 1e-5, 1e-3        # the contract kit's


def _op(name):
    return _engine.ops_table()[name]


def _float_outputs(result):
    return [o for o in tgt._outputs(result) if isinstance(o, tg.Tensor) and o.dtype.kind == "f"]


def _all_outputs(result):
    return [o for o in (result if isinstance(result, (tuple, list)) else (result,))
            if isinstance(o, tg.Tensor)]


def _host(t):
    return np.asarray(t.detach().cpu().numpy(), dtype=np.float64)


def _forward_only(entry):
    """An op with a JVP rule and no VJP (registered functions have both modes)."""
    return isinstance(entry, _engine.Op) and entry.vjp is None


def _substituting(op, sample, flat, nseq, wrt, outputs):
    """g(*xs): op called on the sample's inputs `flat` with those at `wrt` replaced by xs
    (a sequence argument -- concatenate's list -- rebuilt from its first nseq entries)."""
    def g(*xs):
        args = list(flat)
        for i, x in zip(wrt, xs):
            args[i] = x
        call_args = [args[:nseq]] + args[nseq:] if nseq is not None else args
        return tuple(outputs(tgt._call(op, call_args, sample.kwargs)))
    return g


def _differentiable_case(op, sample):
    """(g, primals, tangents): g(*primals) calls op on the sample with its differentiable
    float inputs replaced by g's arguments; None when the sample has none. NOTE: an op
    with a JVP rule and no VJP (a backward computed on arrays: _lstm_sequence_backward)
    is differentiable in forward mode in every float input, whatever `differentiable`
    says for reverse mode (tapegrad/_forward.py, _output_tangent)."""
    forward_only = _forward_only(op)
    positions = (list(range(len(sample.args))) if forward_only
                 else tgt._positions(op, sample))
    flat, nseq = tgt._flatten_seq(tgt._tensors(sample, np.float64, positions))
    wrt = [i for i, x in enumerate(flat) if isinstance(x, tg.Tensor) and x.requires_grad]
    if not wrt:
        return None
    g = _substituting(op, sample, flat, nseq, wrt, _float_outputs)
    with tg.no_grad():
        if not g(*(flat[i] for i in wrt)):
            return None                  # no float output (the sample asks for ints)

    rng = np.random.default_rng(len(wrt) + 17 * len(op.name))
    primals = tuple(flat[i].detach() for i in wrt)
    tangents = tuple(tg.tensor(rng.standard_normal(p.shape)) for p in primals)
    return g, primals, tangents


def _check_against_reverse_mode(g, primals, tangents, jvs, where):
    xs = tuple(p.detach().requires_grad_(True) for p in primals)
    outs = g(*xs)
    rng = np.random.default_rng(3)
    us = [rng.standard_normal(o.shape) for o in outs]
    live = [(o, u) for o, u in zip(outs, us) if o.requires_grad]
    lhs = sum(float(np.sum(u * _host(jv))) for u, jv in zip(us, jvs))
    rhs = 0.0
    if live:
        grads = tg.grad([o for o, _ in live], xs, [tg.tensor(u) for _, u in live],
                        allow_unused=True)
        rhs = sum(float(np.sum(_host(gi) * _host(t)))
                  for gi, t in zip(grads, tangents) if gi is not None)
    assert abs(lhs - rhs) <= ATOL * 10 + RTOL * max(abs(lhs), abs(rhs)), (
        f"{where}: forward and reverse mode disagree: <u, J v> = {lhs:.10g} (tg.jvp) but "
        f"<J^T u, v> = {rhs:.10g} (tg.grad)")


def _check_differentiable_sample(op, s, sample):
    where = f"'{op.name}' sample {s} {sample!r}"
    case = _differentiable_case(op, sample)
    if case is None:
        return False
    g, primals, tangents = case
    outs, jvs = tg.jvp(g, primals, tangents)
    for o, jv in zip(outs, jvs):
        assert jv.shape == o.shape and jv.dtype == o.dtype, (
            f"{where}: the tangent is {jv.shape} {jv.dtype}, the output {o.shape} {o.dtype}")
    try:       # the same forward pass against finite differences along the tangents
        checked = tgt.check_jvp(g, primals, tangents, eps=EPS, atol=ATOL, rtol=RTOL)
    except tgt.GradcheckError as exc:
        raise tgt.GradcheckError(f"{where}: {exc}") from None
    for jv, c in zip(jvs, checked):
        np.testing.assert_array_equal(_host(jv), c, err_msg=f"{where}: tg.jvp vs check_jvp")
    if not _forward_only(op):            # (a forward-only op has no reverse mode)
        _check_against_reverse_mode(g, primals, tangents, jvs, where)
    return True


def _check_nondifferentiable_sample(op, sample):
    """An op without a derivative (a comparison, an index): tangents on its float inputs
    give a zero tangent (zeros of the output's dtype), never an error."""
    flat, nseq = tgt._flatten_seq(tgt._tensors(sample, np.float64, ()))
    floats = [i for i, x in enumerate(flat) if isinstance(x, tg.Tensor) and x.dtype.kind == "f"]
    if not floats:
        return False
    g = _substituting(op, sample, flat, nseq, floats, _all_outputs)
    primals = tuple(flat[i] for i in floats)
    tangents = tuple(tg.ones(p.shape, dtype=p.dtype) for p in primals)
    outs, jvs = tg.jvp(g, primals, tangents)
    for o, jv in zip(outs, jvs):
        assert jv.shape == o.shape and not jv.numpy().any(), (
            f"'{op.name}': a non-differentiable op got a nonzero tangent")
    return True


@pytest.mark.parametrize("name", OPS)
def test_forward_mode_through_the_engine_matches_reverse_mode_and_finite_differences(name):
    op = _op(name)
    differentiable = op.vjp is not None or op.jvp is not None
    checked = 0
    for s, sample in enumerate(op.samples):
        if differentiable:
            checked += _check_differentiable_sample(op, s, sample)
        else:
            checked += _check_nondifferentiable_sample(op, sample)
    # (an op whose samples all give complex results -- tg.complex, tg.fft.fft of real
    # input: this harness compares real tangents; the kit's complex checks, run on every
    # complex=True op, check those JVP rules against complex finite differences)
    assert checked or not differentiable or _complex_results_only(op), (
        f"'{name}': no sample has a differentiable input")


def _complex_results_only(op):
    if not op.supports_complex:
        return False
    for sample in op.samples:
        with tg.no_grad():
            result = tgt._call(op, tgt._tensors(sample, np.float64, ()), sample.kwargs)
        if any(o.dtype.kind != "c" for o in _all_outputs(result)):
            return False
    return True


FUNCTIONS = sorted(name for name, f in LOADER.functions.items() if f.plugin in FIRST_PARTY)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_forward_mode_through_registered_functions_matches_reverse_mode_and_differences(name):
    """The same for the registered functions (compositions: tg.quantile, tg.put, tg.interp,
    the losses, ...): their own code between the ops -- values read on the host, a
    detach, a constant rebuilt from an array -- is where a tangent could be dropped."""
    entry = LOADER.functions[name]
    if entry.writes_into is not None:        # tg.put(a, ...) checked as writing into a copy
        entry = tgt._written_form(entry)
    checked = sum(_check_differentiable_sample(entry, s, sample)
                  for s, sample in enumerate(entry.samples))
    if not checked:                          # tg.any, tg.all: bool results
        sample = entry.samples[0]
        with tg.no_grad():
            result = tgt._call(entry, tgt._tensors(sample, np.float64, ()), sample.kwargs)
        assert not _float_outputs(result), f"'{name}': no sample has a differentiable input"


# (a forward-only op's not_implemented concerns reverse mode: its JVP rule takes them all)
NOT_IMPLEMENTED = sorted(name for name in OPS
                         if _op(name).not_implemented and _op(name).vjp is not None)


@pytest.mark.parametrize("name", NOT_IMPLEMENTED)
def test_a_tangent_where_the_derivative_is_not_implemented_is_refused(name):
    op = _op(name)
    refused = 0
    for sample in op.samples:
        args = tgt._tensors(sample, np.float64, ())
        for i in (i for i in op.not_implemented if i < len(args)):
            # NOTE: the samples give an integer there (polygamma's order n); its float
            # form is what a tangent can ride on
            x = tg.tensor(np.asarray(tgt._host(args[i]) if isinstance(args[i], tg.Tensor)
                                     else args[i], dtype=np.float64))
            g = _substituting(op, sample, args, None, [i], _all_outputs)
            with pytest.raises(NotImplementedError, match=name):
                tg.jvp(g, (x,), (tg.ones(x.shape),))
            refused += 1
    assert refused, f"'{name}' declares not_implemented inputs but no sample has one"


def test_every_first_party_plugin_contributes_ops():
    """The parametrization above is not silently empty (a plugin that failed to load)."""
    plugins = {_op(name).plugin for name in OPS}
    assert {"tapegrad", "tapegrad-elementwise", "tapegrad-shape", "tapegrad-linalg",
            "tapegrad-nn", "tapegrad-scipy"} <= plugins
    assert len(OPS) > 200


class _WrongForwardRules:
    """Ops whose JVP rule disagrees with their VJP rule and the function: each check above
    must notice (the harness is not vacuous)."""

    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        sample = [tg.Sample(np.random.default_rng(0).standard_normal((3, 2)))]
        registry.register_op(               # the rule is 1% off
            "_test_cube_wrong_jvp", kernels={"cpu": lambda x: x ** 3},
            vjp=lambda g, ans, x: (3 * g * x * x,),
            jvp=lambda t, ans, x: 3.03 * t[0] * x * x, samples=sample)
        registry.register_op(               # both rules agree, the function is x ** 3
            "_test_cube_wrong_both", kernels={"cpu": lambda x: x ** 3},
            vjp=lambda g, ans, x: (2 * g * x,), jvp=lambda t, ans, x: 2 * t[0] * x,
            samples=sample)


@pytest.fixture
def wrong_rules():
    name = tg.register_plugin(_WrongForwardRules(), name="test-wrong-forward-rules")
    yield
    tg.unregister_plugin(name)


def test_the_checks_catch_a_jvp_rule_that_is_wrong(wrong_rules):
    op = _op("_test_cube_wrong_jvp")
    with pytest.raises(tgt.GradcheckError, match="JVP check failed"):
        _check_differentiable_sample(op, 0, op.samples[0])
    case = _differentiable_case(op, op.samples[0])
    g, primals, tangents = case
    _, jvs = tg.jvp(g, primals, tangents)
    with pytest.raises(AssertionError, match="forward and reverse mode disagree"):
        _check_against_reverse_mode(g, primals, tangents, jvs, "_test_cube_wrong_jvp")
    op = _op("_test_cube_wrong_both")
    with pytest.raises(tgt.GradcheckError, match="JVP check failed"):
        _check_differentiable_sample(op, 0, op.samples[0])
