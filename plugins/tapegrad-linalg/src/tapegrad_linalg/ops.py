"""Matrix products with NumPy's names and semantics: ``matmul`` (and ``@``), ``dot``, ``einsum``.

Vocabulary (as everywhere in tapegrad): ``g`` is the gradient flowing into an op's output,
``ans`` the op's forward result, ``x, y, ...`` its inputs, ``t`` the tangents of the inputs
(forward mode; None where an input has none). Each op is registered below as its CPU
kernel, ONE gradient rule and one forward-mode (JVP) rule written with tapegrad ops (so
they run on any device and are themselves differentiable), and the sample inputs the
contract kit checks them with.
``dot`` and ``einsum`` are public functions: ``dot`` is composed of matmul and reshapes,
``einsum`` checks its subscripts and calls the op ``_einsum``.

>>> import tapegrad as tg
>>> w = tg.tensor([[1., 2.], [3., 4.], [5., 6.]], requires_grad=True)
>>> x = tg.tensor([1., -1.])
>>> w @ x                                  # matrix @ vector
tensor([-1., -1., -1.], grad_fn=<matmul>)
>>> (w @ x).sum().backward()
>>> w.grad
tensor([[ 1., -1.],
        [ 1., -1.],
        [ 1., -1.]])
>>> (tg.ones((2, 1, 3, 4)) @ tg.ones((5, 4, 2))).shape     # batch dimensions broadcast
(2, 5, 3, 2)
>>> tg.dot(x, x)
tensor(2.)
>>> tg.einsum("ij,j->i", w, x)
tensor([-1., -1., -1.], grad_fn=<_einsum>)
>>> tg.einsum("ii", tg.eye(3))             # implicit output: the trace
tensor(3.)
"""

from __future__ import annotations

import functools
import math
import numbers
import string

import numpy as np
import tapegrad as tg
from tapegrad._array_kernels import matmul as _cpu_matmul
from tapegrad._batching import pad_batched
from tapegrad._engine import new_tensor as _new_tensor, plain_gradient as _plain_gradient


def _shape(x):
    """The shape of an op input: a tensor, an array, a nested list or a Python number."""
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else np.shape(x)


def _rand(*shape, seed=0):
    """Float64 sample data: a fixed standard-normal draw per shape."""
    return np.random.default_rng(seed + 17 * len(shape) + sum(shape)).standard_normal(shape)


# ---------------------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------------------

def _matmul_kernel(x, y):
    # NOTE: NumPy checks the shapes; only when it refuses do we work out why, so a valid
    # product pays nothing for the clearer message.
    # NOTE: [matmul's BLAS calls] the product is NumPy's own call, in the orientation
    # written, with one layout choice: a small transposed float32 y (a linear layer's
    # g @ W.T) is multiplied as a C-ordered copy, which OpenBLAS multiplies 1.2-2.5x
    # faster (tapegrad._array_kernels.matmul, Note: [matmul through a transposed copy];
    # docs/linalg.md, "Matmul and the BLAS"). (y.T @ x.T).T would be faster for some
    # shapes too, but its result is F-ordered, which what follows a product runs slower on.
    try:
        return _cpu_matmul(x, y)
    except ValueError as exc:
        why = _matmul_mismatch(np.shape(x), np.shape(y))
        if why is None:
            raise
        raise ValueError(why) from exc


# tg.compile writes a large product into the previous replay's array when nothing else
# holds it (docs/compile.md, "Reused outputs"): _cpu_matmul(x, y, out=a) gives the bits
# _cpu_matmul(x, y) gives (the same BLAS call; a has the layout NumPy would allocate).
_matmul_kernel.out_kernel = _cpu_matmul
# And a replay calls the kernel's C function itself (no Python frame), for the same bits:
# a replay's shapes are the recording's, so the reworded shape error above cannot be
# needed there (docs/compile.md, "Plain calls").
_matmul_kernel.plain_call = _cpu_matmul


def _matmul_mismatch(xs, ys):
    """Why x @ y is undefined for shapes xs, ys (None when the shapes are fine)."""
    if not xs or not ys:
        return (f"0-d operands are not allowed (x has shape {xs}, y has shape {ys}), as in "
                f"NumPy; multiply by a scalar with * instead")
    k_x = xs[-1]
    k_y = ys[-2] if len(ys) > 1 else ys[0]
    if k_x != k_y:
        return (f"inner dimensions differ: x has shape {xs} ({k_x} along its last axis) and y "
                f"has shape {ys} ({k_y} along its {'second-to-last' if len(ys) > 1 else 'only'} "
                f"axis); x @ y needs x.shape[-1] == y.shape[-2] (y.shape[0] for a 1-d y)")
    bx, by = xs[:-2], ys[:-2]
    try:
        np.broadcast_shapes(bx, by)
    except ValueError:
        return (f"batch dimensions {bx} of x (shape {xs}) and {by} of y (shape {ys}) do not "
                f"broadcast")
    return None


