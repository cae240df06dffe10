"""Pictures of the graph behind a tensor (published as ``tg.viz``).

The graph behind a tensor ``t`` is ``t.grad_fn`` and everything reachable from it through
``next_functions``: nodes (one per recorded op or ``tg.Function`` call) and the leaf
tensors that require grad. ``to_dot`` draws

- one box per node: the op's name, the shape and dtype of its output (``Node.output_meta``),
  and the bytes of the arrays it keeps alive for its
  backward (``saved_arrays()``; "freed" once a backward without ``retain_graph`` has
  released them). The node that produced ``t`` is drawn bold, in yellow;
- one ellipse per leaf: parameters (the tensors named in ``params``) in green with their
  name, other leaves in grey;
- one arrow per input that gets a gradient, from the input to the node that used it, so
  the picture reads in the direction of the forward pass. Inputs that get no gradient
  (constants, integer labels) are not drawn. An arrow leaving a node with several outputs
  is labelled with the output's number.

Every DOT node carries a ``class`` attribute ("op", "op output", "leaf", "parameter",
"constant"), which ``dot -Tsvg`` copies into the SVG, for styling or for tests.

>>> import tapegrad as tg
>>> x = tg.tensor([1.0, 2.0], requires_grad=True)
>>> b = tg.tensor(0.5, requires_grad=True)
>>> dot = tg.viz.to_dot(x + b, params={"b": b})
>>> dot.count(" -> "), dot.count('class="leaf"'), dot.count('class="parameter"')
(2, 1, 1)
>>> tg.viz.render(x + b, "/tmp/tapegrad-viz-doc.svg")    # doctest: +SKIP
PosixPath('/tmp/tapegrad-viz-doc.svg')
"""

import shutil
import subprocess
from collections import deque
from collections.abc import Mapping
from pathlib import Path

import tapegrad as tg

__all__ = ["to_dot", "render"]

_STYLE = {
    "op": 'shape=box, style="rounded,filled", fillcolor="#dbe8f6", color="#4a6fa5"',
    "op output": 'shape=box, style="rounded,filled,bold", fillcolor="#fde9b4", '
                 'color="#b8860b"',
    "parameter": 'shape=ellipse, style=filled, fillcolor="#cdebc5", color="#3c8a2e"',
    "leaf": 'shape=ellipse, style=filled, fillcolor="#ececec", color="#777777"',
    "constant": 'shape=ellipse, style=dashed, color="#777777"',
}

_NO_DOT = (
    "tg.viz.render needs the Graphviz program `dot`, which is not installed (or not on "
    "PATH). Install Graphviz -- Debian/Ubuntu: `apt-get install graphviz`, Fedora: `dnf "
    "install graphviz`, macOS: `brew install graphviz`, conda: `conda install -c "
    "conda-forge graphviz` (the pip package `graphviz` alone does not include it) -- or "
    "write the DOT source with tg.viz.to_dot(t) (or render(t, 'graph.dot')) and render it "
    "elsewhere.")


