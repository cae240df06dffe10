"""PyTorch's ``dim=``/``keepdim=``: which ops and functions take them, and how.

Note: [dim= and keepdim=]
PyTorch spells NumPy's axis=/keepdims= as dim=/keepdim=. NumPy rejects those names, so
accepting them changes the meaning of no NumPy-valid call: an op or registered function
that takes axis= (or keepdims=) and has no dim= (keepdim=) of its own takes them too,
renamed on the way in. Each Op decides once, at construction (dim_keywords), and only a
call that has keywords looks at it: the keyword-less path pays nothing.
TRAP: where PyTorch gives the same call another meaning, renaming would hand a line
written for PyTorch NumPy's answer, silently. Those names refuse dim=/keepdim= with a
TypeError that says what differs and how tapegrad spells each meaning (_TORCH_DIFFERS:
checked against torch 2.x, one by one). An empty dim= is refused everywhere: PyTorch
reduces over every axis with dim=() (sum, mean, amax, std, ...), NumPy over none.

>>> import tapegrad as tg
>>> tg.sum.dim_keywords.renames
{'dim': 'axis', 'keepdim': 'keepdims'}
>>> tg.sum(tg.ones((2, 3)), dim=1, keepdim=True).shape
(2, 1)
"""

import functools
import inspect

_VALUES_AND_INDICES = (
    "with dim=, PyTorch's {0} returns a pair (values, indices); tapegrad's {0} is NumPy's "
    "and returns the values only. Write tg.{0}(x, axis) (x.{0}(axis), keepdims=True to keep "
    "the axis) for the values{1}")

_TORCH_DIFFERS = {
    # name: (what differs and what to write, a keyword that says which meaning is meant)
    "max": (_VALUES_AND_INDICES.format("max", ", tg.argmax(x, axis) for the indices"), None),
    "min": (_VALUES_AND_INDICES.format("min", ", tg.argmin(x, axis) for the indices"), None),
    "sort": (_VALUES_AND_INDICES.format("sort", ", tg.argsort(x, axis) for the indices "
                                        "(descending: tg.flip(tg.sort(x, axis), axis))"), None),
    "median": (_VALUES_AND_INDICES.format(
        "median", ". For an even count PyTorch's value is also another one: the lower of "
        "the two middle elements (NumPy's: their mean), which is "
        "tg.quantile(x, 0.5, axis, method='lower')"), None),
    "nanmedian": (_VALUES_AND_INDICES.format(
        "nanmedian", ". For an even count PyTorch's value is also another one: the lower "
        "of the two middle elements (NumPy's: their mean), which is "
        "tg.nanquantile(x, 0.5, axis, method='lower')"), None),
    # none of these is a tapegrad name today; should one come, it must not rename dim=
    **{name: (f"with dim=, PyTorch's {name} returns a pair (values, indices); tapegrad's "
              f"{name} is not PyTorch's: pass axis= for its own meaning", None)
       for name in ("mode", "kthvalue", "cummax", "cummin", "topk", "aminmax")},
    "std": ("PyTorch's std(x, dim) is unbiased (divides by N - 1), tapegrad's is NumPy's, "
            "biased (divides by N) unless ddof=1. Write tg.std(x, axis, ddof=1) for "
            "PyTorch's meaning, or pass ddof= with dim= to say which one is meant", "ddof"),
    "var": ("PyTorch's var(x, dim) is unbiased (divides by N - 1), tapegrad's is NumPy's, "
            "biased (divides by N) unless ddof=1. Write tg.var(x, axis, ddof=1) for "
            "PyTorch's meaning, or pass ddof= with dim= to say which one is meant", "ddof"),
    "nanstd": ("PyTorch's std is unbiased (divides by N - 1), tapegrad's nanstd is NumPy's, "
               "biased unless ddof=1. Write tg.nanstd(x, axis, ddof=1) for the unbiased one, "
               "or pass ddof= with dim= to say which one is meant", "ddof"),
    "nanvar": ("PyTorch's var is unbiased (divides by N - 1), tapegrad's nanvar is NumPy's, "
               "biased unless ddof=1. Write tg.nanvar(x, axis, ddof=1) for the unbiased one, "
               "or pass ddof= with dim= to say which one is meant", "ddof"),
    "split": ("PyTorch's split(x, n, dim) cuts pieces of n elements (a list: of those sizes); "
              "tapegrad's split is NumPy's: n equal pieces (a list: cut at those indices). "
              "Write tg.split(x, sections, axis) for NumPy's meaning; PyTorch's pieces of n "
              "are tg.array_split(x, range(n, x.shape[axis], n), axis), and "
              "tg.array_split(x, n, dim=...) is torch.tensor_split", None),
    "gradient": ("PyTorch's gradient(x, dim=...) returns a tuple of tensors and takes the "
                 "spacing as spacing=; tapegrad's gradient is NumPy's (one tensor for one "
                 "axis, spacings as positional arguments). Write tg.gradient(x, axis=...)",
                 None),
}