def _matmul_shape(xs, ys):
    """The shape of x @ y for valid shapes xs, ys (NumPy's promotion of 1-d operands)."""
    if len(ys) == 1:
        return xs[:-1]                     # () for two vectors
    if len(xs) == 1:
        return ys[:-2] + ys[-1:]
    return np.broadcast_shapes(xs[:-2], ys[:-2]) + (xs[-2], ys[-1])


def _sum_batch(t, shape):
    """t, a gradient in the broadcast batch shape, summed down to `shape` (the operand's
    own shape): over the batch axes that broadcasting added or stretched from length 1."""
    if t.shape == shape:
        return t
    lead = t.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape[:-2]) if s == 1 and t.shape[lead + i] != 1)
    if axes:
        t = tg.sum(t, axis=axes, keepdims=True)
    return tg.reshape(t, shape) if lead else t


def _mT(t):
    """t with its last two axes swapped (the matrix transpose of every batch entry)."""
    if t.ndim == 2:
        return tg.transpose(t)       # NOTE: a third of swapaxes' cost, in the common case
    return tg.swapaxes(t, -1, -2)


def _conj(t):
    """t's complex conjugate; t itself when it is real (no op recorded: the real rules
    pay nothing for the complex ones)."""
    dt = getattr(t, "dtype", None)
    if dt is None:                    # a Python number (an einsum operand)
        return t.conjugate() if isinstance(t, complex) else t
    return tg.conj(t) if dt.kind == "c" else t


def _mH(t):
    """The conjugate transpose of every matrix in t (_mT for real t)."""
    return _mT(_conj(t))


def _matmul_vjp(g, ans, x, y):
    # Complex (docs/autograd.md's convention): gx = g @ y^H, gy = x^H @ g; for real
    # operands the conjugates are no-ops.
    wx, wy = tg.needs_grad(x), tg.needs_grad(y)
    if g.dtype.kind == "c":
        # NOTE: one dtype test (g is complex iff the product is): ~1 us on the real path
        x, y = _conj(x), _conj(y)
    if x.ndim == 2 and y.ndim == 2:
        # NOTE: the common case (a linear layer) without the promotions below, which are
        # all identities here: ~2 us of Python per call in a small MLP's backward.
        if _plain_gradient(g) and _plain_cpu_operands(g, x, y):
            # NOTE: a plain backward (nothing records, no tangents): the two products the
            # op calls below would make, the op's kernel on the same arrays and transposed
            # views (the same bits), without their four op calls (~8 us of W2's eager step).
            device, g0 = g.device, g._data
            return (_new_tensor(_cpu_matmul(g0, y._data.T), device) if wx else None,
                    _new_tensor(_cpu_matmul(x._data.T, g0), device) if wy else None)
        return (tg.matmul(g, tg.transpose(y)) if wx else None,
                tg.matmul(tg.transpose(x), g) if wy else None)
    # Note: [matmul's 1-d operands]
    # NumPy promotes a 1-d x to (1, k) and a 1-d y to (k, 1), multiplies, and removes the
    # length-1 axis it added from the result. The rule does the same: it promotes x, y and
    # g (reshape), applies the matrix rule gx = g @ y^T, gy = x^T @ g, sums the batch axes
    # an operand was broadcast along, and reshapes the gradient to the operand's shape.
    x2 = x if x.ndim > 1 else tg.reshape(x, (1,) + x.shape)
    y2 = y if y.ndim > 1 else tg.reshape(y, y.shape + (1,))
    g_shape = g.shape
    if y.ndim == 1:
        g_shape = g_shape + (1,)
    if x.ndim == 1:
        g_shape = g_shape[:-1] + (1,) + g_shape[-1:]
    g2 = g if g_shape == g.shape else tg.reshape(g, g_shape)

    gx = gy = None
    if wx:
        gx = _sum_batch(tg.matmul(g2, _mT(y2)), x2.shape)
        if x.ndim == 1:
            gx = tg.reshape(gx, x.shape)
    if wy:
        if y2.ndim == 2 and x2.ndim > 2:
            # NOTE: y is shared by every batch entry (a Linear layer on (batch, seq, in)):
            # fold the batch into the rows, one (k, B*n) @ (B*n, m) product instead of a
            # (B, k, m) stack of products summed afterwards.
            k, m = y2.shape
            rows = math.prod(x2.shape[:-1])
            gy = tg.matmul(_mT(tg.reshape(x2, (rows, k))), tg.reshape(g2, (rows, m)))
        else:
            gy = _sum_batch(tg.matmul(_mT(x2), g2), y2.shape)
        if y.ndim == 1:
            gy = tg.reshape(gy, y.shape)
    return gx, gy


