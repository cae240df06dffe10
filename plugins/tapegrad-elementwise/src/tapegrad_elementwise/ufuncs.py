"""NumPy's other elementwise functions: trigonometric and hyperbolic, log/exp variants,
rounding, remainders, float classification, sign manipulation, NaN-aware selection.

The kernel of each op is the NumPy function itself, so values, dtypes (integer and bool
inputs included), broadcasting and NaN behaviour are NumPy's. An elementwise op's
Jacobian is diagonal, so one *partial* per input serves both modes: ``d(v, ans, x, ...)``
is ``v * ∂ans/∂input`` for a cotangent ``v`` (the VJP, ``v = g``) or a tangent ``v``
(the JVP). Partials are written with tapegrad ops (see ``ops`` for the vocabulary), so
every rule runs on every device and is differentiable again.

Where a derivative does not exist the convention is PyTorch's, named in each op's doc:
rounding ops, floor_divide and sign-like steps have zero gradient; remainder and fmod
pass ``g`` to the dividend.

>>> import tapegrad as tg
>>> x = tg.tensor([0.5, 7.25], requires_grad=True)
>>> y = tg.log1p(x) + x % 2.0          # d/dx = 1 / (1 + x) + 1
>>> y.backward(tg.ones(2))
>>> x.grad
tensor([1.66666667, 1.12121212])
"""

import functools
import math

import numpy as np
import tapegrad as tg

from ._samples import binary_samples, unary_samples

_needs_grad = tg.needs_grad
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_RAD_PER_DEG = math.pi / 180.0
_DEG_PER_RAD = 180.0 / math.pi


# ---------------------------------------------------------------------------------------
# From partials to rules
# ---------------------------------------------------------------------------------------

def _rules(name, partials):
    """The (vjp, jvp) pair of an elementwise op from one partial per input."""
    if len(partials) == 1:
        (d,) = partials

        def vjp(g, ans, x, **params):
            return (d(g, ans, x, **params),)

        def jvp(t, ans, x, *params, **kwparams):
            # (tapegrad.testing passes a sample's positional parameters on as they are)
            if t[0] is None:
                return tg.zeros_like(ans)
            return d(t[0], ans, x, *params, **kwparams)
    else:
        dx, dy = partials

        def vjp(g, ans, x, y):
            return (dx(g, ans, x, y) if _needs_grad(x) else None,
                    dy(g, ans, x, y) if _needs_grad(y) else None)

        def jvp(t, ans, x, y):
            # NOTE: the tangents have their inputs' shapes; each term broadcasts to ans.
            terms = [d(v, ans, x, y) for d, v in ((dx, t[0]), (dy, t[1])) if v is not None]
            if not terms:       # the contract: a Tensor even with no tangent at all
                return tg.zeros_like(ans)
            return terms[0] if len(terms) == 1 else terms[0] + terms[1]
    vjp.__qualname__ = vjp.__name__ = f"{name}_vjp"     # readable tracebacks
    jvp.__qualname__ = jvp.__name__ = f"{name}_jvp"
    return vjp, jvp


def holomorphic(vjp):
    """The complex-correct VJP of an op whose real rule `vjp` is g * f'(inputs) (see
    Note: [complex rules] in ops.py): conj(vjp(conj(g))) = g * conj(f'(z)) for complex g."""
    # NOTE: functools.wraps keeps vjp's signature (inspect follows __wrapped__), from which
    # register_op infers the op's inputs and parameters
    @functools.wraps(vjp)
    def rule(g, ans, *inputs, **params):
        if g.dtype.kind != "c":
            return vjp(g, ans, *inputs, **params)
        return tuple(None if gi is None else tg.conj(gi)
                     for gi in vjp(tg.conj(g), ans, *inputs, **params))
    return rule


def _zero(v, ans, *inputs, **params):
    """The partial of a piecewise-constant op (floor, round, floor_divide, ...): 0."""
    return tg.zeros_like(v)


def _ones(v, ans, *inputs):
    return v


# -- trigonometric and hyperbolic ---------------------------------------------------------

def _d_tan(v, ans, x):
    return v * (1 + ans * ans)


