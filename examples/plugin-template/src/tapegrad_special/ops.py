"""The ops of tapegrad-special: special_erf, special_gelu, special_softplus, special_logaddexp.

The names carry the plugin's prefix so that they never meet a first-party name (``tg.erf``
is tapegrad-scipy's, ``tg.logaddexp`` tapegrad-elementwise's; see the README).

Each op below is one ``registry.register_op`` call holding, side by side, its CPU kernel
(NumPy and the standard library: arrays in, an array out), its two derivative rules and
the sample inputs the contract kit checks it on (``tapegrad.testing.check_plugin``).

Vocabulary, for every rule in this file (tapegrad's own):
    g        the gradient flowing into the op's output (shape and dtype of ``ans``)
    t        the inputs' tangents, one per input (forward mode)
    ans      the op's forward result
    x, y     the op's inputs, in order

A VJP rule returns one gradient per input (None where there is none). It is written with
tapegrad ops only (operators, ``tg.exp``, ``tg.sigmoid``, this plugin's own
``tg.special_erf``), never NumPy on arrays, so it runs on any device and is itself
differentiable: second derivatives (``backward(create_graph=True)``, ``tg.hessian``) come
for free. It may return a gradient in the broadcast shape: the engine sums it back to
each input's shape.

Each op also has a forward-mode (JVP) rule, ``jvp(t, ans, *inputs, **params)``: ``t``
holds one tangent per input (None where that input has none), and the rule returns the
output's tangent (in ans's shape, or one that broadcasts to it), with tapegrad ops too.
For an elementwise op the Jacobian is diagonal, so the JVP multiplies each tangent by the
same derivative the VJP multiplies ``g`` by: each op's derivative is written once, as a
``_d_<op>`` function, and both rules call it, so the two can never disagree (the
contract kit checks that they are transposes of each other).

>>> import tapegrad as tg
>>> x = tg.tensor([-1.0, 0.0, 30.0], requires_grad=True)
>>> y = tg.special_softplus(x)             # log(1 + e^x), finite for any x
>>> y.backward(tg.ones(3))
>>> x.grad.numpy().round(4)                # the sigmoid
array([0.2689, 0.5   , 1.    ])
"""

import math

import numpy as np
import tapegrad as tg

_SQRT1_2 = math.sqrt(0.5)              # Python floats: NumPy treats them as "weak"
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)   # scalars, so float32 stays float32
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# ---------------------------------------------------------------------------------------
# Kernels: arrays (or Python numbers) in, an array out, NumPy's dtype rules
# ---------------------------------------------------------------------------------------

_erf_each = np.frompyfunc(math.erf, 1, 1)


def _erf_kernel(x):
    # NOTE: math.erf is correctly rounded to ~1 ulp in float64 but runs once per element
    # (about 50 ns each). A plugin that needs speed would use a vectorised approximation,
    # or declare scipy as a dependency and call scipy.special.erf.
    x = np.asarray(x)
    dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    return np.asarray(_erf_each(x), dtype=dtype)


def _gelu_kernel(x):
    x = np.asarray(x)
    return 0.5 * x * (1.0 + _erf_kernel(x * _SQRT1_2))


def _softplus_kernel(x, beta=1.0):
    if not beta > 0:
        # Raised as ValueError: tapegrad adds the op's name and its inputs' shapes.
        raise ValueError(f"beta must be positive, got {beta!r}")
    # NOTE: log(1 + exp(z)) overflows for z > ~709; logaddexp(0, z) is the same value
    # computed without overflow (and without losing log1p's precision for z << 0).
    return np.logaddexp(0, np.multiply(x, beta)) / beta


# ---------------------------------------------------------------------------------------
# Derivatives, and the gradient (VJP) and forward-mode (JVP) rules built on them
# ---------------------------------------------------------------------------------------

def _d_erf(v, x):
    # d erf(x)/dx = 2/sqrt(pi) exp(-x^2), times v (a gradient g, or a tangent)
    return v * (_TWO_OVER_SQRT_PI * tg.exp(-(x * x)))


def _erf_vjp(g, ans, x):
    return (_d_erf(g, x),)


def _erf_jvp(t, ans, x):
    # t[0] is x's tangent. The engine calls a JVP rule only when some input has a
    # tangent, so a one-input op's is never None.
    return _d_erf(t[0], x)


def _d_gelu(v, x):
    # gelu(x) = x Phi(x), so gelu'(x) = Phi(x) + x phi(x) with phi the normal density.
    # Phi is written with tg.special_erf, this plugin's own op, so both rules stay
    # differentiable.
    cdf = 0.5 * (1.0 + tg.special_erf(x * _SQRT1_2))
    pdf = _INV_SQRT_2PI * tg.exp(-0.5 * (x * x))
    return v * (cdf + x * pdf)