def _plain_cpu_operands(g, x, y):
    """Whether g, x and y are real tensors holding NumPy arrays (the cpu device's) with no
    forward-mode tangents or vmap batches: what matmul's plain-backward shortcut reads."""
    for t in (g, x, y):
        if (not isinstance(t, tg.Tensor) or type(t._data) is not np.ndarray
                or t._data.dtype.kind == "c" or t._tangents):
            return False
    return True


def _matmul_jvp(t, ans, x, y):
    # Bilinear: one product per tangent. matmul promotes 1-d operands and broadcasts batch
    # axes itself, so each term already has ans's shape.
    tx, ty = t
    out = None if tx is None else tg.matmul(tx, y)
    if ty is not None:
        term = tg.matmul(x, ty)
        out = term if out is None else out + term
    return out


def _matmul_batch(inputs, batched):
    """vmap's rule (inputs physical, the vmapped axis B first where batched): one matmul.

    Note: [matmul under vmap]
    A batched operand's vmapped axis must become a *batch* axis of the product, never a
    row or a column, except where NumPy's own promotion already puts it right: a batched
    1-d x (B, k) against an unbatched 1-d or 2-d y is the matrix (B, k) @ y, and a
    batched 1-d y (B, k) against an unbatched x is (B, k) @ x^T. Otherwise a batched 1-d
    operand is promoted to a row (x: (B, 1, k)) or a column (y: (B, k, 1)) -- NumPy
    would read (B, k) as a matrix -- the batched operands get unit axes after B so the
    logical batch axes line up from the right (pad_batched), and the result is reshaped
    to (B,) + the logical result's shape (which drops the promoted axes).
    """
    x, y = inputs
    bx, by = batched
    size = (x if bx else y).shape[0]
    xs = tuple(x.shape[1:]) if bx else _shape(x)
    ys = tuple(y.shape[1:]) if by else _shape(y)
    why = _matmul_mismatch(xs, ys)
    if why is not None:
        raise ValueError(f"matmul: {why}")
    lx, ly = len(xs), len(ys)
    if bx and not by and ly <= 2:
        if lx == 1:
            return tg.matmul(x, y)
        # NOTE: (B, ..., n, k) @ (k, m) as ONE 2-D GEMM over all rows (np.matmul runs a
        # stack against a matrix as one small GEMM per matrix); see _rows_matmul in nn.
        rows = size * math.prod(xs[:-1])
        out = tg.matmul(tg.reshape(x, (rows, xs[-1])), y)
        return tg.reshape(out, (size,) + xs[:-1] + ys[1:])
    if by and not bx and ly == 1 and lx <= 2:
        return tg.matmul(y, x if lx == 1 else _mT(x))
    # the general case: promote batched vectors, line up the batch axes, one product
    out_shape = _matmul_shape(xs, ys)
    if bx and lx == 1:
        x, lx = tg.reshape(x, (size, 1) + xs), 2
    if by and ly == 1:
        y, ly = tg.reshape(y, (size,) + ys + (1,)), 2
    nd = max(lx, ly)
    if bx:
        x = pad_batched(x, nd)
    if by:
        y = pad_batched(y, nd)
    if x.shape[-1] == 1 and x.ndim >= 2 and y.ndim >= 2:
        # NOTE: a stack of outer products (per-example weight gradients, x^T g with 1-d
        # x and g): NumPy's stacked matmul runs one tiny GEMM per matrix, ~5x slower than
        # the broadcast product, which is the same single multiplication per element
        out = tg.multiply(x, y)
    else:
        out = tg.matmul(x, y)
    want = (size,) + out_shape
    return out if tuple(out.shape) == want else tg.reshape(out, want)


_MATMUL_SAMPLES = [
    (_rand(3), _rand(3, seed=1)),                        # vector . vector -> 0-d
    (_rand(2, 3), _rand(3)),                             # matrix @ vector
    (_rand(3), _rand(3, 4)),                             # vector @ matrix
    (_rand(2, 3), _rand(3, 4)),                          # matrix @ matrix
    (_rand(2, 2, 3), _rand(2, 3, 4)),                    # batch @ batch
    (_rand(2, 1, 3, 4), _rand(5, 4, 2)),                 # batch dimensions broadcast
    (_rand(1, 3, 4), _rand(2, 4, 2)),                    # a length-1 batch axis stretches
    (_rand(2, 3, 4), _rand(4, 2)),                       # batch @ matrix (Linear on 3-d)
    (_rand(3, 4), _rand(2, 4, 5)),                       # matrix @ batch
    (_rand(4), _rand(2, 4, 3)),                          # vector @ batch
    (_rand(2, 3, 4), _rand(4)),                          # batch @ vector
    (_rand(1, 1), _rand(1, 1, seed=1)),                  # 1 x 1
]