def _d_arcsin(v, ans, x):
    return v / tg.sqrt(1 - x * x)


def _d_arccos(v, ans, x):
    return -v / tg.sqrt(1 - x * x)


def _d_arctan(v, ans, x):
    return v / (1 + x * x)


def _d_arcsinh(v, ans, x):
    return v / tg.sqrt(x * x + 1)


def _d_arccosh(v, ans, x):
    return v / tg.sqrt(x * x - 1)


def _d_arctanh(v, ans, x):
    return v / (1 - x * x)


def _d_arctan2_x(v, ans, x, y):
    # NOTE: "safe where" at the origin, where x^2 + y^2 is 0 and so is the numerator: the
    # gradient there is 0 (PyTorch's), not 0 / 0 = nan with a warning.
    r2 = x * x + y * y
    return v * tg.where(r2 == 0, 0, y / tg.where(r2 == 0, 1, r2))


def _d_arctan2_y(v, ans, x, y):
    return -_d_arctan2_x(v, ans, y, x)


def _d_hypot_x(v, ans, x, y):
    # NOTE: "safe where": divide by 1 where hypot is 0, where x is 0 too, so the gradient
    # there is 0 / 1 = 0 (a subgradient, the convention of PyTorch's norm at 0), instead
    # of 0 / 0 = nan with a warning.
    return v * (x / tg.where(ans == 0, 1, ans))


def _d_hypot_y(v, ans, x, y):
    return _d_hypot_x(v, ans, y, x)


def _d_sinc(v, ans, x):
    # d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x.
    # NOTE: that difference cancels as x -> 0 (and is 0/0 at 0), so for |x| < 0.1 the
    # Taylor series is used instead: pi^2 x (-1/3 + z/30 - z^2/840 + z^3/45360), z = (pi x)^2,
    # exact to 1e-10 there, and with the right derivatives at 0 too (f''(0) = -pi^2/3).
    # The formula divides by 1 inside that band ("safe where"), so no 0/0 appears.
    small = tg.abs(x) < 0.1
    safe = tg.where(small, 1, x)
    far = (tg.cos(math.pi * safe) - ans) / safe
    z = (math.pi * math.pi) * (x * x)
    near = (math.pi * math.pi) * x * (-1 / 3 + z * (1 / 30 + z * (-1 / 840 + z * (1 / 45360))))
    return v * tg.where(small, near, far)


# -- exponentials and logarithms -----------------------------------------------------------

def _d_log1p(v, ans, x):
    return v / (1 + x)


def _d_expm1(v, ans, x):
    return v * (ans + 1)


def _d_log2(v, ans, x):
    return v / (x * _LN2)


def _d_log10(v, ans, x):
    return v / (x * _LN10)


def _d_exp2(v, ans, x):
    return v * (ans * _LN2)


def _share(v, ans, x, exp):
    """v * exp(x - ans) = v * e^x / (e^x + e^y), which never overflows.

    NOTE: where an input is +inf, ans is +inf and x - ans would be inf - inf = nan; there
    the share is the limit, 1 for the infinite input and 0 for the other (PyTorch's).
    Both sides of the subtraction are masked ("safe where") so no nan or warning appears.
    """
    top = ans == math.inf
    e = exp(tg.where(top, 0, x) - tg.where(top, 0, ans))      # 1 where top
    return v * tg.where(top, tg.where(x == math.inf, e, 0), e)


def _d_logaddexp_x(v, ans, x, y):
    return _share(v, ans, x, tg.exp)


def _d_logaddexp_y(v, ans, x, y):
    return _share(v, ans, y, tg.exp)


def _d_logaddexp2_x(v, ans, x, y):
    return _share(v, ans, x, tg.exp2)


def _d_logaddexp2_y(v, ans, x, y):
    return _share(v, ans, y, tg.exp2)


def _d_reciprocal(v, ans, x):
    return -v * (ans * ans)


def _d_cbrt(v, ans, x):
    return v / (3 * (ans * ans))


# -- NaN-aware selection -------------------------------------------------------------------

