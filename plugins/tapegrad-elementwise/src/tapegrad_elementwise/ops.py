"""The elementwise ops: arithmetic, exp/log, activations, min/max, where, comparisons.

Each op below is one ``registry.register_op`` call holding, side by side, its CPU kernel
(NumPy, so dtypes, broadcasting and Python-scalar promotion are NumPy's), its gradient
rule and the sample inputs the contract kit checks it on.

Vocabulary, for every rule in this file:
    g        the gradient flowing into the op's output (shape and dtype of ``ans``)
    t        the inputs' tangents, one per input, None where there is none (JVP rules)
    ans      the op's forward result
    x, y     the op's inputs, in order (``cond, x, y`` for ``where``)

A rule returns one gradient per input (None where there is none). It may return a
gradient in the broadcast shape, or in ``g``'s dtype: the engine sums it back to the
input's shape and casts it to the input's dtype. Rules use tapegrad ops only (operators,
``tg.<op>``), never NumPy on arrays, so they run on every device and are themselves
differentiable (``backward(create_graph=True)``). Masks are applied with
``tg.where(mask, g, 0)``, which keeps ``g``'s dtype (a float64 mask would promote a
float32 gradient). Inputs a rule does not read are declared with ``save_inputs=`` /
``save_ans=`` so the tape neither keeps them alive nor version-checks them; such inputs
arrive as ``tg.TensorMeta`` (shape, dtype, device). Python scalars arrive as themselves.

>>> import tapegrad as tg
>>> x = tg.tensor([1.0, 4.0], requires_grad=True)
>>> y = 3 * tg.sqrt(x) - x          # d/dx = 3 / (2 sqrt(x)) - 1
>>> y.backward(tg.ones(2))
>>> x.grad
tensor([ 0.5 , -0.25])
>>> x < 2.0
tensor([ True, False])
"""

import math

import numpy as np
import tapegrad as tg
from tapegrad._batching import pad_batched as _pad_batched
from tapegrad._engine import eager_kernel as _eager_kernel
from tapegrad._engine import get_tracer as _get_tracer

from . import _backward_kernels, aliases, complex_ops, ufuncs
from .ufuncs import holomorphic as _holomorphic
from .ufuncs import quiet_complex_nan as _quiet_complex_nan
from ._samples import Draw as _Draw
from ._samples import binary_samples as _binary_samples
from ._samples import unary_samples as _unary_samples

_NUMBER = (int, float, complex, np.generic)


def _is_number(v):
    """Whether an input is a Python/NumPy scalar (it gets no gradient)."""
    return isinstance(v, _NUMBER)


# Rules skip the gradients nobody asked for (``x * 2.0``, ``x ** 3``): those would be
# computed and then dropped by the engine. tg.needs_grad is the engine's C-level check.
_needs_grad = tg.needs_grad


# ---------------------------------------------------------------------------------------
# Kernels that are more than one NumPy call
# ---------------------------------------------------------------------------------------

def _sigmoid_kernel(x):
    # NOTE: 1 / (1 + exp(-x)) overflows, with a warning, for x << 0. exp(-|x|) lies in
    # (0, 1], so both branches are finite; it underflows silently to 0 only where the
    # result is 0 or 1 to working precision anyway.
    if np.iscomplexobj(x):
        # the trick above is for real x (|z| is not the real part): the definition, as
        # torch.sigmoid on complex
        return 1 / (1 + np.exp(-x))
    e = np.exp(-np.abs(x))
    s = 1 / (1 + e)
    return np.where(x >= 0, s, e * s)


def _clip_kernel(x, a_min=None, a_max=None):
    return np.clip(x, _clip_bound(a_min), _clip_bound(a_max))


def _clip_bound(b):
    """A bound as the kernel can pass it to NumPy. NOTE: a Tensor bound reaching np.clip
    would dispatch back to tg.clip without end, so its array is used. (A bound that
    requires grad never gets here: the engine refuses tensor parameters that require grad,
    whose gradient would be lost; for torch.clamp's gradient to a bound write
    tg.where(x < lo, lo, x).)"""
    return np.asarray(b) if isinstance(b, tg.Tensor) else b


def _clip_batch(inputs, batched, a_min=None, a_max=None):
    """vmap's rule (inputs physical, the vmapped axis first): clip broadcasts x against
    its bounds, which are parameters, not inputs, so batch="elementwise" would not see
    them. NOTE: an array bound with more axes than x's logical part must broadcast
    against those, never against the vmapped axis: x gets unit axes after it first."""
    (x,) = inputs
    # (len(shape), not np.ndim: NumPy's fallback would convert a tensor bound to an array)
    ndim = max(x.ndim - 1, *(len(b.shape) if hasattr(b, "shape") else np.ndim(b)
                             for b in (a_min, a_max)))
    return tg.clip(_pad_batched(x, ndim), a_min, a_max)


def _exp_vjp(g, ans, x):
    return (g * ans,)


def _log_vjp(g, ans, x):
    return (g / x,)