# ---------------------------------------------------------------------------------------
# dot (composed of matmul and reshapes)
# ---------------------------------------------------------------------------------------

def _as_operand(x):
    return x if isinstance(x, (tg.Tensor, numbers.Number)) else tg.asarray(x)


def dot(x, y):
    """The dot product of x and y with ``numpy.dot``'s rules, for any dimensions.

    Both 1-d: the inner product (a 0-d tensor); both 2-d: the matrix product; either 0-d:
    ``x * y``; x N-d and y 1-d: a sum product over the last axes; x N-d and y M-d (M >= 2):
    a sum product over the last axis of x and the second-to-last of y, so the result has
    shape ``x.shape[:-1] + y.shape[:-2] + y.shape[-1:]`` (no batch broadcasting: that is
    ``matmul``).

    >>> import tapegrad as tg
    >>> a = tg.tensor([1., 2., 3.], requires_grad=True)
    >>> tg.dot(a, a)
    tensor(14., grad_fn=<matmul>)
    >>> tg.dot(tg.ones((2, 3)), tg.ones((3, 2))).tolist()
    [[3.0, 3.0], [3.0, 3.0]]
    >>> tg.dot(tg.ones((2, 3)), tg.ones((4, 3, 5))).shape
    (2, 4, 5)
    >>> a.dot(2.0)
    tensor([2., 4., 6.], grad_fn=<multiply>)
    """
    x, y = _as_operand(x), _as_operand(y)
    xs, ys = _shape(x), _shape(y)
    if not xs or not ys:
        return tg.multiply(x, y)
    k_y = ys[-2] if len(ys) > 1 else ys[0]
    if xs[-1] != k_y:
        raise ValueError(
            f"dot: shapes {xs} and {ys} are not aligned: x has {xs[-1]} along its last axis, "
            f"y has {k_y} along its {'second-to-last' if len(ys) > 1 else 'only'} axis; they "
            f"must be equal")
    if len(ys) <= 2:
        # NOTE: for these shapes numpy.dot and numpy.matmul agree (y has no batch axes).
        return tg.matmul(x, y)
    # x (..., k) with y (..., k, m): one (P, k) @ (k, Q) product, y's contracted axis first.
    k = xs[-1]
    x2 = tg.reshape(x, (math.prod(xs[:-1]), k))
    y2 = tg.reshape(tg.moveaxis(y, -2, 0), (k, math.prod(ys[:-2]) * ys[-1]))
    return tg.reshape(tg.matmul(x2, y2), xs[:-1] + ys[:-2] + ys[-1:])


_DOT_SAMPLES = [
    (_rand(3), _rand(3, seed=1)),
    (_rand(2, 3), _rand(3, 4)),
    (_rand(2, 3), _rand(3)),
    (_rand(3), _rand(3, 2)),
    (_rand(2, 3, 4), _rand(4)),
    (_rand(4), _rand(2, 4, 3)),
    (_rand(2, 3, 4), _rand(4, 2)),
    (_rand(2, 3), _rand(4, 3, 2)),              # N-d . M-d: shape (2, 4, 2)
    (_rand(2, 2, 3), _rand(2, 3, 3, 2)),        # shape (2, 2, 2, 3, 2)
    (_rand(3), 1.5),
    (np.array(-0.5), _rand(2, 3)),
]


# ---------------------------------------------------------------------------------------
# einsum
# ---------------------------------------------------------------------------------------

_LETTERS = string.ascii_letters


class _Spec:
    """A parsed einsum: one subscript term per operand, the output term, and the length
    of every label (the broadcast length where operands differ by a length-1 axis)."""

    __slots__ = ("inputs", "output", "sizes", "explicit", "optimize")

    def __init__(self, inputs, output, sizes):
        self.inputs = inputs
        self.output = output
        self.sizes = sizes
        self.explicit = ",".join(inputs) + "->" + output
        # NOTE: NumPy's optimize=True contracts pairwise through BLAS (tensordot) instead of
        # one nested sum-of-products loop over every label: 5x faster for a 256x256 matrix
        # product, but its path search costs ~10 us, 6x an 8x8 product. So it is used only
        # when the plain loop (the product of all label lengths) is big.
        self.optimize = len(inputs) > 1 and math.prod(sizes.values()) > 4096


