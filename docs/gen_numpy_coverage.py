"""Writes docs/numpy-coverage.md: which of NumPy's public functions tapegrad provides, and
why each of the others is not (the list in docs/numpy_coverage.py).

NumPy's names are enumerated here at run time (``public_names``), so a new NumPy cannot
silently leave a gap: tests/test_numpy_coverage.py fails when a name is neither provided
nor listed, when a listed name is provided, when a listed name is not NumPy's, and when
the committed page differs from what this script writes. After editing the list, or when
tapegrad gains a function, run (in the environment where tapegrad, all of its first-party
plugins and NumPy are installed):

    python docs/gen_numpy_coverage.py

``python docs/gen_numpy_coverage.py --planned`` writes nothing: it says which names of
PLANNED_BY_ISSUE_14 are provided now and which are not (the step when issue 14's parts
are merged and that section is emptied).
"""

import functools
import importlib.util
import inspect
import sys
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "numpy-coverage.md"
NAMESPACES = ("numpy", "linalg")
QUALIFIED = {"numpy": "np.", "linalg": "np.linalg."}
TG_QUALIFIED = {"numpy": "tg.", "linalg": "tg.linalg."}


def _load(filename, name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def load_list():
    """The module docs/numpy_coverage.py (the list and its categories)."""
    return _load("numpy_coverage.py", "tapegrad_docs_numpy_coverage")


@functools.lru_cache(maxsize=None)
def _gen_ops():
    return _load("gen_ops.py", "tapegrad_docs_gen_ops")


def markdown_inline(text):
    """`text` as Markdown prose (docs/gen_ops.py's escaping: x**2, a_min, <name>)."""
    return _gen_ops().markdown_inline(text)


# -- what NumPy has ----------------------------------------------------------------------

def _is_index_trick(value):
    # np.r_, np.c_, np.s_, np.index_exp, np.mgrid, np.ogrid: objects used as obj[...],
    # not callables; r_ and c_ concatenate arrays, so they count as functions here.
    return (hasattr(type(value), "__getitem__") and not callable(value)
            and type(value).__module__.startswith("numpy")
            and not isinstance(value, (np.generic, np.ndarray)))


def _public(module):
    names = []
    for name in dir(module):
        if name.startswith("_"):
            continue
        value = getattr(module, name)
        if isinstance(value, (types.ModuleType, type)):
            continue                # submodules, classes, dtypes, exceptions
        if callable(value) or _is_index_trick(value):
            names.append(name)      # constants (pi, nan, newaxis, ...) are left out
    return sorted(names)


def public_names():
    """{"numpy": NumPy's public functions, "linalg": numpy.linalg's}: functions, ufuncs and
    index tricks; not submodules, classes, dtypes or constants."""
    return {"numpy": _public(np), "linalg": _public(np.linalg)}


def numpy_object(namespace, name):
    return getattr(np if namespace == "numpy" else np.linalg, name)


# -- what tapegrad provides --------------------------------------------------------------

def _first_party():
    from tapegrad import _plugins
    return set(_plugins._FIRST_PARTY) | {"tapegrad"}


def tapegrad_object(namespace, name):
    """tg.<name> (or tg.linalg.<name>) when tapegrad itself or a first-party plugin
    provides it, else None. A third-party plugin's op of that name (the plugin template's
    tg.logaddexp, say) does not count: this page is about tapegrad."""
    import tapegrad as tg
    from tapegrad import _plugins
    if namespace == "numpy":
        if not hasattr(tg, name):
            return None
        owner = _plugins.LOADER.owner.get(name)
        if owner is None and name not in _plugins.LOADER.core_names:
            return None
        if owner is not None and owner not in _first_party():
            return None
        return getattr(tg, name)
    if _plugins.LOADER.owner.get("linalg") not in _first_party():
        return None
    obj = getattr(tg.linalg, name, None)
    plugin = getattr(obj, "plugin", None)           # an Op knows its plugin
    if isinstance(plugin, str) and plugin not in _first_party():
        return None
    return obj


def provided_names(names=None):
    """{namespace: the names of `names` (default: NumPy's) that tapegrad provides}."""
    names = public_names() if names is None else names
    return {ns: sorted(n for n in names[ns] if tapegrad_object(ns, n) is not None)
            for ns in NAMESPACES}


def listed(coverage):
    """{namespace: {name: (category, title)}} of everything docs/numpy_coverage.py names,
    and the names it names more than once."""
    out = {ns: {} for ns in NAMESPACES}
    twice = []
    entries = [("planned by issue 14", "Planned by issue 14", "", coverage.PLANNED_BY_ISSUE_14)]
    entries += coverage.GROUPS
    for category, title, _reason, names in entries:
        for ns, group in names.items():
            for name in group:
                if name in out[ns]:
                    twice.append(f"{QUALIFIED[ns]}{name}")
                out[ns][name] = (category, title)
    return out, twice


def problems(coverage, names=None, provided=None):
    """Every way docs/numpy_coverage.py disagrees with NumPy and tapegrad now, as messages
    (empty when they agree)."""
    names = public_names() if names is None else names
    provided = provided_names(names) if provided is None else provided
    found, twice = listed(coverage)
    out = []
    if twice:
        out.append(f"listed more than once: {', '.join(sorted(twice))}")
    for category, title, reason, group in coverage.GROUPS:
        if category not in coverage.CATEGORIES:
            out.append(f"group {title!r} has the unknown category {category!r} "
                       f"(one of {coverage.CATEGORIES})")
        if not reason.strip():
            out.append(f"group {title!r} gives no reason")
        if set(group) - set(NAMESPACES):
            out.append(f"group {title!r} has keys {sorted(set(group) - set(NAMESPACES))} "
                       f"(only {NAMESPACES})")
    for ns in NAMESPACES:
        q, have, listing = QUALIFIED[ns], set(provided[ns]), found[ns]
        missing = sorted(set(names[ns]) - have - set(listing))
        if missing:
            out.append(f"NumPy has functions that tapegrad neither provides ({TG_QUALIFIED[ns]}"
                       f"<name>) nor lists in docs/numpy_coverage.py: "
                       f"{', '.join(q + n for n in missing)}: add each to a group with its "
                       f"reason (or provide it)")
        stale = sorted(set(listing) & have)
        planned = [n for n in stale if listing[n][0] == "planned by issue 14"]
        others = [n for n in stale if n not in planned]
        if planned:
            out.append(f"provided now, still in PLANNED_BY_ISSUE_14: "
                       f"{', '.join(q + n for n in planned)}: delete them there")
        if others:
            out.append(f"provided now, still listed as not provided: "
                       f"{', '.join(q + n + ' (' + listing[n][1] + ')' for n in others)}: "
                       f"delete them from their group")
        gone = sorted(set(listing) - set(names[ns]))
        if gone:
            out.append(f"listed, but not a public function of this NumPy ({np.__version__}): "
                       f"{', '.join(q + n for n in gone)}: delete them")
    return out


# -- leading positional parameters -------------------------------------------------------

# Names of array inputs: NumPy and tapegrad spell them differently (a / x, x1 / x, ...),
# which does not matter to a positional call.
ARRAY_NAMES = frozenset("a b x y x1 x2 x3 ary arys array arrays m v cond condition data "
                        "seq xs operands input in0 in1 in2".split())
# np.arange(start_or_stop, stop=None, step=None): the first argument is the stop when it
# is the only one, as tg.arange(start, stop=None, ...) treats it.
SAME_PARAMETER = {"start_or_stop": "start"}
# Where NumPy's parameters reach ones tapegrad does not have (an output array, a memory
# layout, an ndarray subclass, `like=`), the comparison stops: past them tapegrad's
# positional parameters are its own (device, requires_grad), and a NumPy value passed there
# is refused (an unknown device, say), never silently taken for something else.
NUMPY_ONLY = frozenset("out order subok like".split())


def numpy_positional(obj):
    """(names of the leading positional parameters, how many are required), or None
    where NumPy's signature cannot be read."""
    if isinstance(obj, np.ufunc):
        return [f"x{i + 1}" for i in range(obj.nin)], obj.nin
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    ps = [p for p in sig.parameters.values()
          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [p.name for p in ps], sum(p.default is p.empty for p in ps)


def tapegrad_positional(obj):
    """(names of the positional parameters, how many leading ones are tensor inputs,
    whether it takes any number of positional arguments), or None where unreadable."""
    from tapegrad._engine import Op
    if isinstance(obj, Op):
        if obj.seq_input:
            return ["seq", *obj.params], 1, False
        if obj.nin < 0:
            return list(obj.params), 0, True
        names = [f"in{i}" for i in range(obj.nin)]
        if obj.vjp is not None:
            ps = list(inspect.signature(obj.vjp).parameters.values())[2:]
            names = [p.name for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                     and p.default is p.empty][:obj.nin] or names
        return names + list(obj.params), obj.nin, False
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    ps = sig.parameters.values()
    names = [p.name for p in ps if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names, 0, any(p.kind is p.VAR_POSITIONAL for p in ps)


def signature_difference(np_obj, tg_obj):
    """Why `tg_obj` does not take NumPy's leading positional parameters, or None when it
    does (or when either signature cannot be read). Compared: it takes at least as many
    positional arguments as NumPy requires, and past the tensor inputs each positional
    parameter that both have is the same one (by name)."""
    ours, theirs = tapegrad_positional(tg_obj), numpy_positional(np_obj)
    if ours is None or theirs is None:
        return None
    tg_names, inputs, variadic = ours
    np_names, required = theirs
    if not variadic and len(tg_names) < required:
        return (f"takes {len(tg_names)} positional arguments ({', '.join(tg_names)}), NumPy "
                f"requires {required} ({', '.join(np_names[:required])})")
    for i, (mine, numpys) in enumerate(zip(tg_names, np_names)):
        if numpys in NUMPY_ONLY:
            break
        numpys = SAME_PARAMETER.get(numpys, numpys)
        same = mine.lower() == numpys.lower()
        if i < inputs or same or (mine in ARRAY_NAMES and numpys in ARRAY_NAMES):
            continue
        return (f"positional parameter {i} is {mine!r}, NumPy's is {numpys!r} "
                f"(tapegrad: ({', '.join(tg_names)}), NumPy: ({', '.join(np_names)}))")
    return None


def signature_differences(names=None):
    """{namespace: {name: why}} for every provided function whose leading positional
    parameters are not NumPy's."""
    names = public_names() if names is None else names
    out = {ns: {} for ns in NAMESPACES}
    for ns in NAMESPACES:
        for name in names[ns]:
            tg_obj = tapegrad_object(ns, name)
            if tg_obj is not None:
                why = signature_difference(numpy_object(ns, name), tg_obj)
                if why is not None:
                    out[ns][name] = why
    return out


# -- the page ----------------------------------------------------------------------------

HEADER = """\
---
hide:
  - navigation
---

# NumPy coverage

<!-- Generated by docs/gen_numpy_coverage.py from docs/numpy_coverage.py: do not edit by hand. -->

Which of NumPy's public functions tapegrad provides with NumPy's name (`tg.<name>`,
`tg.linalg.<name>`), and why each of the others is not there. The NumPy side is
enumerated from NumPy {version} itself (every public callable of `numpy` and
`numpy.linalg`, and the index tricks `np.r_`, `np.c_`, ...; not submodules, classes,
dtypes or constants); the reasons are the list `docs/numpy_coverage.py`.
`tests/test_numpy_coverage.py` fails when a NumPy function is neither provided nor on the
list (a new NumPy), when a listed function is provided (a stale entry) or is not NumPy's
(a removed one), and when this page is not what `python docs/gen_numpy_coverage.py`
writes now. Functions of first-party plugins count as provided; a third-party plugin's
do not. The full list of ops, with their gradient conventions, is [Ops by family](ops.md).

| | `numpy` | `numpy.linalg` |
|---|---|---|
{summary}
"""


def _names(ns, names):
    return ", ".join(f"`{QUALIFIED[ns]}{n}`" for n in sorted(names))


def render(coverage, names=None, provided=None, differences=None):
    """The page, from the list `coverage`, NumPy's `names` and the `provided` ones."""
    names = public_names() if names is None else names
    provided = provided_names(names) if provided is None else provided
    differences = coverage.SIGNATURE_DIFFERENCES if differences is None else differences
    rows = [("provided by tapegrad", {ns: len(provided[ns]) for ns in NAMESPACES})]
    planned = coverage.PLANNED_BY_ISSUE_14
    if any(planned.get(ns) for ns in NAMESPACES):
        rows.append(("planned by issue 14", {ns: len(planned.get(ns, ())) for ns in NAMESPACES}))
    for category in coverage.CATEGORIES:
        rows.append((category, {ns: sum(len(g.get(ns, ())) for c, _t, _r, g in coverage.GROUPS
                                        if c == category) for ns in NAMESPACES}))
    rows.append(("NumPy's public functions", {ns: len(names[ns]) for ns in NAMESPACES}))
    summary = "\n".join(f"| {what} | {n['numpy']} | {n['linalg']} |" for what, n in rows)
    # The minor version only: a patch release does not change NumPy's names, and the page
    # must not go stale for one.
    version = ".".join(np.__version__.split(".")[:2])
    out = [HEADER.format(version=version, summary=summary)]

    out.append("\n## Provided\n\n")
    for ns in NAMESPACES:
        if provided[ns]:
            out.append(f"{_names(ns, provided[ns])}.\n\n")
        else:
            out.append(f"None of `numpy.linalg` yet (`{TG_QUALIFIED[ns]}<name>`).\n\n"
                       if ns == "linalg" else "None.\n\n")
    if any(differences.get(ns) for ns in NAMESPACES):
        out.append("Where a provided function's leading positional parameters are not "
                   "NumPy's (checked by the test):\n\n")
        for ns in NAMESPACES:
            for name, why in sorted(differences.get(ns, {}).items()):
                out.append(f"- `{TG_QUALIFIED[ns]}{name}`: {markdown_inline(why)}\n")
        out.append("\n")

    if any(planned.get(ns) for ns in NAMESPACES):
        out.append("\n## Planned by issue 14\n\nBeing added by the parts of issue 14 "
                   "(NumPy and SciPy coverage):\n\n")
        for ns in NAMESPACES:
            if planned.get(ns):
                out.append(f"{_names(ns, planned[ns])}.\n\n")

    for category in coverage.CATEGORIES:
        groups = [g for g in coverage.GROUPS if g[0] == category]
        if not groups:
            continue
        out.append(f"\n## {category[0].upper() + category[1:]}\n")
        for _c, title, reason, group in groups:
            listed_names = "; ".join(_names(ns, group[ns]) for ns in NAMESPACES if group.get(ns))
            out.append(f"\n### {markdown_inline(title)}\n\n{markdown_inline(reason)}\n\n"
                       f"{listed_names}.\n")
    return "".join(out)


def planned_report(coverage):
    """What ``--planned`` prints: of PLANNED_BY_ISSUE_14, what is provided now (delete it
    there) and what is not (move it to a group with its reason)."""
    lines = []
    for ns in NAMESPACES:
        planned = coverage.PLANNED_BY_ISSUE_14.get(ns, [])
        have = [n for n in planned if tapegrad_object(ns, n) is not None]
        lacking = [n for n in planned if n not in have]
        lines.append(f"{QUALIFIED[ns]}* provided now (delete from PLANNED_BY_ISSUE_14): "
                     f"{' '.join(have) or '-'}")
        lines.append(f"{QUALIFIED[ns]}* still missing (move to a group, with why): "
                     f"{' '.join(lacking) or '-'}")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    coverage = load_list()
    if argv == ["--planned"]:
        print(planned_report(coverage))
        return
    wrong = problems(coverage)
    if wrong:
        sys.exit("docs/numpy_coverage.py does not match NumPy and tapegrad:\n- "
                 + "\n- ".join(wrong))
    PAGE.write_text(render(coverage))
    names = public_names()
    print(f"wrote {PAGE.relative_to(ROOT)}: {sum(map(len, names.values()))} NumPy functions")


if __name__ == "__main__":
    main()