def _multiply_vjp(g, ans, x, y):
    return (g * y if _needs_grad(x) else None,
            g * x if _needs_grad(y) else None)


def _divide_vjp(g, ans, x, y):
    gx = g / y
    return gx, (-gx * x / y if _needs_grad(y) else None)


def _power_vjp(g, ans, x, y):
    return (_power_base_grad(g, x, y) if _needs_grad(x) else None,
            _power_exponent_grad(g, x, y) if _needs_grad(y) else None)


def _power_base_grad(g, x, y):
    """d(x**y)/dx = y x**(y-1) times g (a cotangent, or x's tangent in the JVP)."""
    if _is_number(y):
        # NOTE: d/dx x**0 is 0, also at x == 0, where 0 * 0**-1 would be nan.
        return g * y * x ** (y - 1) if y != 0 else tg.zeros_like(g)
    # NOTE: the same trap elementwise: where y == 0 use the exponent 1 - 1 = 0, so
    # y * x**(y-1) is 0 * 1 = 0 instead of 0 * inf = nan (with a warning) at x == 0.
    return g * y * x ** (tg.where(y == 0, 1, y) - 1)


def _power_exponent_grad(g, x, y):
    """d(x**y)/dy = x**y log(x), taken as 0 where x == 0 and y >= 0 (PyTorch's rule),
    times g (a cotangent, or y's tangent in the JVP)."""
    # NOTE: x**y is recomputed rather than saved as `ans`. Saving it would keep every
    # `x ** 2` output alive for a rule that almost never runs (exponents rarely require
    # grad) and make `y = x ** 2; y += 1` fail backward as "modified in place".
    ans = x ** y
    if _is_number(x) and np.isrealobj(x) and x > 0:
        return g * ans * math.log(x)
    at_zero = tg.logical_and(x == 0, y >= 0)
    # NOTE: "safe where": take the log of 1 where the mask holds. log(0) would warn, and
    # its -inf, although masked out here, would turn into nan in the second derivative.
    return tg.where(at_zero, 0, g * ans * tg.log(tg.where(at_zero, 1, x)))


@_quiet_complex_nan
def _clip_vjp(g, ans, x, a_min=None, a_max=None):
    # The gradient passes where a_min <= x <= a_max, bounds included (PyTorch's clamp).
    if a_min is None and a_max is None:
        return (g,)
    if a_min is None:
        inside = x <= a_max
    elif a_max is None:
        inside = x >= a_min
    else:
        inside = tg.logical_and(x >= a_min, x <= a_max)
    return (tg.where(inside, g, 0),)


# Note: [ties in maximum and minimum]
# Where x == y the derivative does not exist; each input gets half of g (PyTorch's rule),
# which is also what a central finite difference measures there, and keeps
# maximum(x, x) == x with gradient g. Where either is nan, both get g (as PyTorch).

@_quiet_complex_nan
def _maximum_vjp(g, ans, x, y):
    split = tg.where(x == y, g * 0.5, g)        # see Note: [ties in maximum and minimum]
    return (tg.where(x < y, 0, split) if _needs_grad(x) else None,
            tg.where(x > y, 0, split) if _needs_grad(y) else None)


@_quiet_complex_nan
def _minimum_vjp(g, ans, x, y):
    split = tg.where(x == y, g * 0.5, g)        # see Note: [ties in maximum and minimum]
    return (tg.where(x > y, 0, split) if _needs_grad(x) else None,
            tg.where(x < y, 0, split) if _needs_grad(y) else None)


def _where_vjp(g, ans, cond, x, y):
    return (None,
            tg.where(cond, g, 0) if _needs_grad(x) else None,
            tg.where(cond, 0, g) if _needs_grad(y) else None)


# Note: [complex rules]
# An op registered with complex=True gets and returns cotangents in PyTorch's convention
# (docs/autograd.md, "Complex numbers"): for a holomorphic f the VJP is g * conj(f'(z)),
# the JVP t * f'(z). The real rules here are all of the form g * f'(x) (bilinear in g and
# the derivative), so for a complex g the VJP is conj(rule(conj(g))) = g * conj(f'(z)):
# _holomorphic (ufuncs.py) wraps a real rule so; the JVP rules (t * f'(z)) need nothing. The branch is
# on the dtype, never on values, so a tg.compile replay runs the same kernels. A real
# input of a complex op (x * z) gets the complex gradient's real part from the engine.

def _real_only(g):
    """Whether the single-op backward kernels (C loops over real arrays) apply to g."""
    return g.dtype.kind != "c"


# ---------------------------------------------------------------------------------------
# Forward-mode (JVP) rules
# ---------------------------------------------------------------------------------------

# Vocabulary of the JVP rules: `t` holds one tangent per input (None where that input has
# none), `tx`, `ty` are its entries; a rule returns the output's tangent, in ans's shape or
# one that broadcasts to it.
#
# NOTE: a rule never asks tg.needs_grad: under forward mode an input can carry a tangent
# without requiring grad, so a VJP's `if _needs_grad(x)` skips would drop its tangent. The
# rules test `t[i] is None` instead, which is why the binary ops' VJPs are not reused
# wholesale; what is shared (power's partials) takes the cotangent or tangent as `g`.