def _gelu_vjp(g, ans, x):
    return (_d_gelu(g, x),)


def _gelu_jvp(t, ans, x):
    return _d_gelu(t[0], x)


def _d_softplus(v, x, beta):
    return v * tg.sigmoid(x * beta)


def _softplus_vjp(g, ans, x, beta=1.0):
    # The parameter `beta` has a default, so tapegrad takes it for a keyword parameter
    # (passed unchanged to the kernel and both rules), not for a tensor input.
    return (_d_softplus(g, x, beta),)


def _softplus_jvp(t, ans, x, beta=1.0):
    return _d_softplus(t[0], x, beta)


def _d_logaddexp(v, ans, x):
    # d/dx log(e^x + e^y) = e^(x - ans): the softmax weight of x, never above 1.
    # NOTE: where x = y = -inf, ans is -inf and x - ans is nan (as in NumPy and PyTorch).
    return v * tg.exp(x - ans)


def _logaddexp_vjp(g, ans, x, y):
    # tg.needs_grad skips the work for an input that needs no gradient (a constant or a
    # Python number, which arrives here as itself).
    return (_d_logaddexp(g, ans, x) if tg.needs_grad(x) else None,
            _d_logaddexp(g, ans, y) if tg.needs_grad(y) else None)


def _logaddexp_jvp(t, ans, x, y):
    # The sum of each input's contribution, skipping inputs without a tangent.
    # NOTE: test `is None` here, not tg.needs_grad: in forward mode an input can carry a
    # tangent without requiring grad. Each term has its input's shape and broadcasts to
    # ans's, as the rule's result may.
    tx, ty = t
    if ty is None:
        return _d_logaddexp(tx, ans, x)
    if tx is None:
        return _d_logaddexp(ty, ans, y)
    return _d_logaddexp(tx, ans, x) + _d_logaddexp(ty, ans, y)


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

@tg.hookimpl
def tapegrad_register_ops(registry):
    """Register this plugin's ops (called once, when tapegrad loads its plugins)."""
    # Samples are drawn from a seeded generator, so every run checks the same values.
    # They are float64 (the contract kit also runs them in float32) and stay away from
    # points where a derivative does not exist or overflows.
    rng = np.random.default_rng(0)
    normal = lambda *shape: rng.standard_normal(shape)
    reg = registry.register_op

    reg("special_erf", kernels={"cpu": _erf_kernel}, vjp=_erf_vjp, jvp=_erf_jvp,
        # vmap's rule: an elementwise op broadcasts its inputs, so one call on the
        # whole batch does it (tapegrad/_batching.py; the contract kit checks it)
        batch="elementwise",
        save_ans=False,                    # the rule reads x, not erf(x)
        samples=[(normal(3, 4),), (2 * normal(5),), (np.asarray(0.3),)],
        doc="The error function 2/sqrt(pi) * integral of exp(-t^2) from 0 to x, "
            "elementwise.")
    reg("special_gelu", kernels={"cpu": _gelu_kernel}, vjp=_gelu_vjp, jvp=_gelu_jvp,
        batch="elementwise", save_ans=False,
        samples=[(normal(3, 4),), (3 * normal(2, 1, 3),), (np.array(-0.7),)],
        doc="The Gaussian error linear unit x * Phi(x) = x/2 (1 + erf(x/sqrt(2))) "
            "(exact, not the tanh approximation), elementwise.")
    reg("special_softplus", kernels={"cpu": _softplus_kernel}, vjp=_softplus_vjp,
        jvp=_softplus_jvp, batch="elementwise",
        save_ans=False,
        samples=[(normal(3, 4),), tg.Sample(4 * normal(6), beta=2.0),
                 tg.Sample(normal(2, 3), 0.5),       # beta bound by position, as NumPy
                 (np.array([-40.0, -5.0, 5.0, 40.0]),)],
        doc="log(1 + exp(beta x)) / beta (beta > 0, default 1), elementwise, without "
            "overflow for large x. Its gradient is sigmoid(beta x).")
    reg("special_logaddexp", kernels={"cpu": np.logaddexp}, vjp=_logaddexp_vjp,
        jvp=_logaddexp_jvp, batch="elementwise",
        samples=[(normal(3, 4), normal(3, 4)), (normal(3, 4), normal(4)),
                 (normal(2, 1, 3), normal(4, 1)), (normal(3), 0.5), (-1.5, normal(2, 2)),
                 (50 + normal(3), 50 + normal(3))],
        doc="log(exp(x) + exp(y)), elementwise with NumPy broadcasting, without overflow "
            "(numpy.logaddexp).")