@functools.lru_cache(maxsize=1024)
def _parse(subscripts, shapes):
    """The _Spec of `subscripts` for operands of `shapes`, or ValueError saying what is
    wrong (without the op name: the caller adds it with the shapes)."""
    if not isinstance(subscripts, str):
        raise TypeError(f"subscripts must be a string such as 'ij,jk->ik', got "
                        f"{type(subscripts).__name__} {subscripts!r}")
    s = subscripts.replace(" ", "")
    if s.count("->") > 1 or s.count("-") != s.count(">") or s.count("-") != s.count("->"):
        raise ValueError("the subscripts may contain '->' once, to separate the output")
    lhs, arrow, out = s.partition("->")
    if "." in s:
        lhs, out = _expand_ellipsis(lhs, out if arrow else None, shapes)
        arrow = "->"
    for c in lhs + out:
        if c != "," and c not in _LETTERS:
            raise ValueError(f"invalid subscript {c!r}: subscripts must be letters a-z, A-Z")
    if "," in out:
        raise ValueError("the output (after '->') is one term, without commas")
    terms = tuple(lhs.split(","))
    if len(terms) != len(shapes):
        raise ValueError(f"the subscripts name {len(terms)} operand(s) but "
                         f"{len(shapes)} were given")
    sizes, where = {}, {}
    for n, (term, shape) in enumerate(zip(terms, shapes)):
        if len(term) != len(shape):
            raise ValueError(f"operand {n} has {len(shape)} dimension(s) (shape {shape}) but "
                             f"its subscripts {term!r} name {len(term)}")
        own = {}
        for label, d in zip(term, shape):
            if own.setdefault(label, d) != d:
                raise ValueError(f"operand {n} (shape {shape}) repeats label {label!r} on axes "
                                 f"of lengths {own[label]} and {d}; a repeated label takes the "
                                 f"diagonal, so they must be equal")
        for label, d in own.items():
            seen = sizes.get(label)
            if seen is None or seen == 1:
                sizes[label], where[label] = d, n
            elif d != 1 and d != seen:
                # NOTE: letters that stand in for '...' are not the user's: name the ellipsis.
                what = f"label {label!r}" if label in s else "an axis under '...'"
                raise ValueError(f"{what} has length {seen} in operand {where[label]} "
                                 f"(shape {shapes[where[label]]}) and {d} in operand {n} "
                                 f"(shape {shape}); lengths must match or be 1")
    if arrow:
        if len(set(out)) != len(out):
            raise ValueError(f"the output {out!r} names a label more than once")
        for label in out:
            if label not in sizes:
                raise ValueError(f"the output label {label!r} is in no operand's subscripts")
    else:
        # NumPy's implicit output: the labels used exactly once, in alphabetical (ASCII,
        # so upper case first) order.
        counts = {}
        for label in lhs.replace(",", ""):
            counts[label] = counts.get(label, 0) + 1
        out = "".join(sorted(label for label, c in counts.items() if c == 1))
    return _Spec(terms, out, sizes)


def _expand_ellipsis(lhs, out, shapes):
    """(lhs, out) with every '...' replaced by letters of their own, right-aligned as
    NumPy broadcasts them: an operand whose ellipsis covers e axes gets the last e of the
    E letters (E the most any operand's covers). out None: NumPy's implicit output, the
    ellipsis axes first, then the labels used once in alphabetical order."""
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"the subscripts name {len(terms)} operand(s) but {len(shapes)} were "
                         f"given")
    for term in terms + ([out] if out is not None else []):
        if term.count(".") not in (0, 3) or (term.count(".") == 3 and "..." not in term):
            raise ValueError(f"invalid subscripts term {term!r}: an ellipsis is exactly '...', "
                             f"at most once per term")
    covered = []
    for n, (term, shape) in enumerate(zip(terms, shapes)):
        e = len(shape) - (len(term) - 3) if "..." in term else 0
        if e < 0:
            raise ValueError(f"operand {n} has {len(shape)} dimension(s) (shape {shape}) but its "
                             f"subscripts {term!r} name {len(term) - 3} besides the ellipsis")
        covered.append(e)
    width = max(covered, default=0)
    free = [c for c in _LETTERS if c not in lhs and (out is None or c not in out)]
    if width > len(free):
        raise ValueError(f"the ellipsis covers {width} axes but only {len(free)} subscript "
                         f"letters are left")
    ell = "".join(free[:width])
    new_terms = [t.replace("...", ell[width - e:]) for t, e in zip(terms, covered)]
    if out is None:
        counts = {}
        for label in lhs.replace(",", "").replace(".", ""):
            counts[label] = counts.get(label, 0) + 1
        out = ell + "".join(sorted(label for label, c in counts.items() if c == 1))
    elif "..." in out:
        out = out.replace("...", ell)
    elif width:
        raise ValueError(f"the output {out!r} has no '...' but the operands' ellipses cover "
                         f"{width} axes (NumPy broadcasts them to the output, so it must name "
                         f"them with '...')")
    return ",".join(new_terms), out