def _unary_jvp(vjp):
    """The JVP of a unary elementwise op from its VJP: the Jacobian is diagonal, so the
    VJP applied to the tangent is the output's tangent. Sharing the rule keeps the two
    modes' conventions (relu's 0 at nan, abs's 0 at 0) and backward-op kernels the same.
    (tapegrad_scipy._common.diagonal_jvp is the same idea; each distribution stands alone.)"""
    def jvp(t, ans, x, *params, **kwparams):
        if t[0] is None:
            return tg.zeros_like(ans)
        return vjp(t[0], ans, x, *params, **kwparams)[0]
    jvp.__qualname__ = jvp.__name__ = vjp.__name__.replace("vjp", "jvp")
    return jvp


def _tangent_sum(*terms):
    """The sum of the terms that are not None (each one input's contribution)."""
    present = [v for v in terms if v is not None]
    if not present:
        return None
    total = present[0]
    for v in present[1:]:
        total = total + v
    return total


def _or_zeros(tangent, ans):
    # The contract: a rule returns a Tensor even when no differentiable input has a tangent.
    return tg.zeros_like(ans) if tangent is None else tangent


def _subtract_jvp(t, ans, x, y):
    tx, ty = t
    return _or_zeros(_tangent_sum(tx, -ty if ty is not None else None), ans)


def _multiply_jvp(t, ans, x, y):
    tx, ty = t
    return _or_zeros(_tangent_sum(tx * y if tx is not None else None,
                                  x * ty if ty is not None else None), ans)


def _divide_jvp(t, ans, x, y):
    # The VJP's expressions with g replaced by a tangent (-(ty / y) * x / y, not
    # -ty * ans / y), so inf and nan come out where the VJP's do.
    tx, ty = t
    return _or_zeros(_tangent_sum(tx / y if tx is not None else None,
                                  -(ty / y) * x / y if ty is not None else None), ans)


def _power_jvp(t, ans, x, y):
    tx, ty = t
    return _or_zeros(_tangent_sum(
        _power_base_grad(tx, x, y) if tx is not None else None,
        _power_exponent_grad(ty, x, y) if ty is not None else None), ans)


def _tie_split(v, x, y):
    return tg.where(x == y, v * 0.5, v)         # see Note: [ties in maximum and minimum]


@_quiet_complex_nan
def _maximum_jvp(t, ans, x, y):
    tx, ty = t
    return _or_zeros(_tangent_sum(
        tg.where(x < y, 0, _tie_split(tx, x, y)) if tx is not None else None,
        tg.where(x > y, 0, _tie_split(ty, x, y)) if ty is not None else None), ans)


@_quiet_complex_nan
def _minimum_jvp(t, ans, x, y):
    tx, ty = t
    return _or_zeros(_tangent_sum(
        tg.where(x > y, 0, _tie_split(tx, x, y)) if tx is not None else None,
        tg.where(x < y, 0, _tie_split(ty, x, y)) if ty is not None else None), ans)


def _where_jvp(t, ans, cond, x, y):
    # Linear in (x, y); a missing tangent is a Python 0, which keeps the other's dtype and
    # allocates nothing (jvp="linear" would build zeros of the input's shape).
    _, tx, ty = t
    if tx is None and ty is None:
        return tg.zeros_like(ans)
    return tg.where(cond, 0 if tx is None else tx, 0 if ty is None else ty)


# ---------------------------------------------------------------------------------------
# Backward ops: an activation's gradient as one op
# ---------------------------------------------------------------------------------------


# Note: [backward ops]
# tanh's gradient g * (1 - ans * ans) is three ops (three kernel calls, three temporaries,
# three times the engine's per-op constant); tanh_backward(g, ans) is one, with one C loop
# (_backward_kernels.pyx) that gives the same bits. The forward op's rule calls it where
# it has a kernel for the gradient's device, and the composite elsewhere (the cuda plugin
# runs the composite's ops, as before). A backward op is an op like any other: its own
# rule, written with tapegrad ops (the backward ops included), makes double backward work;
# the contract kit checks it on its samples to second order.
# Vocabulary of their rules: `gg` flows into the backward op's result `out`; its inputs
# are the forward's `g` and `ans` (or `x`).

_BACKWARD_OPS = {}      # name -> the Op registered (its kernels say on which devices)

# (op, what its backward op reads besides g): the rules below whose real, eager branch is
# exactly `(<op>_backward(g, ans or x),)`, which the engine runs without the rule.
_VJP_OPS = (("relu", "ans"), ("tanh", "ans"), ("sigmoid", "ans"), ("sqrt", "ans"),
            ("abs", "x"), ("square", "x"), ("sin", "x"), ("cos", "x"))