def to_dot(t, params=None):
    """The Graphviz DOT source of the graph behind ``t``.

    ``t`` is a Tensor (or a list/tuple of Tensors, drawn as one graph). ``params`` names
    leaves: a Module (its ``named_parameters()``), or a mapping or iterable of
    ``(name, tensor)`` pairs (``dict(model.named_parameters())``, ``{"x": x}``). The
    graph is walked iteratively, so a chain of any depth is fine (the picture of a very
    deep one is another matter).

    >>> import tapegrad as tg
    >>> x = tg.tensor([1.0, 2.0], requires_grad=True)
    >>> print(tg.viz.to_dot(x + 1.0))                      # doctest: +ELLIPSIS
    digraph tapegrad {
      graph [label="1 op, 1 leaf, 0 B saved", ...];
      node [fontname="Helvetica", fontsize=10];
      edge [color="#555555", arrowsize=0.7];
      n0 [label="add\\n(2,) float64\\nsaved 0 B", class="op output", ...];
      n1 [label="leaf\\n(2,) float64", class="leaf", ...];
      n1 -> n0;
    }
    """
    roots = _roots(t)
    names = _param_names(params)
    graph = _walk(roots)
    root_nodes = {id(r.grad_fn) for r in roots if r.grad_fn is not None}

    lines = []
    counts = {"op": 0, "parameter": 0, "leaf": 0}
    saved = {}                                    # id(array) -> nbytes: each array once
    for k, obj in enumerate(graph.objects):
        if _is_tensor(obj):
            kind, label, tip = _leaf_entry(obj, names)
            counts["parameter" if kind == "parameter" else "leaf"] += 1
        else:
            counts["op"] += 1
            kind = "op output" if id(obj) in root_nodes else "op"
            label, tip = _node_entry(obj, graph.meta, saved)
        lines.append(f"  n{k} [label={_text(label)}, class=\"{kind}\", tooltip={_text([tip])}, "
                     f"{_STYLE[kind]}];")
    for src, dst, nr in graph.edges:
        source = graph.objects[src]
        many = not _is_tensor(source) and source.n_outputs > 1
        lines.append(f"  n{src} -> n{dst} [label=\"{nr}\"];" if many else f"  n{src} -> n{dst};")

    parts = [_count(counts["op"], "op")]
    if counts["parameter"]:
        parts.append(_count(counts["parameter"], "parameter"))
    if counts["leaf"] or not counts["parameter"]:
        parts.append(_count(counts["leaf"], "leaf", "leaves"))
    title = ", ".join(parts + [f"{_bytes(sum(saved.values()))} saved"])
    head = ["digraph tapegrad {",
            f"  graph [label={_text([title])}, labelloc=t, fontname=\"Helvetica\", "
            f"fontsize=11, rankdir=TB, nodesep=0.3, ranksep=0.35];",
            "  node [fontname=\"Helvetica\", fontsize=10];",
            "  edge [color=\"#555555\", arrowsize=0.7];"]
    return "\n".join(head + lines + ["}"]) + "\n"


def render(t, path, params=None, *, format=None):
    """Draw the graph behind ``t`` into ``path`` with Graphviz's ``dot``; returns the path.

    The format comes from the file's suffix (``.svg``, ``.png``, ``.pdf``, ... anything
    ``dot -T`` knows) unless ``format=`` says otherwise; ``.dot``/``.gv`` write the DOT
    source itself, which needs no Graphviz. Without the ``dot`` program, raises
    RuntimeError saying how to install it (Debian: ``apt-get install graphviz``).
    ``params`` is as for ``to_dot``.
    """
    path = Path(path)
    fmt = (format or path.suffix.lstrip(".")).lower()
    if not fmt:
        raise ValueError(f"tg.viz.render: cannot tell the format of '{path}': give the file a "
                         f"suffix (.svg, .png, .pdf, .dot) or pass format=")
    source = to_dot(t, params)
    if fmt in ("dot", "gv"):
        path.write_text(source, encoding="utf-8")
        return path
    exe = shutil.which("dot")
    if exe is None:
        raise RuntimeError(_NO_DOT)
    out = subprocess.run([exe, f"-T{fmt}", "-o", str(path)], input=source.encode("utf-8"),
                         capture_output=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"tg.viz.render: `dot -T{fmt}` failed (exit status {out.returncode}) "
                           f"writing '{path}': {out.stderr.decode(errors='replace').strip()}")
    return path


# ---------------------------------------------------------------------------------------
# Walking the graph
# ---------------------------------------------------------------------------------------

class _Graph:
    """What to_dot draws, found by one breadth-first walk from the roots."""

    def __init__(self):
        self.objects = []   # nodes and leaf tensors in the order found: DOT ids n0, n1, ...
        self.index = {}     # id(object) -> its position in objects
        self.edges = []     # (input's position, consumer's position, input's output_nr)
        self.meta = {}      # (id(node), output_nr) -> (shape, dtype) of that output

    def add(self, obj):
        """Add obj if it is new; True if it was."""
        # NOTE: keyed by id() (objects stays alive meanwhile), not by the object: a Tensor's
        # == is elementwise, so it must never be compared as a dict key.
        if id(obj) in self.index:
            return False
        self.index[id(obj)] = len(self.objects)
        self.objects.append(obj)
        return True