# Note: [nan in fmax and fmin]
# fmax/fmin return the non-NaN input where exactly one is NaN, so that input gets all of
# g and the NaN one none (what a finite difference measures there; PyTorch's rule). Away
# from NaN the rule is maximum's/minimum's: the gradient goes to the selected input and is
# split evenly at ties (Note: [ties in maximum and minimum] in ops). Where both are NaN
# both get g, as maximum does for NaN.

def quiet_complex_nan(rule):
    """`rule` run with NumPy's 'invalid' warnings off. NOTE: NumPy's lexicographic
    comparisons of complex values warn where a part is NaN (real ones do not); the
    forward (np.maximum, np.clip) does not warn there, so neither does its gradient."""
    @functools.wraps(rule)
    def quiet(*args, **kwargs):
        with np.errstate(invalid="ignore"):
            return rule(*args, **kwargs)
    return quiet


def _select(v, ans, mine, loses, tie):
    share = tg.where(loses, 0, tg.where(tie, v * 0.5, v))
    # `mine` is NaN but the result is not: the other input was selected.
    return tg.where(tg.isnan(mine) != tg.isnan(ans), 0, share)


@quiet_complex_nan
def _d_fmax_x(v, ans, x, y):
    return _select(v, ans, x, x < y, x == y)


@quiet_complex_nan
def _d_fmax_y(v, ans, x, y):
    return _select(v, ans, y, x > y, x == y)


@quiet_complex_nan
def _d_fmin_x(v, ans, x, y):
    return _select(v, ans, x, x > y, x == y)


@quiet_complex_nan
def _d_fmin_y(v, ans, x, y):
    return _select(v, ans, y, x < y, x == y)


# -- remainders ----------------------------------------------------------------------------

def _d_remainder_y(v, ans, x, y):
    # x - floor(x / y) * y: d/dy = -floor(x / y) (PyTorch's remainder rule).
    return -v * tg.floor_divide(x, y)


def _d_fmod_y(v, ans, x, y):
    # x - trunc(x / y) * y: d/dy = -trunc(x / y) (PyTorch's fmod rule).
    return -v * tg.trunc(x / y)


# -- sign manipulation and steps -----------------------------------------------------------

def _d_copysign_x(v, ans, x, y):
    # ans / x (±1), and 0 where x == 0 (PyTorch's rule), without a division.
    return v * (tg.sign(x) * tg.sign(ans))


def _d_heaviside_y(v, ans, x, y):
    # heaviside(x, y) is y exactly where x == 0.
    return tg.where(x == 0, v, 0)


def _d_nan_to_num(v, ans, x, copy=True, nan=0.0, posinf=None, neginf=None):
    if x.dtype.kind == "c":
        # NumPy replaces the real and imaginary parts separately, so each part of v passes
        # where that part of x is finite: a real-linear projection, its own adjoint (the
        # VJP and the JVP alike) and commuting with conj
        return tg.complex(tg.where(tg.isfinite(tg.real(x)), tg.real(v), 0),
                          tg.where(tg.isfinite(tg.imag(x)), tg.imag(v), 0))
    return tg.where(tg.isfinite(x), v, 0)


# ---------------------------------------------------------------------------------------
# Kernels that are more than the NumPy function
# ---------------------------------------------------------------------------------------

def _round_kernel(x, decimals=0):
    return np.round(x, decimals)


def _nan_to_num_kernel(x, copy=True, nan=0.0, posinf=None, neginf=None):
    # NOTE: NumPy's copy=False writes into x; a tensor's value is never replaced behind
    # its graph's back, so that form is refused rather than silently copying. `copy` is a
    # parameter only so that positional arguments bind as NumPy's (x, copy, nan, ...); a
    # kernel receives it only when the caller passed it.
    if not copy:
        raise ValueError("copy=False (replacing the values in place) is not supported; "
                         "use x = tg.nan_to_num(x, ...)")
    return np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)


def divmod_(x, y):
    """``(floor_divide(x, y), remainder(x, y))``, as ``numpy.divmod`` (and ``divmod(x, y)``).

    >>> import tapegrad as tg
    >>> q, r = tg.divmod(tg.tensor([7.0, -7.0]), 2.0)
    >>> q, r
    (tensor([ 3., -4.]), tensor([1., 1.]))
    """
    return tg.floor_divide(x, y), tg.remainder(x, y)


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