# Each forward rule below runs its backward op where that op has a kernel for g's device,
# except while tg.compile records (`_eager_kernel` tests both in C: this runs once per
# node of every backward): there the composite's
# ufunc kernels join the replay's fused steps (one fused step beats one call per backward
# op), and both forms give the same bits. relu's composite has no fusible kernel: its
# rule runs the backward op while recording too. A backward op whose kernel carries a
# fusion recipe (`fused_as`, in _backward_kernels.pyx: its composite's ufunc calls) is
# recorded as itself, one step that a fused replay expands into those calls
# (`_records_fused`): the same replay, recorded with one dispatch instead of two or three.


def _records_fused(op, g):
    """Whether tg.compile records in this thread and op's kernel for g's device has a
    fusion recipe (see Note: [fusion recipes] in tapegrad/_compile.pyx)."""
    return (isinstance(g, tg.Tensor) and _get_tracer() is not None
            and getattr(op.kernels.get(g.device.name), "fused_as", None) is not None)


def _relu_vjp(g, ans, x):
    # NOTE: relu_backward also while tg.compile records: its composite (a comparison, whose
    # result is bool, and a where) never joins a fused step, so a replay would run two
    # kernels, ~7 us on W2's (32, 128) float32 arrays, where the C loop takes ~1 us.
    op = _BACKWARD_OPS["relu_backward"]
    if g.device.name in op.kernels:
        return (op(g, ans),)
    return (tg.where(ans > 0, g, 0),)


def _tanh_vjp(g, ans, x):
    op = _BACKWARD_OPS["tanh_backward"]
    if _real_only(g) and (_eager_kernel(op, g) or _records_fused(op, g)):
        return (op(g, ans),)
    return (g * (1 - ans * ans),)


def _sigmoid_vjp(g, ans, x):
    op = _BACKWARD_OPS["sigmoid_backward"]
    if _real_only(g) and (_eager_kernel(op, g) or _records_fused(op, g)):
        return (op(g, ans),)
    return (g * ans * (1 - ans),)


def _sqrt_vjp(g, ans, x):
    op = _BACKWARD_OPS["sqrt_backward"]
    if _real_only(g) and _eager_kernel(op, g):
        return (op(g, ans),)
    return (g / (2 * ans),)


def _abs_vjp(g, ans, x):
    if x.dtype.kind == "c":
        # |z| is not holomorphic: grad = g z / |z| (g real), 0 at 0 (PyTorch's)
        return (g * _unit(x, ans),)
    op = _BACKWARD_OPS["abs_backward"]
    if _eager_kernel(op, g):
        return (op(g, x),)
    return (g * tg.sign(x),)


def _unit(x, ans):
    """z / |z| for a complex x with ans = |z| (recomputed when not saved), 0 at 0 ("safe
    where": divide by 1 there)."""
    r = tg.abs(x) if ans is None or not isinstance(ans, tg.Tensor) else ans
    return x / tg.where(r == 0, 1, r)


def _abs_jvp(t, ans, x):
    if t[0] is None:
        return tg.zeros_like(ans)
    if x.dtype.kind == "c":
        # d|z| = Re(conj(z) dz) / |z|, 0 at 0
        return tg.real(tg.conj(_unit(x, None)) * t[0])
    return _abs_vjp(t[0], ans, x)[0]


def _sign_derivative(v, x):
    """The derivative of sign(z) = z / |z| (NumPy 2's complex sign; PyTorch's sgn) applied
    to v, for the VJP (v = g) and the JVP (v = dz) alike: i s Im(conj(s) v) / |z| with
    s = z / |z|, and 0 at z = 0. (It moves s along the unit circle only: the radial part
    of v drops out.)"""
    s = _unit(x, None)
    r = tg.abs(x)
    return 1j * s * tg.imag(tg.conj(s) * v) / tg.where(r == 0, 1, r)


def _sign_vjp(g, ans, x):
    if x.dtype.kind == "c":
        return (_sign_derivative(g, x),)
    return (tg.zeros_like(g),)      # piecewise constant (as PyTorch and JAX)


def _sign_jvp(t, ans, x):
    if t[0] is None or x.dtype.kind != "c":
        return tg.zeros_like(ans)
    return _sign_derivative(t[0], x)


def _square_vjp(g, ans, x):
    op = _BACKWARD_OPS["square_backward"]
    if _real_only(g) and _eager_kernel(op, g):
        return (op(g, x),)
    return (g * (2 * x),)


def _sin_vjp(g, ans, x):
    op = _BACKWARD_OPS["sin_backward"]
    if _real_only(g) and (_eager_kernel(op, g) or _records_fused(op, g)):
        return (op(g, x),)
    return (g * tg.cos(x),)


def _cos_vjp(g, ans, x):
    op = _BACKWARD_OPS["cos_backward"]
    if _real_only(g) and (_eager_kernel(op, g) or _records_fused(op, g)):
        return (op(g, x),)
    return (-g * tg.sin(x),)


# The rules of the backward ops. NOTE: relu_backward's and abs_backward's results are
# piecewise constant in their second input (a mask, a sign): the derivative there is 0
# wherever it exists, so it is declared not differentiable (as in the composites).