class DimKeywords:
    """How an op or function takes PyTorch's dim=/keepdim= (see Note: [dim= and keepdim=]):
    `renames` maps each PyTorch name it takes to NumPy's; `refusal` (None: none) says why
    they are refused, unless the call also passes the keyword `unless`."""

    __slots__ = ("renames", "refusal", "unless")

    def __init__(self, renames, refusal=None, unless=None):
        self.renames = renames
        self.refusal = refusal
        self.unless = unless

    def __repr__(self):
        return f"DimKeywords({self.renames!r}, refusal={self.refusal!r}, unless={self.unless!r})"


def accepted(params, *callables):
    """The names `params` holds and every callable's signature takes by keyword (callables
    whose signature cannot be read add none). Registration time only: it uses inspect."""
    names = set(params or ())
    for fn in callables:
        if fn is None:
            continue
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):     # ufuncs, some builtins
            continue
        for p in sig.parameters.values():
            if p.kind is p.POSITIONAL_OR_KEYWORD or p.kind is p.KEYWORD_ONLY:
                names.add(p.name)
    return names


def rule(name, names):
    """The DimKeywords of op/function `name` that takes the keywords `names`; None when it
    takes no axis=/keepdims= or has a dim=/keepdim= of its own."""
    if "dim" in names or "keepdim" in names:
        return None
    renames = {}
    if "axis" in names:
        renames["dim"] = "axis"
    if "keepdims" in names:
        renames["keepdim"] = "keepdims"
    if not renames:
        return None
    refusal, unless = _TORCH_DIFFERS.get(name, (None, None))
    return DimKeywords(renames, refusal, unless)


def rename(name, keywords, kwargs):
    """`kwargs` with PyTorch's names renamed by `keywords` (a DimKeywords), or a TypeError
    where it refuses them, both names are given, or dim= is empty."""
    if keywords.refusal is not None and not (keywords.unless is not None
                                             and keywords.unless in kwargs):
        given = " and ".join(f"{k}=" for k in ("dim", "keepdim") if k in kwargs)
        raise TypeError(f"{name}() does not take PyTorch's {given}: {keywords.refusal}")
    out = {}
    for key, value in kwargs.items():
        target = keywords.renames.get(key)
        if target is None:
            out[key] = value
            continue
        if target in kwargs:
            raise TypeError(
                f"{name}() got both {target}= and {key}= ({key}= is PyTorch's name for "
                f"NumPy's {target}=); pass one of them")
        if key == "dim":
            if isinstance(value, list):
                value = tuple(value)     # PyTorch takes a list of dims; NumPy a tuple
            if type(value) is tuple and not value:
                raise TypeError(
                    f"{name}(): dim=() is refused: PyTorch reduces over every axis with an "
                    f"empty dim=, NumPy over none. Write axis=None for every axis, axis=() "
                    f"for none")
        out[target] = value
    return out


def wrap_function(name, fn):
    """`fn` (a registered function), taking PyTorch's dim=/keepdim= as well when it takes
    axis=/keepdims=; fn itself when there is nothing to add. The wrapper carries its rule
    as ``dim_keywords``, as an Op does.

    NOTE: an op published under another name is left as it is, with the op's own rule:
    ``tg.amax is tg.max`` (so ``tg.amax(x, dim=1)`` is refused as ``tg.max``'s is,
    although PyTorch's amax gives the values: a wrapper would lose the identity)."""
    from ._engine import Op
    if isinstance(fn, Op):
        return fn
    own = rule(name, accepted((), fn))
    if own is None:
        return fn

    @functools.wraps(fn)
    def with_dim_keywords(*args, **kwargs):
        if kwargs and ("dim" in kwargs or "keepdim" in kwargs):
            kwargs = rename(name, own, kwargs)
        return fn(*args, **kwargs)
    with_dim_keywords.dim_keywords = own
    return with_dim_keywords
