"""The contract kit's complex checks (tapegrad/_complex_kit.py): a complex=True op is
checked on complex samples, and rules that are wrong on complex inputs (a missing
conjugate, a JVP that drops the conjugate term, a complex64 rule that upcasts) are caught."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _engine
from tapegrad._complex_kit import complex_samples, is_complex_sample
from tapegrad._plugins import Sample
from tapegrad.testing import GradcheckError, check_op

RNG = np.random.default_rng(0)
A, B = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))


def _conj(x):
    # (tg.conj is tapegrad-elementwise's)
    return tg.conj(x)


def _op(name, vjp, jvp, samples, kernel=np.multiply):
    op = _engine.Op(name, "tests", {"cpu": kernel}, vjp, jvp, 2, False, (), None, False, True,
                    samples, "", None, True, batch="elementwise", supports_complex=True)
    _engine.install_op(op)
    return op


def _right_vjp(g, ans, x, y):
    return g * _conj(y), g * _conj(x)


def _wrong_vjp(g, ans, x, y):          # the real rule, applied to complex values: no conj
    return g * y, g * x


def _jvp(t, ans, x, y):
    tx, ty = t
    terms = [v for v in (None if tx is None else tx * y, None if ty is None else x * ty)
             if v is not None]
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


@pytest.fixture
def cleanup():
    names = []
    yield names
    for n in names:
        _engine.uninstall_op(n)


def test_samples_are_derived_from_float_ones_and_explicit_ones_are_kept():
    op = _op("_kit_cx_samples", _right_vjp, _jvp, [Sample(A, B), Sample(A + 1j * B, B)])
    try:
        samples = complex_samples(op)
        assert not is_complex_sample(op.samples[0]) and is_complex_sample(op.samples[1])
        # derived: both complex, then only the first; the explicit one as it is
        kinds = [[a.dtype.kind for a in s.args] for s in samples]
        assert kinds == [["c", "c"], ["c", "f"], ["c", "f"]]
        np.testing.assert_array_equal(samples[0].args[0].real, A)
        assert np.abs(samples[0].args[0].imag).min() > 0
    finally:
        _engine.uninstall_op("_kit_cx_samples")


def test_a_correct_complex_rule_passes_every_complex_check(cleanup):
    _op("_kit_cx_right", _right_vjp, _jvp, [Sample(A, B)])
    cleanup.append("_kit_cx_right")
    checks = set(check_op("_kit_cx_right").checks)
    for c in ("complex128 gradient vs finite differences (real and imaginary parts)",
              "complex128 second derivatives vs finite differences",
              "complex128 JVP rule vs finite differences",
              "complex JVP rule is the transpose of the VJP rule", "complex64 preserved"):
        assert c in checks


def test_a_rule_missing_the_conjugate_is_caught(cleanup):
    _op("_kit_cx_noconj", _wrong_vjp, _jvp, [Sample(A, B)])
    cleanup.append("_kit_cx_noconj")
    # the real checks pass (the rule is right on real inputs); the complex ones do not
    with pytest.raises(GradcheckError, match="'_kit_cx_noconj' complex sample 0.*complex "
                                             "gradient check failed"):
        check_op("_kit_cx_noconj")


def test_a_jvp_rule_conjugating_the_tangent_is_caught(cleanup):
    def bad_jvp(t, ans, x, y):
        return _jvp((None if t[0] is None else _conj(t[0]), t[1]), ans, x, y)
    _op("_kit_cx_badjvp", _right_vjp, bad_jvp, [Sample(A, B)])
    cleanup.append("_kit_cx_badjvp")
    with pytest.raises(GradcheckError, match="complex JVP check failed"):
        check_op("_kit_cx_badjvp")


def test_a_kernel_returning_complex128_for_complex64_is_caught(cleanup):
    def upcast(x, y):
        out = np.multiply(x, y)
        return out.astype(np.complex128) if out.dtype.kind == "c" else out

    _op("_kit_cx_c64", _right_vjp, _jvp, [Sample(A, B)], kernel=upcast)
    cleanup.append("_kit_cx_c64")
    with pytest.raises(GradcheckError, match="complex64 inputs gave a complex128 result"):
        check_op("_kit_cx_c64")