def _walk(roots):
    graph = _Graph()
    queue = deque()
    for t in roots:
        node = t.grad_fn
        if node is None:
            graph.add(t)
            continue
        graph.meta[(id(node), t.output_nr)] = (t.shape, t.dtype)
        if graph.add(node):
            queue.append(node)
    while queue:
        node = queue.popleft()
        inputs = node.next_functions
        for k, (shape, dtype) in enumerate(node.output_meta):
            graph.meta.setdefault((id(node), k), (shape, dtype))
        for source, nr in inputs:
            if source is None:
                continue
            if graph.add(source) and not _is_tensor(source):
                queue.append(source)
            graph.edges.append((graph.index[id(source)], graph.index[id(node)], nr))
    return graph


# ---------------------------------------------------------------------------------------
# Labels
# ---------------------------------------------------------------------------------------

def _node_entry(node, meta, saved):
    lines = [node.name]
    n = node.n_outputs
    for k in range(n):
        if (id(node), k) in meta:
            shape, dtype = meta[id(node), k]
            lines.append(("" if n == 1 else f"{k}: ") + _shape(shape, dtype))
    if node.saved_released:
        lines.append("saved: freed")
    else:
        arrays = node.saved_arrays()
        for a in arrays:
            saved[id(a)] = getattr(a, "nbytes", 0)
        lines.append(f"saved {_bytes(sum(getattr(a, 'nbytes', 0) for a in arrays))}")
    op = getattr(node, "op", None)
    tip = f"{node.name}: op from {op.plugin}" if op is not None else f"{node.name}: tg.Function"
    return lines, tip


def _leaf_entry(t, names):
    name = names.get(id(t))
    if name is not None:
        kind = "parameter"
    elif t.requires_grad:
        kind, name = "leaf", "leaf"
    else:
        kind, name = "constant", "constant"
    lines = [name, _shape(t.shape, t.dtype)]
    device = getattr(t.device, "name", str(t.device))
    if device != "cpu":
        lines.append(device)
    tip = f"{kind}: {lines[1]}" if name == kind else f"{kind} {name}: {lines[1]}"
    return kind, lines, tip


def _shape(shape, dtype):
    return f"{tuple(shape)} {dtype}"


def _bytes(n):
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"


def _count(n, word, plural=None):
    return f"{n} {word if n == 1 else plural or word + 's'}"


def _text(lines):
    """A DOT string holding `lines` (one per line of the label)."""
    def esc(s):
        return str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return '"' + "\\n".join(esc(s) for s in lines) + '"'


# ---------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------

def _is_tensor(obj):
    return isinstance(obj, tg.Tensor)


def _roots(t):
    roots = list(t) if isinstance(t, (list, tuple)) else [t]
    if not roots:
        raise ValueError("tg.viz.to_dot: no tensor given")
    for r in roots:
        if not _is_tensor(r):
            raise TypeError(f"tg.viz.to_dot: expected a Tensor (or a list of them), got "
                            f"{type(r).__name__}")
    return roots


def _param_names(params):
    """id(tensor) -> name, from a Module, a mapping or (name, tensor) pairs."""
    if params is None:
        return {}
    if hasattr(params, "named_parameters"):
        pairs = params.named_parameters()
    elif isinstance(params, Mapping):
        pairs = params.items()
    else:
        try:
            pairs = iter(params)
        except TypeError:
            raise TypeError(f"tg.viz.to_dot: params must be a Module, a mapping of names to "
                            f"tensors or (name, tensor) pairs, got {type(params).__name__}"
                            ) from None
    names = {}
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise TypeError(f"tg.viz.to_dot: params must hold (name, tensor) pairs with string "
                            f"names, got {pair!r}")
        name, tensor = pair
        if not _is_tensor(tensor):
            raise TypeError(f"tg.viz.to_dot: params['{name}'] is a {type(tensor).__name__}, "
                            f"not a Tensor")
        # Tied weights (one tensor under two names) show both names.
        names[id(tensor)] = f"{names[id(tensor)]} = {name}" if id(tensor) in names else str(name)
    return names
