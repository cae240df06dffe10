"""Inputs whose derivative exists but is not computed refuse a tensor that requires grad.

A silent missing gradient is a wrong gradient: scipy's iv(v, x) depends on its order v,
np.interp on its knots xp, np.gradient on its spacing. tapegrad computes none of those
derivatives, so a tensor there that requires grad raises NotImplementedError (detached, or
under no_grad, it is accepted as a constant)."""

import numpy as np
import pytest
import tapegrad as tg


def _cases():
    x = tg.tensor([0.5, 1.0, 2.0], requires_grad=True)
    order = tg.tensor(1.5, requires_grad=True)
    knots = tg.tensor([0.0, 1.0, 3.0], requires_grad=True)
    return [
        ("iv", lambda: tg.scipy.special.iv(order, x), lambda: tg.scipy.special.iv(order.detach(), x)),
        ("jn", lambda: tg.scipy.special.jn(tg.tensor(1.0, requires_grad=True), x),
         lambda: tg.scipy.special.jn(1, x)),
        ("interp", lambda: tg.interp(x, knots, tg.tensor([1.0, 2.0, 0.0])),
         lambda: tg.interp(x, knots.detach(), tg.tensor([1.0, 2.0, 0.0]))),
        ("gradient", lambda: tg.gradient(x, knots), lambda: tg.gradient(x, knots.detach())),
    ]


@pytest.mark.parametrize("case", range(4), ids=["iv", "jn", "interp", "gradient"])
def test_a_tensor_that_requires_grad_where_the_derivative_is_not_computed_is_refused(case):
    name, refused, accepted = _cases()[case]
    with pytest.raises(NotImplementedError, match=rf"{name}: the derivative with respect to .* "
                                                  r"is not implemented.*requires grad"):
        refused()
    out = accepted()
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()                  # the gradient to x still flows
    with tg.no_grad():
        refused()                         # no graph: nothing would be lost


def test_the_engine_check_reports_the_input_and_the_contract_kit_checks_it():
    op = tg.registry().ops["iv"]
    assert op.not_implemented == (0,)
    import tapegrad.testing as tgt
    assert "refuses grad where the derivative is not implemented" in tgt.check_op("iv").checks
    with pytest.raises(NotImplementedError, match=r"input 0 \(.*float64.*\)"):
        tg.scipy.special.iv(tg.tensor(np.array([0.5, 1.0]), requires_grad=True), 2.0)
