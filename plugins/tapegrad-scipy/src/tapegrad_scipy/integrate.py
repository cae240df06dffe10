"""``tg.scipy.integrate``: out of scope for tapegrad-scipy.

Differentiating through an ODE solver (``scipy.integrate.odeint``) needs the adjoint
method, a solver written in tapegrad ops, or both; tapegrad-scipy provides neither, and
``odeint`` raises a NotImplementedError saying so rather than returning a result with
no gradient.
"""


def odeint(*args, **kwargs):
    """Not supported: raises NotImplementedError (see the module docstring)."""
    raise NotImplementedError(
        "tg.scipy.integrate.odeint is out of scope for tapegrad-scipy: differentiating "
        "through an ODE solver needs the adjoint method, which it does not provide. "
        "Integrate with a fixed-step scheme written in tapegrad ops (e.g. Runge-Kutta) "
        "to get gradients.")