def _relu_backward_vjp(gg, out, g, ans):
    return (tg.relu_backward(gg, ans), None)


def _tanh_backward_vjp(gg, out, g, ans):
    # out = g (1 - ans^2): d/dg = 1 - ans^2, d/dans = -2 g ans
    return (tg.tanh_backward(gg, ans) if _needs_grad(g) else None,
            gg * g * (-2 * ans) if _needs_grad(ans) else None)


def _sigmoid_backward_vjp(gg, out, g, ans):
    # out = g ans (1 - ans): d/dg = ans (1 - ans), d/dans = g (1 - 2 ans)
    return (tg.sigmoid_backward(gg, ans) if _needs_grad(g) else None,
            gg * g * (1 - 2 * ans) if _needs_grad(ans) else None)


def _sqrt_backward_vjp(gg, out, g, ans):
    # out = g / (2 ans): d/dg = 1 / (2 ans), d/dans = -g / (2 ans^2)
    return (tg.sqrt_backward(gg, ans) if _needs_grad(g) else None,
            -tg.sqrt_backward(gg * g, ans) / ans if _needs_grad(ans) else None)


def _abs_backward_vjp(gg, out, g, x):
    # out = g sign(x): d/dg = sign(x); d/dx = 0 (sign is piecewise constant: x is a mask,
    # as in the composite, whose sign op has gradient 0)
    return (tg.abs_backward(gg, x), None)


def _square_backward_vjp(gg, out, g, x):
    # out = g (2 x): d/dg = 2 x, d/dx = 2 g
    return (tg.square_backward(gg, x) if _needs_grad(g) else None,
            gg * (2 * g) if _needs_grad(x) else None)


def _sin_backward_vjp(gg, out, g, x):
    # out = g cos(x): d/dg = cos(x), d/dx = -g sin(x)
    return (tg.sin_backward(gg, x) if _needs_grad(g) else None,
            tg.cos_backward(gg * g, x) if _needs_grad(x) else None)


def _cos_backward_vjp(gg, out, g, x):
    # out = -g sin(x): d/dg = -sin(x), d/dx = -g cos(x)
    return (tg.cos_backward(gg, x) if _needs_grad(g) else None,
            -tg.sin_backward(gg * g, x) if _needs_grad(x) else None)


# Their JVP rules (`tg_`, `tsecond`: the tangents of g and of ans or x). Each output is
# bilinear-ish in (g, second): the tangent is the op itself applied to g's tangent plus
# the partial in the second input times its tangent -- the same partials as the VJPs
# above, so forward-over-reverse Hessians see the same conventions.

def _relu_backward_jvp(t, out, g, ans):
    # ans is a mask (not differentiable, Note above): its tangent adds nothing.
    return _or_zeros(tg.relu_backward(t[0], ans) if t[0] is not None else None, out)


def _abs_backward_jvp(t, out, g, x):
    # x only enters through sign(x): its tangent adds nothing.
    return _or_zeros(tg.abs_backward(t[0], x) if t[0] is not None else None, out)


def _tanh_backward_jvp(t, out, g, ans):
    tg_, tans = t
    return _or_zeros(_tangent_sum(
        tg.tanh_backward(tg_, ans) if tg_ is not None else None,
        g * (-2 * ans) * tans if tans is not None else None), out)


def _sigmoid_backward_jvp(t, out, g, ans):
    tg_, tans = t
    return _or_zeros(_tangent_sum(
        tg.sigmoid_backward(tg_, ans) if tg_ is not None else None,
        g * (1 - 2 * ans) * tans if tans is not None else None), out)


def _sqrt_backward_jvp(t, out, g, ans):
    tg_, tans = t
    return _or_zeros(_tangent_sum(
        tg.sqrt_backward(tg_, ans) if tg_ is not None else None,
        -tg.sqrt_backward(g * tans, ans) / ans if tans is not None else None), out)


def _square_backward_jvp(t, out, g, x):
    tg_, tx = t
    return _or_zeros(_tangent_sum(
        tg.square_backward(tg_, x) if tg_ is not None else None,
        (2 * g) * tx if tx is not None else None), out)


def _sin_backward_jvp(t, out, g, x):
    # d/dx g cos(x) = -g sin(x) = cos_backward(g, x)
    tg_, tx = t
    return _or_zeros(_tangent_sum(
        tg.sin_backward(tg_, x) if tg_ is not None else None,
        tg.cos_backward(g * tx, x) if tx is not None else None), out)


def _cos_backward_jvp(t, out, g, x):
    # d/dx -g sin(x) = -g cos(x) = -sin_backward(g, x)
    tg_, tx = t
    return _or_zeros(_tangent_sum(
        tg.cos_backward(tg_, x) if tg_ is not None else None,
        -tg.sin_backward(g * tx, x) if tx is not None else None), out)