_SUBLIST_LETTERS = string.ascii_uppercase + string.ascii_lowercase   # NumPy's: 0 -> 'A'


def _sublist_term(sub, where):
    if isinstance(sub, str) or not hasattr(sub, "__iter__"):
        raise TypeError(f"einsum: {where} must be a list of ints in [0, 52) and Ellipsis, got "
                        f"{type(sub).__name__} {sub!r}")
    term = []
    for label in sub:
        if label is Ellipsis:
            term.append("...")
        elif isinstance(label, numbers.Integral) and not isinstance(label, bool) \
                and 0 <= label < 52:
            term.append(_SUBLIST_LETTERS[label])
        else:
            raise ValueError(f"einsum: {where} holds {label!r}; subscripts in a sublist are "
                             f"ints in [0, 52) or Ellipsis")
    return "".join(term)


def _from_sublists(args):
    """NumPy's sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` as (subscripts,
    operands) in the string form."""
    out = None
    if len(args) % 2:
        *args, out = args
    operands, subs = args[0::2], args[1::2]
    subscripts = ",".join(_sublist_term(s, f"the sublist of operand {n}")
                          for n, s in enumerate(subs))
    if out is not None:
        subscripts += "->" + _sublist_term(out, "the output sublist")
    return subscripts, tuple(operands)


def _spec(subscripts, operands, op):
    if not isinstance(subscripts, str):
        raise TypeError(f"{op}: subscripts must be a string such as 'ij,jk->ik', got "
                        f"{type(subscripts).__name__} {subscripts!r}")
    shapes = tuple(_shape(x) for x in operands)
    try:
        return _parse(subscripts, shapes)
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"{op}: {exc} (subscripts {subscripts!r}, operand shapes "
                        f"{', '.join(str(s) for s in shapes) or 'none'})") from None


def einsum(subscripts, *operands, optimize=False):
    """Einstein summation over `operands`, as ``numpy.einsum(subscripts, *operands)``.

    Each comma-separated term of `subscripts` labels the axes of one operand; labels after
    ``->`` are the output's axes, every other label is summed over. Without ``->`` the
    output is the labels used once, in alphabetical order. A label repeated within one
    operand takes its diagonal (``"ii->i"``, the trace ``"ii"``). Lengths that differ by a
    length-1 axis broadcast. Every operand gets a gradient (itself an einsum, so einsum is
    differentiable to any order). An ellipsis (``...``) stands for the axes not named,
    broadcast as NumPy does (right-aligned); NumPy's sublist form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` (ints in [0, 52) and ``Ellipsis``) works too.
    ``optimize`` is accepted for NumPy's signature and ignored (the order of a large
    contraction is NumPy's optimized path anyway).

    >>> import tapegrad as tg
    >>> a = tg.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    >>> tg.einsum("ij,jk->ik", a, a).tolist()
    [[7.0, 10.0], [15.0, 22.0]]
    >>> tg.einsum("ij->ji", a).tolist()
    [[1.0, 3.0], [2.0, 4.0]]
    >>> t = tg.einsum("ii", a)        # trace
    >>> t.backward(); a.grad
    tensor([[1., 0.],
            [0., 1.]])
    >>> tg.einsum("i,j", tg.ones(2), tg.ones(3)).shape     # outer product
    (2, 3)
    >>> tg.einsum("...ij,...jk", tg.ones((5, 1, 2, 3)), tg.ones((4, 3, 2))).shape
    (5, 4, 2, 2)
    >>> tg.einsum(a, [0, 1], a, [1, 2], [0, 2]).tolist()   # the sublist form of "ij,jk->ik"
    [[7.0, 10.0], [15.0, 22.0]]
    """
    if not isinstance(subscripts, str) and operands and not isinstance(subscripts, numbers.Number):
        subscripts, operands = _from_sublists((subscripts,) + operands)
    if not operands:
        raise ValueError("einsum: needs at least one operand after the subscripts")
    spec = _spec(subscripts, operands, "einsum")
    return tg._einsum(*operands, subscripts=spec.explicit)


def _einsum_kernel(*xs, subscripts):
    # (a bad string raises ValueError here; the engine adds the op name and the shapes)
    spec = _parse(subscripts, tuple(np.shape(x) for x in xs))
    return np.einsum(spec.explicit, *xs, optimize=spec.optimize)