_FLOAT_TESTS = (
    ("isnan", np.isnan, "Whether x is NaN"),
    ("isinf", np.isinf, "Whether x is +inf or -inf"),
    ("isfinite", np.isfinite, "Whether x is neither infinite nor NaN"),
    ("signbit", np.signbit, "Whether the sign bit of x is set (true for -0.0 and -nan too)"),
)


# The ops here that NumPy defines on complex input and that are holomorphic there: they
# are registered complex=True, with the VJP conj(partial(conj(g))) (Note: [complex rules]
# in ops.py). The others are refused on complex values that need a gradient: NumPy has no
# complex loop (deg2rad, cbrt, logaddexp, arctan2, hypot, floor, remainder, copysign,
# ...), or they are not holomorphic and would need a
# rule of their own (nan_to_num replaces each part separately).
# fmax and fmin order complex values lexicographically (NumPy's complex loops) and their
# gradient routes g to the selected input (a real mask): complex-correct as it is, so they
# are registered complex=True with the real rule (helper cx18, docs/decisions.md).
ROUTING = frozenset(("fmax", "fmin"))
HOLOMORPHIC = frozenset(("tan", "sinh", "cosh", "arcsin", "arccos", "arctan", "arcsinh",
                         "arccosh", "arctanh", "sinc", "log1p", "expm1", "log2", "log10",
                         "exp2", "reciprocal"))