def _register_backward_ops(reg, draw):
    """The backward ops (see Note: [backward ops]); their samples are (g, ans) pairs with
    ans in the forward's range (and away from relu's kink at 0)."""
    same_shape = [(3, 4), (2, 1, 3), ()]

    def pairs(draw_ans):
        return [(draw.normal(*s), np.asarray(draw_ans(*s))) for s in same_shape] + [
            (draw.normal(3, 4), draw_ans(4))]         # a broadcast: the NumPy path

    def in_unit(*shape):
        return draw.uniform(-0.95, 0.95, *shape)

    def in_open01(*shape):
        return draw.uniform(0.05, 0.95, *shape)

    specs = [
        ("relu_backward", _relu_backward_vjp, _relu_backward_jvp, "ans", pairs(draw.nonzero),
         "where(ans > 0, g, 0): relu's gradient g from its result ans, one op (0 where "
         "ans is 0, -0.0 or nan)."),
        ("tanh_backward", _tanh_backward_vjp, _tanh_backward_jvp, "ans", pairs(in_unit),
         "g * (1 - ans * ans): tanh's gradient g from its result ans, one op."),
        ("sigmoid_backward", _sigmoid_backward_vjp, _sigmoid_backward_jvp, "ans", pairs(in_open01),
         "g * ans * (1 - ans): the sigmoid's gradient g from its result ans, one op."),
        ("sqrt_backward", _sqrt_backward_vjp, _sqrt_backward_jvp, "ans", pairs(draw.positive),
         "g / (2 * ans): the square root's gradient g from its result ans, one op."),
        ("abs_backward", _abs_backward_vjp, _abs_backward_jvp, "x", pairs(draw.nonzero),
         "g * sign(x): abs's gradient g from its input x, one op (0 at 0)."),
        ("square_backward", _square_backward_vjp, _square_backward_jvp, "x", pairs(draw.normal),
         "g * (2 * x): the square's gradient g from its input x, one op."),
        ("sin_backward", _sin_backward_vjp, _sin_backward_jvp, "x", pairs(draw.normal),
         "g * cos(x): the sine's gradient g from its input x, one op."),
        ("cos_backward", _cos_backward_vjp, _cos_backward_jvp, "x", pairs(draw.normal),
         "-g * sin(x): the cosine's gradient g from its input x, one op."),
    ]
    for name, vjp, jvp, second, samples, doc in specs:
        _BACKWARD_OPS[name] = reg(
            name, kernels={"cpu": getattr(_backward_kernels, name)}, vjp=vjp, jvp=jvp,
            batch="elementwise",
            differentiable=(0,) if name in ("relu_backward", "abs_backward") else None,
            method=False, save_ans=False, samples=samples,
            doc=f"{name}(g, {second}): {doc}")


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

_COMPARISONS = (
    ("equal", np.equal, "x == y"),
    ("not_equal", np.not_equal, "x != y"),
    ("less", np.less, "x < y"),
    ("less_equal", np.less_equal, "x <= y"),
    ("greater", np.greater, "x > y"),
    ("greater_equal", np.greater_equal, "x >= y"),
)

_LOGICAL = (
    ("logical_and", np.logical_and, 2, "x and y"),
    ("logical_or", np.logical_or, 2, "x or y"),
    ("logical_not", np.logical_not, 1, "not x"),
)