def _einsum_vjp(g, ans, *xs, subscripts):
    spec = _parse(subscripts, tuple(_shape(x) for x in xs))
    return tuple(_einsum_grad(g, xs, k, spec) if tg.needs_grad(x) else None
                 for k, x in enumerate(xs))


def _einsum_jvp(t, ans, *xs, subscripts):
    # Multilinear: the sum over operands with a tangent of the same einsum with that
    # operand replaced by its tangent. Each term has ans's shape (a length-1 axis of an
    # operand broadcasts in the term exactly as in the forward).
    out = None
    for k, tk in enumerate(t):
        if tk is None:
            continue
        term = tg._einsum(*(tk if j == k else x for j, x in enumerate(xs)),
                          subscripts=subscripts)
        out = term if out is None else out + term
    return out


def _einsum_batch(inputs, batched, *, subscripts):
    """vmap's rule: the vmapped axis is one more label (a letter no term uses) at the
    front of each batched operand's term and of the output: one einsum."""
    from tapegrad import _batching
    # (the logical operands' shapes, as value-less arrays, for the checks)
    logical = [np.broadcast_to(np.zeros(()), x.shape[1:]) if b else x
               for x, b in zip(inputs, batched)]
    spec = _spec(subscripts, logical, "_einsum")       # (the explicit form, checked)
    used = set(spec.explicit)
    label = next((c for c in _LETTERS if c not in used), None)
    if label is None:          # all 52 letters taken: one call per example
        return _batching._loop(tg._einsum, inputs, batched, {"subscripts": subscripts}, None)
    terms = [label + term if b else term for term, b in zip(spec.inputs, batched)]
    return tg._einsum(*inputs, subscripts=",".join(terms) + "->" + label + spec.output)


def _einsum_grad(g, xs, k, spec):
    """The gradient of operand k: the einsum of g with the other operands, whose output
    is operand k's term.

    Note: [einsum gradients]
    Two kinds of labels of operand k cannot simply be the output of that einsum:
    - a label repeated within operand k (``ii``): an output names each label once. Its
      second occurrence is renamed (``ia``) and an identity operand ``eye`` labelled
      ``ia`` is added, which puts the gradient on the diagonal and zeros elsewhere;
    - a label only operand k has (summed away inside it, ``ij->i`` for j): no other operand
      gives it a length. A ones operand labelled ``j`` broadcasts the gradient along it.
      The same holds when the others have the label only at length 1 (broadcast against
      operand k's longer axis).
    Both extras are constants on g's device and dtype, so the gradient stays one einsum
    (differentiable again). An axis of operand k of length 1 that broadcast against a
    longer one comes back at the longer length and the engine sums it down.
    """
    used = set(spec.explicit)
    fresh = (c for c in _LETTERS if c not in used)
    parts, operands = [spec.output], [g]
    length = {label: spec.sizes[label] for label in spec.output}   # what the parts give
    for j, (term, x) in enumerate(zip(spec.inputs, xs)):
        if j != k:
            parts.append(term)
            operands.append(_conj(x))     # complex: the adjoint conjugates the others
            for label, d in zip(term, _shape(x)):
                if length.get(label, 1) == 1:
                    length[label] = d
    target, seen = [], []
    for label in spec.inputs[k]:
        if label not in seen:
            seen.append(label)
            target.append(label)
            continue
        new = next(fresh, None)
        if new is None:
            raise ValueError(f"einsum: the gradient of {spec.explicit!r} needs more than the "
                             f"52 subscript letters")
        n = spec.sizes[label]
        parts.append(label + new)
        operands.append(tg.eye(n, dtype=g.dtype, device=g.device))
        length[label] = n
        target.append(new)
    own = dict(zip(spec.inputs[k], _shape(xs[k])))
    for label in seen:
        if label not in length or (own[label] != 1 and length[label] != own[label]):
            parts.append(label)
            operands.append(tg.ones((own[label],), dtype=g.dtype, device=g.device))
    return tg._einsum(*operands, subscripts=",".join(parts) + "->" + "".join(target))


