"""NumPy's other spellings of tapegrad's elementwise ops: the array-API names (``acos``,
``atan2``, ``pow``, ...) and the legacy or special-purpose variants (``fabs``, ``fix``,
``float_power``, ``positive``).

Where NumPy's name is the same function as another (``np.acos is np.arccos``), tapegrad's
is the same op too (``tg.acos is tg.arccos``). Where NumPy's is a different function with
different dtypes or arguments, it is a thin composition of tapegrad ops with NumPy's
dtype rules: ``fabs`` and ``float_power`` return floats for integer inputs (and
``float_power`` computes in float64), ``fix`` is ``trunc`` with NumPy's ``out=`` refused.
``positive`` is ``x * 1`` (NumPy's copy of x; bool is refused, as NumPy does).

>>> import tapegrad as tg
>>> tg.acos is tg.arccos, tg.pow is tg.power
(True, True)
>>> tg.float_power(tg.tensor([2.0, 3.0], dtype="float32"), 2).dtype
dtype('float64')
>>> tg.fabs(tg.tensor([-2, 3])).tolist()
[2.0, 3.0]
"""

import numpy as np
import tapegrad as tg

from ._samples import binary_samples, unary_samples

# np.<alias> is np.<target>: tg.<alias> is tg.<target>.
SAME_OPS = (("acos", "arccos"), ("acosh", "arccosh"), ("asin", "arcsin"),
            ("asinh", "arcsinh"), ("atan", "arctan"), ("atan2", "arctan2"),
            ("atanh", "arctanh"), ("pow", "power"))


def _as_tensor(x):
    return x if isinstance(x, tg.Tensor) else tg.asarray(x)


def _no_out(out, op):
    # NOTE: NumPy's out= writes into an existing array; a tensor's value is never replaced
    # behind its graph's back, so that form is refused rather than silently ignored.
    if out is not None:
        raise TypeError(f"{op}: out= is not supported (tensors are not written in place); "
                        f"use y = tg.{op}(x)")


def fabs(x, out=None):
    """|x| as ``np.fabs``: floats only, so integer and bool inputs give NumPy's float
    result dtype (float64 for int32/int64, float16 for int8 and bool). The gradient is
    ``sign(x)`` (0 at x == 0, as ``tg.abs``).

    >>> import tapegrad as tg
    >>> tg.fabs(tg.tensor([-1.5, 0.0, 2.0])).tolist()
    [1.5, 0.0, 2.0]
    """
    _no_out(out, "fabs")
    x = _as_tensor(x)
    try:
        dtype = np.fabs.resolve_dtypes((x.dtype, None))[-1]
    except TypeError:
        raise TypeError(f"fabs: not supported for {x.dtype} input (NumPy's fabs takes real "
                        f"numbers)") from None
    return tg.abs(x if x.dtype == dtype else x.astype(dtype))


def fix(x, out=None):
    """x rounded towards zero, as ``np.fix`` (the same values and dtypes as ``tg.trunc``;
    integer inputs keep theirs). Piecewise constant: the gradient is 0 everywhere, the
    jumps included (PyTorch's rule for trunc).

    >>> import tapegrad as tg
    >>> tg.fix(tg.tensor([-2.5, 1.7])).tolist()
    [-2.0, 1.0]
    """
    _no_out(out, "fix")
    return tg.trunc(x)


def _float_power_dtype(x1, x2, dtype):
    kinds = [np.asarray(v).dtype if not isinstance(v, tg.Tensor) else v.dtype for v in (x1, x2)]
    if any(k.kind == "c" for k in kinds):
        raise TypeError("float_power: complex inputs are not supported (tapegrad is real-only)")
    # NumPy's float_power has loops for float64 and longdouble only: everything smaller
    # computes (and returns) float64.
    natural = np.result_type(np.float64, *kinds)
    if dtype is None:
        return natural
    dtype = np.dtype(dtype)
    if dtype.kind != "f" or dtype.itemsize < 8:
        raise TypeError(f"float_power: no loop for dtype={dtype} (NumPy computes float_power "
                        f"in float64 or longdouble only)")
    return dtype


def float_power(x1, x2, out=None, *, dtype=None):
    """x1 ** x2 computed in float64 (longdouble for longdouble input), as
    ``np.float_power``: float32 and integer inputs give float64 results (``dtype=`` may
    name float64 or longdouble). The gradients are ``tg.power``'s (for x2: ``x1**x2
    log(x1)``, 0 where x1 == 0 and x2 >= 0); a negative base with a non-integer exponent
    gives nan, as NumPy.

    >>> import tapegrad as tg
    >>> tg.float_power(tg.tensor([2, 3]), -1).tolist()
    [0.5, 0.3333333333333333]
    """
    _no_out(out, "float_power")
    dt = _float_power_dtype(x1, x2, dtype)

    def cast(v):
        if isinstance(v, tg.Tensor):
            return v if v.dtype == dt else v.astype(dt)
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
            return dt.type(v)
        return tg.asarray(np.asarray(v, dtype=dt))

    return tg.power(cast(x1), cast(x2))


def positive(x, out=None):
    """+x, a new tensor equal to x, as ``np.positive`` (bool input is refused, as NumPy
    does). Its gradient is g.

    >>> import tapegrad as tg
    >>> tg.positive(tg.tensor([-1.5, 2.0])).tolist()
    [-1.5, 2.0]
    """
    _no_out(out, "positive")
    x = _as_tensor(x)
    if x.dtype == np.bool_:
        raise TypeError("positive: not supported for bool input (as numpy.positive: "
                        "ufunc 'positive' has no loop for bool); use x.astype(int)")
    # NOTE: x * 1, not an op of its own: one multiply is exact (-0.0, nan and inf stay as
    # they are; a Python 1 keeps every dtype) and runs on every device that multiplies.
    return x * 1


def register(registry, draw):
    """Register this module's functions; called by ``ops.tapegrad_register_ops``."""
    fn = registry.register_function

    def inside(lo, hi):
        return lambda *shape: draw.uniform(lo, hi, *shape)

    domains = {"acos": inside(-0.8, 0.8), "acosh": inside(1.2, 3.0), "asin": inside(-0.8, 0.8),
               "asinh": draw.normal, "atan": draw.normal, "atanh": inside(-0.8, 0.8)}
    for alias, target in SAME_OPS:
        if alias == "atan2":
            samples = binary_samples(draw.nonzero, draw.nonzero)
        elif alias == "pow":
            samples = binary_samples(draw.positive, draw.exponent)
        else:
            samples = unary_samples(domains[alias])
        fn(alias, registry.ops[target], method=False, samples=samples)

    fn("positive", positive, method=False, samples=unary_samples(draw.normal))
    fn("fabs", fabs, method=False, samples=unary_samples(draw.nonzero))
    fn("fix", fix, method=False, samples=unary_samples(draw.off_grid))
    # NOTE: float_power returns float64 for float32 input (NumPy's dtype); the kit's
    # float32 check expects float32 back unless a sample passes dtype=, so the samples
    # name dtype=np.float64 (the computation the default does too). The tests check the
    # default's dtypes against NumPy.
    fn("float_power", float_power, method=False, samples=[
        tg.Sample(*s, dtype=np.float64)
        for s in binary_samples(draw.positive, draw.exponent)
        + [(draw.normal(3, 4), 3), (draw.normal(2, 2), 0)]])