def register(registry, draw):
    """Register this module's ops; called by ``ops.tapegrad_register_ops``."""

    def op(name, kernel, *partials, **options):
        # Every op here is a NumPy ufunc (or applies one per element with scalar
        # parameters): vmap's rule is "elementwise" (broadcast, one call).
        vjp, jvp = _rules(name, partials)
        if name in HOLOMORPHIC:
            vjp = holomorphic(vjp)      # the partials are v * f'(z) (Note: [complex rules])
            options["complex"] = True
        elif name in ROUTING:
            options["complex"] = True   # the partials select v: no conjugate to take
        return registry.register_op(name, kernels={"cpu": kernel}, vjp=vjp, jvp=jvp,
                                    batch="elementwise", **options)

    unary_x = {"save_ans": False}                     # the partial reads x only
    unary_ans = {"save_inputs": (False,)}             # ... ans only
    unary_none = {"save_inputs": (False,), "save_ans": False}
    binary_none = {"save_inputs": (False, False), "save_ans": False}
    normal, nonzero, positive = draw.normal, draw.nonzero, draw.positive

    def inside(lo, hi):
        return lambda *shape: draw.uniform(lo, hi, *shape)

    # -- trigonometric and hyperbolic -----------------------------------------------------
    op("tan", np.tan, _d_tan, **unary_ans, samples=unary_samples(inside(-1.2, 1.2)),
       doc="The tangent of x (radians), elementwise.")
    op("sinh", np.sinh, lambda v, ans, x: v * tg.cosh(x), **unary_x,
       samples=unary_samples(normal), doc="The hyperbolic sine, elementwise.")
    op("cosh", np.cosh, lambda v, ans, x: v * tg.sinh(x), **unary_x,
       samples=unary_samples(normal), doc="The hyperbolic cosine, elementwise.")
    op("arcsin", np.arcsin, _d_arcsin, **unary_x, samples=unary_samples(inside(-0.8, 0.8)),
       doc="The inverse sine, in [-pi/2, pi/2], elementwise (nan outside [-1, 1]). The "
           "gradient 1/sqrt(1 - x**2) is inf at |x| == 1 and nan beyond (as PyTorch).")
    op("arccos", np.arccos, _d_arccos, **unary_x, samples=unary_samples(inside(-0.8, 0.8)),
       doc="The inverse cosine, in [0, pi], elementwise (nan outside [-1, 1]). The "
           "gradient -1/sqrt(1 - x**2) is -inf at |x| == 1 and nan beyond (as PyTorch).")
    op("arctan", np.arctan, _d_arctan, **unary_x, samples=unary_samples(normal),
       doc="The inverse tangent, in (-pi/2, pi/2), elementwise.")
    op("arcsinh", np.arcsinh, _d_arcsinh, **unary_x, samples=unary_samples(normal),
       doc="The inverse hyperbolic sine, elementwise.")
    op("arccosh", np.arccosh, _d_arccosh, **unary_x, samples=unary_samples(inside(1.2, 3.0)),
       doc="The inverse hyperbolic cosine, elementwise (nan below 1). The gradient "
           "1/sqrt(x**2 - 1) is inf at x == 1 (as PyTorch).")
    op("arctanh", np.arctanh, _d_arctanh, **unary_x, samples=unary_samples(inside(-0.8, 0.8)),
       doc="The inverse hyperbolic tangent, elementwise (±inf at ±1, nan beyond). The "
           "gradient 1/(1 - x**2) is inf at |x| == 1 (as PyTorch).")
    op("arctan2", np.arctan2, _d_arctan2_x, _d_arctan2_y, save_ans=False,
       samples=binary_samples(nonzero, nonzero, scalar_a=0.7, scalar_b=-1.3),
       doc="The angle of the point (x2, x1) in [-pi, pi] (arctan of x1/x2 with the "
           "quadrant from both signs), elementwise with NumPy broadcasting. The gradients "
           "are x2/(x1**2 + x2**2) and -x1/(x1**2 + x2**2), taken as 0 at (0, 0) (as "
           "PyTorch).")
    op("hypot", np.hypot, _d_hypot_x, _d_hypot_y,
       samples=binary_samples(normal, normal),
       doc="sqrt(x1**2 + x2**2), elementwise with NumPy broadcasting, without overflow. "
           "The gradients are x1/hypot and x2/hypot, taken as 0 at (0, 0), a subgradient "
           "(PyTorch's convention for norm at 0; torch.hypot itself gives nan there).")
    op("sinc", np.sinc, _d_sinc,
       samples=unary_samples(normal) + [(np.array([0.0, 0.03, -0.099, 0.101, -2.5]),)],
       doc="sin(pi x) / (pi x), and 1 at x == 0 (numpy.sinc, the normalized sinc), "
           "elementwise. Its derivatives at 0 are their limits (f'(0) = 0).")
    for name, ufunc, scale, what in (("deg2rad", np.deg2rad, _RAD_PER_DEG, "degrees to radians"),
                                      ("radians", np.radians, _RAD_PER_DEG, "degrees to radians"),
                                      ("rad2deg", np.rad2deg, _DEG_PER_RAD, "radians to degrees"),
                                      ("degrees", np.degrees, _DEG_PER_RAD, "radians to degrees")):
        op(name, ufunc, lambda v, ans, x, _s=scale: v * _s, **unary_none,
           samples=unary_samples(normal), doc=f"x converted from {what}, elementwise.")

    # -- exponentials and logarithms ------------------------------------------------------
    op("log1p", np.log1p, _d_log1p, **unary_x, samples=unary_samples(inside(-0.5, 2.0)),
       doc="log(1 + x), elementwise, accurate for small x (-inf at -1, nan below).")
    op("expm1", np.expm1, _d_expm1, **unary_ans, samples=unary_samples(normal),
       doc="exp(x) - 1, elementwise, accurate for small x.")
    op("log2", np.log2, _d_log2, **unary_x, samples=unary_samples(positive),
       doc="The base-2 logarithm, elementwise (-inf at 0, nan below).")
    op("log10", np.log10, _d_log10, **unary_x, samples=unary_samples(positive),
       doc="The base-10 logarithm, elementwise (-inf at 0, nan below).")
    op("exp2", np.exp2, _d_exp2, **unary_ans, samples=unary_samples(normal),
       doc="2**x, elementwise.")
    op("logaddexp", np.logaddexp, _d_logaddexp_x, _d_logaddexp_y,
       samples=binary_samples(normal, normal)
       + [(np.array([-800.0, 800.0]), np.array([-801.0, 799.0]))],
       doc="log(exp(x1) + exp(x2)), elementwise with NumPy broadcasting, without overflow. "
           "The gradients exp(x1 - ans) and exp(x2 - ans) never overflow either; where an "
           "input is +inf they are the limits, 1 for it and 0 for the other (as PyTorch).")
    op("logaddexp2", np.logaddexp2, _d_logaddexp2_x, _d_logaddexp2_y,
       samples=binary_samples(normal, normal),
       doc="log2(2**x1 + 2**x2), elementwise with NumPy broadcasting, without overflow. "
           "Gradients as logaddexp's (base 2), the limits 1 and 0 where an input is +inf.")
    op("reciprocal", np.reciprocal, _d_reciprocal, **unary_ans, samples=unary_samples(nonzero),
       doc="1 / x, elementwise (for integer x NumPy's integer division: 1/2 == 0; "
           "integers get no gradient).")
    op("cbrt", np.cbrt, _d_cbrt, **unary_ans, samples=unary_samples(nonzero),
       doc="The real cube root, elementwise (negative for negative x). The gradient "
           "1/(3 cbrt(x)**2) is inf at 0 (as sqrt's in PyTorch).")

    # -- NaN-aware selection --------------------------------------------------------------
    with_nans = draw.normal(3, 4)
    with_nans[0, 1] = with_nans[2, 3] = np.nan
    for name, ufunc, dx, dy, which in (("fmax", np.fmax, _d_fmax_x, _d_fmax_y, "larger"),
                                       ("fmin", np.fmin, _d_fmin_x, _d_fmin_y, "smaller")):
        op(name, ufunc, dx, dy,
           samples=binary_samples(normal, normal, scalar_a=0.1, scalar_b=-0.2)
           + [(with_nans, draw.normal(4)), (draw.normal(3, 1), with_nans)],
           doc=f"The {which} of x1 and x2, elementwise with NumPy broadcasting, ignoring "
               f"NaN: where one input is NaN the other is returned (NaN only if both are). "
               f"The gradient goes to the selected input, all of it to the non-NaN one "
               f"(PyTorch's rule), and is split evenly at ties (as maximum/minimum).")

    # -- rounding: piecewise constant, zero gradient (PyTorch's rule) --------------------
    for name, ufunc, what in (("floor", np.floor, "The largest integer <= x"),
                              ("ceil", np.ceil, "The smallest integer >= x"),
                              ("trunc", np.trunc, "x rounded towards zero"),
                              ("rint", np.rint, "x rounded to the nearest integer (halves "
                                                "to even)")):
        # (np.rint rounds complex values part by part; floor/ceil/trunc have no complex
        # loop in NumPy)
        op(name, ufunc, _zero, **unary_none, samples=unary_samples(draw.off_grid),
           **({"complex": True} if name == "rint" else {}),
           doc=f"{what}, elementwise (NumPy's dtype: integer and bool inputs keep theirs). "
               f"Piecewise constant: its gradient is 0 everywhere, the jumps included "
               f"(PyTorch's rule).")
    round_op = op("round", _round_kernel, _zero, **unary_none, params=("decimals",),
                  complex=True,
                  samples=[tg.Sample(draw.off_grid(3, 4, step=0.1), decimals=1),
                           (draw.off_grid(5),),
                           (draw.off_grid(2, 3, step=10.0), -1),
                           tg.Sample(draw.off_grid(4, step=0.01), decimals=2)],
                  doc="x rounded to `decimals` decimal places (halves to even; negative "
                      "decimals round to tens, hundreds, ...), as numpy.round. Piecewise "
                      "constant: its gradient is 0 everywhere (PyTorch's rule).")
    registry.register_function("around", round_op, method=False,
                               samples=[tg.Sample(draw.off_grid(3), decimals=0)])

    # -- remainders and integer division --------------------------------------------------
    quotient_samples = [(draw.off_grid(3, 4), draw.divisors(3, 4)),
                        (draw.off_grid(3, 4), draw.divisors(4)),
                        (draw.off_grid(2, 1, 3), draw.divisors(4, 1)),
                        (draw.off_grid(3), 2.0), (1.5, draw.divisors(2, 2))]
    remainder_op = op(
        "remainder", np.remainder, _ones, _d_remainder_y, save_ans=False,
        samples=quotient_samples,
        doc="x1 - floor(x1/x2) * x2: the remainder with the sign of the divisor "
            "(numpy.remainder, numpy.mod, Python's %), elementwise with NumPy "
            "broadcasting. The gradients are 1 and -floor(x1/x2), also at its jumps "
            "(PyTorch's rule).")
    registry.register_function("mod", remainder_op, samples=[(draw.off_grid(3), 2.0)])
    op("fmod", np.fmod, _ones, _d_fmod_y, save_ans=False, samples=quotient_samples,
       doc="x1 - trunc(x1/x2) * x2: the remainder with the sign of the dividend (C's "
           "fmod), elementwise with NumPy broadcasting. The gradients are 1 and "
           "-trunc(x1/x2), also at its jumps (PyTorch's rule).")
    op("floor_divide", np.floor_divide, _zero, _zero, **binary_none, samples=quotient_samples,
       doc="floor(x1 / x2) (Python's //), elementwise with NumPy broadcasting; integer "
           "inputs give integers. Piecewise constant: its gradients are 0 (PyTorch's rule).")
    registry.register_function("divmod", divmod_, method=False,
                               samples=[(draw.off_grid(2, 3), draw.divisors(3))])

    # -- sign manipulation and steps ------------------------------------------------------
    op("copysign", np.copysign, _d_copysign_x, _zero, save_inputs=(True, False),
       samples=binary_samples(nonzero, nonzero),
       doc="The magnitude of x1 with the sign (bit) of x2, elementwise with NumPy "
           "broadcasting. The gradient is sign(x1) * sign(result) for x1, 0 where x1 == 0, "
           "and 0 for x2 (PyTorch's rule).")
    op("heaviside", np.heaviside, _zero, _d_heaviside_y, save_inputs=(True, False),
       save_ans=False, samples=binary_samples(nonzero, normal),
       doc="The step function: 0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0, "
           "elementwise with NumPy broadcasting. The gradient for x1 is 0, the jump "
           "included (torch.heaviside has none and raises; 0 is the convention of sign and "
           "floor); for x2 it is 1 where x1 == 0 and 0 elsewhere (exact).")

    # -- float classification and clean-up ------------------------------------------------
    specials = np.array([[0.5, -0.0, np.nan, np.inf], [-np.inf, 3.0, -np.nan, 0.0]])
    for name, ufunc, what in _FLOAT_TESTS:
        registry.register_op(name, kernels={"cpu": ufunc}, vjp=None, nin=1, batch="elementwise",
                             samples=[(specials,), (draw.normal(2, 3),)],
                             doc=f"{what}, elementwise: a bool tensor that never requires grad.")
    dirty = draw.normal(3, 4)
    dirty[0, 0], dirty[1, 2], dirty[2, 1] = np.nan, np.inf, -np.inf
    nan_only = draw.normal(2, 3)
    nan_only[1, 1] = np.nan
    op("nan_to_num", _nan_to_num_kernel, _d_nan_to_num, save_ans=False, complex=True,
       params=("copy", "nan", "posinf", "neginf"),
       samples=[(nan_only,), tg.Sample(dirty, nan=-1.0, posinf=10.0, neginf=-10.0),
                tg.Sample(nan_only, True, 2.5)],
       doc="x with NaN replaced by `nan` (0.0), +inf by `posinf` and -inf by `neginf` "
           "(None: the largest / most negative finite value of x's dtype), as "
           "numpy.nan_to_num; copy=False (in place) is refused. The gradient passes "
           "where x is finite and is 0 where it was replaced (for complex x, part by "
           "part, as NumPy replaces them).")

    # -- NumPy's aliases: the same op under a second name ---------------------------------
    registry.register_function("absolute", registry.ops["abs"],
                               samples=[(draw.nonzero(3, 4),)])
    registry.register_function("true_divide", registry.ops["divide"],
                               samples=[(draw.normal(3, 4), draw.nonzero(4))])