_EINSUM_CASES = [
    ("ij,jk->ik", (2, 3), (3, 4)),
    ("ii->", (3, 3)),
    ("ii->i", (3, 3)),
    ("ij->ji", (2, 3)),
    ("bij,bjk->bik", (2, 2, 3), (2, 3, 2)),
    ("i,i->", (3,), (3,)),
    ("i,j->ij", (2,), (3,)),
    ("ijk,jl->ikl", (2, 3, 2), (3, 4)),
    ("ij,jk,kl->il", (2, 3), (3, 2), (2, 4)),
    ("ij,jk", (2, 3), (3, 4)),                   # implicit output: "ik"
    ("ij->", (2, 3)),                            # everything summed
    ("ij->i", (2, 3)),                           # j only in the operand: a broadcast
    ("iij->ij", (3, 3, 2)),                      # a diagonal keeping another axis
    ("ii,i->i", (3, 3), (3,)),
    ("iji->j", (2, 3, 2)),
    ("ij,ij->ij", (2, 3), (2, 3)),               # elementwise
    ("ij,j->ij", (2, 3), (1,)),                  # a length-1 axis broadcasts
    ("ij,jk->ik", (2, 1), (3, 4)),               # ... also a summed one
    ("ii,i->i", (1, 1), (3,)),                   # ... also a diagonal
    ("ba", (2, 3)),                              # implicit output "ab": a transpose
    ("i,->i", (3,), ()),                         # a 0-d operand
    ("...ij,...jk->...ik", (2, 2, 3), (2, 3, 2)),  # an ellipsis: batched matmul
    ("...ij,...jk", (2, 1, 2, 3), (3, 3, 2)),    # ... broadcast, right-aligned, implicit output
    ("i...->...", (3, 2, 2)),                    # ... summing the named axis
    ("...ii->...i", (2, 3, 3)),                  # ... a batched diagonal
    ("...,...", (2, 3), (3,)),                   # ... only ellipses
    ("ij...,j->i...", (2, 3), (3,)),             # ... covering no axes
]


def _einsum_samples(with_subscripts_first):
    out = []
    for n, (subscripts, *shapes) in enumerate(_EINSUM_CASES):
        arrays = [_rand(*s, seed=n + i) if s else np.array(0.7) for i, s in enumerate(shapes)]
        if with_subscripts_first:
            out.append(tg.Sample(subscripts, *arrays))
        else:
            out.append(tg.Sample(*arrays, subscripts=subscripts))
    return out


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

@tg.hookimpl
def tapegrad_register_ops(registry):
    registry.register_op(
        "matmul", complex=True, kernels={"cpu": _matmul_kernel}, vjp=_matmul_vjp, jvp=_matmul_jvp,
        batch=_matmul_batch,
        save_inputs=(True, True), save_ans=False, samples=_MATMUL_SAMPLES,
        doc="The matrix product x @ y, as np.matmul: vector . vector (a 0-d result), "
            "matrix @ vector, vector @ matrix, matrix @ matrix, and stacks of matrices "
            "whose batch dimensions broadcast ((2, 1, 3, 4) @ (5, 4, 2) -> (2, 5, 3, 2)). "
            "0-d operands are refused, as in NumPy.")._set_fast_paths(
        # NOTE: the engine computes the plain 2-D branch of _matmul_vjp itself (the same
        # two calls of the kernel's _cpu_matmul on the same arrays; Note: [gradient fast
        # paths] in tapegrad/_engine.pyx): keep the two in step when either changes.
        matmul_2d=True)
    registry.register_function("dot", dot, samples=_DOT_SAMPLES)
    # NOTE: einsum's rule reads every operand but the one it differentiates, so all are
    # saved (a one-operand einsum keeps its operand alive without needing it).
    registry.register_op(
        "_einsum", complex=True,
        kernels={"cpu": _einsum_kernel}, vjp=_einsum_vjp, jvp=_einsum_jvp, view=True,
        batch=_einsum_batch,
        save_ans=False, method=False, samples=_einsum_samples(False),
        doc="The op behind tg.einsum: einsum(subscripts, *xs) is "
            "_einsum(*xs, subscripts=subscripts), the operands as its tensor inputs. A "
            "one-operand einsum may return a view of it (np.einsum does), hence view=True.")
    registry.register_function("einsum", einsum, method=False, samples=_einsum_samples(True) + [
        tg.Sample(_rand(2, 3), [0, 1], _rand(3, 4, seed=1), [1, 2], [0, 2]),     # sublists
        tg.Sample(_rand(2, 2, 3), [Ellipsis, 0, 1], _rand(3, seed=2), [1], [Ellipsis, 0]),
        tg.Sample(_rand(3, 3), [0, 0])])                                       # implicit: trace
    # tg.linalg's ops and functions (named linalg_<name> in the flat table).
    from . import decompositions, norms, products
    decompositions.register(registry)
    norms.register(registry)
    products.register(registry)
    from . import polynomial
    polynomial.register(registry)
    from . import vector_products
    vector_products.register(registry)     # vdot, vecdot, matvec, vecmat (top level)


@tg.hookimpl
def tapegrad_api():
    from . import linalg
    return {"linalg": linalg}
