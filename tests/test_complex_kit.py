"""Meta-tests of the contract kit's complex checks added by helper cx18 (issue 18): a
registered *function* is checked on its complex samples (explicit ones, and float ones
whose result is complex), and an op's JVP rule is checked for its own gradient on complex
samples (reverse over forward). Each check is shown to pass a right rule and to FAIL a
wrong one (a missing conjugate, a rule whose graph drops the imaginary part) that the
real checks cannot see."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _engine
from tapegrad._plugins import FunctionDef, Sample
from tapegrad.testing import GradcheckError, check_op

RNG = np.random.default_rng(18)
A, B = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
Z = A + 1j * B

GRADIENT = "complex128 gradient vs finite differences (real and imaginary parts)"
SECOND = "complex128 second derivatives vs finite differences"
REVERSE_OVER_FORWARD = "complex128 JVP rule differentiable (reverse over forward)"


def _scale_op(name, conjugate):
    """z * (2 - 1j) as an op whose VJP conjugates the constant, or forgets to."""
    c = 2 - 1j

    def vjp(g, ans, z):
        return (g * (np.conj(c) if conjugate else c),)

    op = _engine.Op(name, "tests", {"cpu": lambda z: z * c}, vjp, None, 1, False, (), None,
                    False, True, [Sample(A)], "", None, True, supports_complex=True)
    _engine.install_op(op)
    return op


def _square_op(name, conjugate):
    """z**2 as an op whose VJP is g conj(2z), or the real rule g 2z (right on reals)."""
    def vjp(g, ans, z):
        return (g * 2 * (tg.conj(z) if conjugate else z),)

    op = _engine.Op(name, "tests", {"cpu": np.square}, vjp, None, 1, False, (), None,
                    False, True, [Sample(A)], "", None, True, supports_complex=True)
    _engine.install_op(op)
    return op


def _function(name, fn, samples):
    return FunctionDef(name, fn, "tests", samples, False, None)


def test_a_function_with_a_complex_sample_is_checked_on_it(installed):
    op = _square_op("_kit_fn_right", conjugate=True)
    installed.append(op.name)
    fdef = _function("kit_fn_right", lambda z: tg.exp(op(z)) * 0.5, [Sample(A), Sample(Z)])
    checks = check_op(fdef).checks
    assert GRADIENT in checks and SECOND in checks and "complex64 preserved" in checks


def test_a_function_through_a_rule_missing_the_conjugate_fails_the_kit(installed):
    op = _square_op("_kit_fn_noconj", conjugate=False)
    installed.append(op.name)
    # on real samples alone the function passes: the rule is right on real inputs ...
    check_op(_function("kit_fn_noconj_real", lambda z: op(z) * 3.0, [Sample(A)]))
    # ... its complex sample catches the missing conjugate
    fdef = _function("kit_fn_noconj", lambda z: op(z) * 3.0, [Sample(A), Sample(Z)])
    with pytest.raises(GradcheckError, match="'kit_fn_noconj' complex sample 0.*complex "
                                             "gradient check failed"):
        check_op(fdef)


def test_a_function_of_real_inputs_with_a_complex_result_is_checked(installed):
    op = _scale_op("_kit_fn_promotes", conjugate=False)
    installed.append(op.name)
    # real x -> complex result: its float sample is checked in the complex convention, so
    # the wrong rule (the real input gets Re(g c) instead of Re(g conj(c))) fails
    fdef = _function("kit_fn_promotes", lambda x: op(x.astype(np.complex128)), [Sample(A)])
    with pytest.raises(GradcheckError, match="complex gradient check failed"):
        check_op(fdef)
    right = _scale_op("_kit_fn_promotes_right", conjugate=True)
    installed.append(right.name)
    good = _function("kit_fn_promotes_right", lambda x: right(x.astype(np.complex128)),
                     [Sample(A)])
    assert GRADIENT in check_op(good).checks


def test_the_registered_complex_functions_are_checked():
    # sort_complex and roots: real samples with complex results; fft2: explicit samples
    for name in ("sort_complex", "roots", "fft_fft2"):
        assert GRADIENT in check_op(name).checks, name


def _multiply_op(name, jvp):
    def vjp(g, ans, x, y):
        return g * tg.conj(y), g * tg.conj(x)

    op = _engine.Op(name, "tests", {"cpu": np.multiply}, vjp, jvp, 2, False, (), None, False,
                    True, [Sample(A, B)], "", None, True, batch="elementwise",
                    supports_complex=True)
    _engine.install_op(op)
    return op


def _tangent_sum(t, x, y, y_for_x):
    tx, ty = t
    terms = [v for v in (None if tx is None else tx * y_for_x,
                         None if ty is None else x * ty) if v is not None]
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


def test_a_complex_jvp_rule_that_is_differentiable_passes_reverse_over_forward(installed):
    _multiply_op("_kit_rof_right", lambda t, ans, x, y: _tangent_sum(t, x, y, y))
    installed.append("_kit_rof_right")
    assert REVERSE_OVER_FORWARD in check_op("_kit_rof_right").checks


def test_a_jvp_rule_whose_graph_drops_the_imaginary_part_fails_reverse_over_forward(
        installed):
    # its values are right (the JVP and transpose checks pass), and on real inputs its
    # graph is too (imag(y) is 0 there); on complex ones the derivative of the tangent in
    # Im(y) is lost
    def jvp(t, ans, x, y):
        y_for_x = y if y.dtype.kind != "c" else tg.complex(tg.real(y),
                                                           tg.imag(y).detach())
        return _tangent_sum(t, x, y, y_for_x)

    _multiply_op("_kit_rof_wrong", jvp)
    installed.append("_kit_rof_wrong")
    with pytest.raises(GradcheckError, match="complex JVP rule's own gradient \\(reverse "
                                             "over forward\\) failed"):
        check_op("_kit_rof_wrong")


def test_a_jvp_rule_computed_on_host_values_fails_reverse_over_forward(installed):
    # right values, no graph at all on complex inputs: its output records no gradient,
    # and the finite differences show that it depends on the inputs
    def jvp(t, ans, x, y):
        if y.dtype.kind != "c":
            return _tangent_sum(t, x, y, y)
        values = [None if v is None else v.detach().numpy() for v in t]
        out = sum(v for v in (None if values[0] is None else values[0] * y.detach().numpy(),
                              None if values[1] is None else x.detach().numpy() * values[1])
                  if v is not None)
        return tg.tensor(out)

    _multiply_op("_kit_rof_host", jvp)
    installed.append("_kit_rof_host")
    with pytest.raises(GradcheckError, match="no output records a gradient, but finite "
                                             "differences move it"):
        check_op("_kit_rof_host")