@tg.hookimpl
def tapegrad_register_ops(registry):
    """Register every op of this plugin (``add`` is the core's)."""
    draw = _Draw(seed=0)
    reg = registry.register_op
    forward = {}        # the ops whose rule ends in a backward op (_VJP_OPS)

    # -- arithmetic -----------------------------------------------------------------------
    # NOTE: _set_fast_paths: the engine passes subtract's g on to x itself when y gets no
    # gradient, and multiply saves x only for y's gradient and y only for x's (see Note:
    # [gradient fast paths] in tapegrad/_engine.pyx), and multiply's gradient of x * 2.0
    # is g * 2.0, made by the engine (grad_times_number); they describe the rules exactly.
    reg("subtract", kernels={"cpu": np.subtract}, batch="elementwise", complex=True,
        vjp=lambda g, ans, x, y: (g, -g if _needs_grad(y) else None), jvp=_subtract_jvp,
        save_inputs=(False, False), save_ans=False,
        samples=_binary_samples(draw.normal, draw.normal),
        doc="x - y, elementwise with NumPy broadcasting.")._set_fast_paths(
            passthrough=(True, False))
    reg("multiply", kernels={"cpu": np.multiply}, batch="elementwise", complex=True,
        vjp=_holomorphic(_multiply_vjp), jvp=_multiply_jvp,
        save_ans=False,
        samples=_binary_samples(draw.normal, draw.normal),
        doc="x * y, elementwise with NumPy broadcasting.")._set_fast_paths(
            save_for_other=True, grad_times_number=True)
    reg("divide", kernels={"cpu": np.divide}, batch="elementwise", complex=True,
        vjp=_holomorphic(_divide_vjp), jvp=_divide_jvp,
        save_ans=False,
        samples=_binary_samples(draw.normal, draw.nonzero),
        doc="x / y (true division), elementwise with NumPy broadcasting.")
    reg("negative", kernels={"cpu": np.negative}, batch="elementwise", complex=True,
        vjp=lambda g, ans, x: (-g,), jvp="linear",
        save_inputs=(False,), save_ans=False,
        samples=_unary_samples(draw.normal),
        doc="-x, elementwise.")
    reg("power", kernels={"cpu": np.power}, batch="elementwise", vjp=_holomorphic(_power_vjp),
        jvp=_power_jvp, complex=True,
        save_ans=False,
        samples=_binary_samples(draw.positive, draw.exponent)
        + [(draw.normal(3, 4), 3), (draw.normal(3), 2.0), (draw.normal(2, 2), 0)],
        doc="x ** y, elementwise with NumPy broadcasting. The gradient for y is "
            "x**y log(x), taken as 0 where x == 0 and y >= 0.")
    forward["square"] = reg("square", kernels={"cpu": np.square}, batch="elementwise", complex=True,
        vjp=_holomorphic(_square_vjp), jvp=_unary_jvp(_square_vjp),
        save_ans=False,
        samples=_unary_samples(draw.normal),
        doc="x * x, elementwise.")
    forward["sqrt"] = reg("sqrt", kernels={"cpu": np.sqrt}, batch="elementwise", complex=True,
        vjp=_holomorphic(_sqrt_vjp), jvp=_unary_jvp(_sqrt_vjp),
        save_inputs=(False,),
        samples=_unary_samples(draw.positive),
        doc="The non-negative square root, elementwise (nan for x < 0, as NumPy).")
    forward["abs"] = reg("abs", kernels={"cpu": np.abs}, batch="elementwise", complex=True,
        vjp=_abs_vjp, jvp=_abs_jvp,
        save_ans=False,
        samples=_unary_samples(draw.nonzero),
        doc="|x|, elementwise (for complex x the modulus, a real result, as NumPy). The "
            "gradient at x == 0 is 0. For complex z it is g * z / |z| (PyTorch's).")
    # NOTE: x is saved for the complex rule only, but saving is decided per op: a real
    # sign keeps its input alive (and version-checked) too
    reg("sign", kernels={"cpu": np.sign}, batch="elementwise", complex=True,
        vjp=_sign_vjp, jvp=_sign_jvp, save_ans=False,
        samples=_unary_samples(draw.nonzero),
        doc="-1, 0 or 1 by the sign of x, elementwise. Its gradient is 0 everywhere "
            "(as PyTorch and JAX), so sign(x) can sit in a differentiable expression. "
            "For complex z it is z / |z| (0 at 0, NumPy 2's), differentiable as "
            "PyTorch's sgn: the gradient i s Im(conj(s) g) / |z|, 0 at 0.")
    reg("clip", kernels={"cpu": _clip_kernel}, vjp=_clip_vjp, jvp=_unary_jvp(_clip_vjp),
        batch=_clip_batch, save_ans=False, complex=True,
        samples=[tg.Sample(draw.away_from((-0.5, 0.5), 3, 4), a_min=-0.5, a_max=0.5),
                 tg.Sample(draw.away_from((0.3,), 5), a_min=None, a_max=0.3),
                 tg.Sample(draw.away_from((-1.0,), 2, 3), a_min=-1.0),
                 tg.Sample(draw.away_from((-0.2, 1.0), 4), -0.2, 1.0)],
        doc="x limited to [a_min, a_max] (either may be None), as numpy.clip. The gradient "
            "passes where a_min <= x <= a_max.")

    # -- exponentials and trigonometry ------------------------------------------------
    reg("exp", kernels={"cpu": np.exp}, batch="elementwise",
        complex=True, vjp=_holomorphic(_exp_vjp), jvp=_unary_jvp(_exp_vjp),
        save_inputs=(False,),
        samples=_unary_samples(draw.normal),
        doc="e**x, elementwise.")
    reg("log", kernels={"cpu": np.log}, batch="elementwise",
        complex=True, vjp=_holomorphic(_log_vjp), jvp=_unary_jvp(_log_vjp),
        save_ans=False,
        samples=_unary_samples(draw.positive),
        doc="The natural logarithm, elementwise (-inf at 0, nan below, as NumPy).")
    forward["sin"] = reg("sin", kernels={"cpu": np.sin}, batch="elementwise",
        complex=True, vjp=_holomorphic(_sin_vjp), jvp=_unary_jvp(_sin_vjp),
        save_ans=False,
        samples=_unary_samples(draw.normal),
        doc="The sine of x (radians), elementwise.")
    forward["cos"] = reg("cos", kernels={"cpu": np.cos}, batch="elementwise",
        complex=True, vjp=_holomorphic(_cos_vjp), jvp=_unary_jvp(_cos_vjp),
        save_ans=False,
        samples=_unary_samples(draw.normal),
        doc="The cosine of x (radians), elementwise.")
    forward["tanh"] = reg("tanh", kernels={"cpu": np.tanh}, batch="elementwise",
        complex=True, vjp=_holomorphic(_tanh_vjp), jvp=_unary_jvp(_tanh_vjp),
        save_inputs=(False,),
        samples=_unary_samples(draw.normal),
        doc="The hyperbolic tangent, elementwise.")

    # -- activations ----------------------------------------------------------------------
    forward["sigmoid"] = reg("sigmoid", kernels={"cpu": _sigmoid_kernel}, batch="elementwise",
        complex=True, vjp=_holomorphic(_sigmoid_vjp), jvp=_unary_jvp(_sigmoid_vjp),
        save_inputs=(False,),
        samples=_unary_samples(draw.normal) + [(3 * draw.normal(6),)],
        doc="1 / (1 + exp(-x)), elementwise, computed without overflow for any x.")
    # (relu's kernel, np.maximum(x, 0)'s bits, is a C pass: _backward_kernels.relu)
    forward["relu"] = reg("relu", kernels={"cpu": _backward_kernels.relu}, batch="elementwise",
        vjp=_relu_vjp, jvp=_unary_jvp(_relu_vjp),
        save_inputs=(False,),
        samples=_unary_samples(draw.nonzero),
        doc="max(x, 0), elementwise. The gradient is 0 where x <= 0.")

    # -- the activations' gradients as single ops (Note: [backward ops]) --------------
    # NOTE: their own seeded draw, so the samples of the ops registered after them stay
    # the values they were checked on.
    _register_backward_ops(reg, _Draw(seed=16))
    # NOTE: each of these rules returns (B(g, second),) for a real g outside tg.compile's
    # recording: the engine then calls B's kernel itself (see Note: [gradient fast paths]
    # in tapegrad/_engine.pyx); the declaration must stay in step with the rule above.
    for name, second in _VJP_OPS:
        forward[name]._set_fast_paths(vjp_op=_BACKWARD_OPS[name + "_backward"],
                                      vjp_reads=second)

    # -- selection --------------------------------------------------------------------
    reg("maximum", kernels={"cpu": np.maximum}, batch="elementwise", complex=True,
        vjp=_maximum_vjp, jvp=_maximum_jvp,
        save_ans=False,
        samples=_binary_samples(draw.normal, draw.normal, scalar_a=0.1, scalar_b=-0.2),
        doc="The larger of x and y, elementwise (nan if either is nan). At ties each "
            "input gets half the gradient.")
    reg("minimum", kernels={"cpu": np.minimum}, batch="elementwise", complex=True,
        vjp=_minimum_vjp, jvp=_minimum_jvp,
        save_ans=False,
        samples=_binary_samples(draw.normal, draw.normal, scalar_a=0.1, scalar_b=-0.2),
        doc="The smaller of x and y, elementwise (nan if either is nan). At ties each "
            "input gets half the gradient.")
    reg("where", kernels={"cpu": np.where}, batch="elementwise", vjp=_where_vjp, jvp=_where_jvp,
        complex=True,
        differentiable=(1, 2), method=False,
        save_inputs=(True, False, False), save_ans=False,
        samples=[(draw.bools(3, 4), draw.normal(3, 4), draw.normal(3, 4)),
                 (draw.bools(3, 1), draw.normal(4), 0.0),
                 (draw.bools(2, 1, 3), draw.normal(4, 1), draw.normal(3)),
                 (draw.bools(4), -1.5, draw.normal(2, 4)),
                 (draw.small_ints(3, 4), draw.normal(3, 4), draw.normal(4))],
        doc="x where cond is true, else y (numpy.where with three arguments). "
            "Differentiable in x and y; cond is a bool tensor or array.")

    # -- comparisons and logic: not differentiable, bool results ------------------------
    for name, ufunc, expr in _COMPARISONS:
        reg(name, kernels={"cpu": ufunc}, batch="elementwise", vjp=None, nin=2,
            samples=_binary_samples(draw.small_ints, draw.small_ints, 0.0, 1.0),
            doc=f"{expr}, elementwise with NumPy broadcasting: a bool tensor that never "
                f"requires grad.")
    for name, ufunc, nin, expr in _LOGICAL:
        samples = ([(draw.bools(3, 4), draw.bools(3, 4)), (draw.bools(2, 1, 3), draw.bools(4, 1)),
                    (draw.bools(3), True), (draw.small_ints(3, 4), draw.bools(4))]
                   if nin == 2 else [(draw.bools(3, 4),), (draw.small_ints(2, 3),)])
        reg(name, kernels={"cpu": ufunc}, batch="elementwise", vjp=None, nin=nin, samples=samples,
            doc=f"{expr}, elementwise (nonzero counts as true): a bool tensor that never "
                f"requires grad.")

    # -- the rest of NumPy's elementwise functions (trig, log/exp variants, rounding, ...)
    ufuncs.register(registry, draw)
    aliases.register(registry, draw)     # acos, pow, fabs, fix, float_power, ... (aliases.py)
    # conj, imag, angle, complex, real_if_close, ... (complex_ops.py); its own draw
    complex_ops.register(registry, _Draw(seed=18))
