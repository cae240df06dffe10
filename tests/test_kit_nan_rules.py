"""Meta-tests: the contract kit fails a rule that returns NaN where the finite differences
give a number. NaN compares false with everything, so before, `excess.max() > 0` was False
for a NaN excess and a NaN gradient or JVP passed gradcheck, check_jvp and check_op."""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _complex_kit, _engine
from tapegrad._plugins import Sample
from tapegrad.function import Function
from tapegrad.testing import GradcheckError, check_jvp, check_op, gradcheck

X = np.random.default_rng(3).standard_normal((2, 3))


def _double_op(name, vjp_value, jvp_value):
    """2x as an op whose VJP and JVP rules scale by the given numbers (2.0 is right)."""
    op = _engine.Op(name, "tests", {"cpu": lambda x: 2.0 * x},
                    lambda g, ans, x: (g * vjp_value,),
                    lambda tangents, ans, x: tangents[0] * jvp_value,
                    1, False, (), None, False, True, [Sample(X)], "", None, True)
    _engine.install_op(op)
    return op


def test_gradcheck_fails_a_nan_gradient_and_passes_the_right_one():
    class Twice(Function):
        nan = False

        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * (np.nan if Twice.nan else 2.0)

    x = tg.tensor(X, requires_grad=True)
    assert gradcheck(Twice.apply, (x,))
    Twice.nan = True
    with pytest.raises(GradcheckError, match="analytic nan vs numeric 2"):
        gradcheck(Twice.apply, (x,))


def test_check_op_fails_a_nan_vjp_rule_and_a_nan_jvp_rule(installed):
    installed.append("_kit_nan_ok")
    assert check_op(_double_op("_kit_nan_ok", 2.0, 2.0)).checks
    installed.append("_kit_nan_vjp")
    with pytest.raises(GradcheckError, match="nan"):
        check_op(_double_op("_kit_nan_vjp", np.nan, 2.0))
    installed.append("_kit_nan_jvp")
    with pytest.raises(GradcheckError, match="nan"):
        check_op(_double_op("_kit_nan_jvp", 2.0, np.nan))


def test_check_jvp_fails_a_nan_tangent(installed):
    installed.append("_kit_nan_jvp_only")
    op = _double_op("_kit_nan_jvp_only", 2.0, np.nan)
    with pytest.raises(GradcheckError, match="forward mode nan"):
        check_jvp(op, (tg.tensor(X),))


def test_the_excess_counts_a_nan_result_against_a_number_and_accepts_an_undefined_reference():
    got = np.array([np.nan, np.nan, 1.0, np.inf, 3.0, 5.0])
    ref = np.array([2.0, np.nan, np.nan, np.inf, np.inf, 5.0])
    excess = _complex_kit.excess_over_tolerance(got, ref, 1e-5, 1e-3)
    assert excess[0] == np.inf                  # a NaN rule against a number: fails
    assert (excess[1:] <= 0).all()              # both NaN / reference NaN or infinite / equal
    z = _complex_kit.excess_over_tolerance(np.array([complex(np.nan, 1.0)]),
                                           np.array([1 + 1j]), 1e-5, 1e-3)
    assert z[0] == np.inf                       # a NaN part of a complex result too
