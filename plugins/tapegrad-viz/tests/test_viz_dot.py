"""tg.viz.to_dot: the DOT text has one node per graph node and leaf, one edge per input
that gets a gradient, names and styles leaves and parameters, and shows the shapes and
saved bytes it can know.

Only tapegrad itself is needed (the ops come from a small plugin registered here); the
tests with real modules run when tapegrad-nn is installed.
"""

import re
import sys
from importlib import metadata

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_viz
from tapegrad_viz import graph, plugin

# ---------------------------------------------------------------------------------------
# A minimal DOT reader (for the subset to_dot writes: one statement per line)
# ---------------------------------------------------------------------------------------

_NODE = re.compile(r"^  (n\d+) \[(.*)\];$")
_EDGE = re.compile(r"^  (n\d+) -> (n\d+)(?: \[(.*)\])?;$")
_ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,\s]+)')


def _attrs(text):
    out = {}
    for key, value in _ATTR.findall(text or ""):
        if value.startswith('"'):
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        out[key] = value
    return out


def parse(dot):
    """{id: attrs} and [(src, dst, attrs)]; fails on any line it does not understand."""
    lines = dot.splitlines()
    assert lines[0] == "digraph tapegrad {" and lines[-1] == "}", dot
    nodes, edges = {}, []
    for line in lines[1:-1]:
        if line.startswith(("  graph [", "  node [", "  edge [")):
            continue
        if m := _NODE.match(line):
            assert m.group(1) not in nodes, f"node {m.group(1)} declared twice"
            nodes[m.group(1)] = _attrs(m.group(2))
        elif m := _EDGE.match(line):
            edges.append((m.group(1), m.group(2), _attrs(m.group(3))))
        else:
            raise AssertionError(f"unexpected DOT line: {line!r}")
    for src, dst, _ in edges:
        assert src in nodes and dst in nodes, (src, dst)
    return nodes, edges


def label_lines(attrs):
    return attrs["label"].split("\\n")


def reference_counts(*roots):
    """Nodes, leaves and edges of the graph, counted independently of tapegrad_viz."""
    nodes, leaves, edges = {}, {}, 0
    stack = [r.grad_fn for r in roots]
    while stack:
        node = stack.pop()
        if id(node) in nodes:
            continue
        nodes[id(node)] = node
        for source, _ in node.next_functions:
            if source is None:
                continue
            edges += 1
            if isinstance(source, tg.Tensor):
                leaves[id(source)] = source
            else:
                stack.append(source)
    return len(nodes), len(leaves), edges


# ---------------------------------------------------------------------------------------
# Ops for these tests (tapegrad-viz depends on the core alone)
# ---------------------------------------------------------------------------------------

class VizTestOps:
    @tg.hookimpl
    def tapegrad_register_ops(self, registry):
        # Reads both inputs (saved), not its result.
        registry.register_op(
            "vt_mul", kernels={"cpu": np.multiply},
            vjp=lambda g, ans, x, y: (tg.vt_mul(g, y), tg.vt_mul(g, x)),
            save_ans=False, samples=[(np.ones(2), np.ones(2))])
        # Reads only its result.
        registry.register_op(
            "vt_exp", kernels={"cpu": np.exp},
            vjp=lambda g, ans, x: (tg.vt_mul(g, ans),),
            save_inputs=(False,), samples=[(np.ones(2),)])
        # Reads nothing; a float32 result from any input.
        registry.register_op(
            "vt_float32", kernels={"cpu": lambda x: np.asarray(x, np.float32)},
            vjp=lambda g, ans, x: (g,),
            save_inputs=(False,), save_ans=False, samples=[(np.ones(2),)])


class Split2(tg.Function):
    """A Function with two outputs: the halves of a vector."""

    @staticmethod
    def forward(ctx, x):
        n = x.shape[0] // 2
        return tg.tensor(x.numpy()[:n]), tg.tensor(x.numpy()[n:])

    @staticmethod
    def backward(ctx, g0, g1):
        return tg.tensor(np.concatenate([g0.numpy(), g1.numpy()]))


@pytest.fixture(scope="module", autouse=True)
def viz_test_ops():
    name = tg.register_plugin(VizTestOps(), name="viz-test-ops")
    yield
    tg.unregister_plugin(name)


def leaf(*shape, dtype=np.float64):
    return tg.tensor(np.random.default_rng(0).uniform(0.5, 1.5, shape).astype(dtype),
                     requires_grad=True)


# ---------------------------------------------------------------------------------------
# Structure
# ---------------------------------------------------------------------------------------

def test_nodes_and_edges_match_the_graph():
    x, w, b = leaf(3, 4), leaf(4), leaf(1)
    h = tg.vt_exp(tg.vt_mul(x, w) + b)
    out = tg.vt_mul(h, h) + x                     # h used twice, x reached twice
    nodes, edges = parse(tg.viz.to_dot(out))
    n_nodes, n_leaves, n_edges = reference_counts(out)
    assert (n_nodes, n_leaves, n_edges) == (5, 3, 9)
    assert len(nodes) == n_nodes + n_leaves
    assert len(edges) == n_edges
    assert sorted(a["class"] for a in nodes.values()) == ["leaf"] * 3 + ["op"] * 4 + ["op output"]
    assert [(s, d) for s, d, _ in edges].count(("n2", "n0")) == 1     # x -> the last add
    square = [d for d in nodes if label_lines(nodes[d])[0] == "vt_mul"
              and sum(1 for _, dd, _ in edges if dd == d) == 2
              and len({s for s, dd, _ in edges if dd == d}) == 1]
    assert len(square) == 1                       # vt_mul(h, h): two edges from one node


def test_ops_are_named_and_edges_point_from_input_to_consumer():
    x = leaf(2)
    y = tg.vt_exp(x)
    nodes, edges = parse(tg.viz.to_dot(y))
    assert label_lines(nodes["n0"])[0] == "vt_exp"
    assert nodes["n0"]["class"] == "op output"
    assert nodes["n1"]["class"] == "leaf"
    assert edges == [("n1", "n0", {})]
    assert nodes["n0"]["tooltip"] == "vt_exp: op from viz-test-ops"


def test_parameters_are_named_and_styled_apart_from_other_leaves():
    w, b, x = leaf(2), leaf(1), leaf(2)
    out = tg.vt_mul(x, w) + b
    for params in ({"weight": w, "bias": b}, [("weight", w), ("bias", b)],
                   iter([("weight", w), ("bias", b)])):
        nodes, _ = parse(tg.viz.to_dot(out, params=params))
        by_name = {label_lines(a)[0]: a for a in nodes.values()}
        assert by_name["weight"]["class"] == by_name["bias"]["class"] == "parameter"
        assert by_name["leaf"]["class"] == "leaf"
        assert by_name["weight"]["fillcolor"] != by_name["leaf"]["fillcolor"]
        assert by_name["weight"]["shape"] == by_name["leaf"]["shape"] == "ellipse"
        assert nodes["n0"]["shape"] == "box"
        assert label_lines(by_name["weight"])[1] == "(2,) float64"


class FakeModule:
    """Anything with named_parameters() is taken for a Module."""

    def __init__(self, **params):
        self._params = params

    def named_parameters(self):
        return iter(self._params.items())


def test_a_module_names_its_parameters_and_tied_weights_show_both_names():
    w = leaf(2)
    nodes, _ = parse(tg.viz.to_dot(tg.vt_mul(w, w), params=FakeModule(**{"enc.w": w, "dec.w": w})))
    assert label_lines(nodes["n1"])[0] == "enc.w = dec.w"


def test_several_roots_make_one_graph():
    x = leaf(2)
    h = tg.vt_exp(x)
    a, b = h + 1.0, tg.vt_mul(h, 2.0)
    nodes, edges = parse(tg.viz.to_dot([a, b]))
    assert [a_["class"] for a_ in nodes.values()].count("op output") == 2
    assert len(nodes) == 4 and len(edges) == 3


def test_a_leaf_or_a_constant_alone_is_one_node():
    x = leaf(2)
    nodes, edges = parse(tg.viz.to_dot(x, params={"x": x}))
    assert list(nodes) == ["n0"] and edges == []
    assert nodes["n0"]["class"] == "parameter"
    nodes, _ = parse(tg.viz.to_dot(tg.tensor([1, 2])))
    assert nodes["n0"]["class"] == "constant"
    assert label_lines(nodes["n0"]) == ["constant", "(2,) int64"]


def test_a_leaf_nobody_holds_is_not_drawn():
    # The graph reaches leaves weakly: a leaf that is gone would get no .grad anyway.
    held = leaf(2)
    out = held + leaf(2)
    nodes, edges = parse(tg.viz.to_dot(out))
    assert len(nodes) == 2 and edges == [("n1", "n0", {})]


def test_inputs_without_gradient_are_not_drawn():
    x, c = leaf(2), tg.tensor([3.0, 4.0])
    nodes, edges = parse(tg.viz.to_dot(tg.vt_mul(c, x) + 2.0))
    assert len(nodes) == 3 and len(edges) == 2


def test_a_node_with_several_outputs_labels_its_edges():
    x = leaf(4)
    a, b = Split2.apply(x)
    out = tg.vt_mul(a, b)
    nodes, edges = parse(tg.viz.to_dot(out))
    split = next(k for k, v in nodes.items() if label_lines(v)[0] == "Split2")
    assert sorted(e[2]["label"] for e in edges if e[0] == split) == ["0", "1"]
    assert nodes[split]["tooltip"] == "Split2: tg.Function"
    assert (split, "n0", {}) not in edges


def test_a_deep_chain_is_walked_without_recursion():
    x = leaf(1)
    y = x
    for _ in range(20_000):
        y = y + 1.0
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        nodes, edges = parse(tg.viz.to_dot(y))
    finally:
        sys.setrecursionlimit(limit)
    assert len(nodes) == 20_001 and len(edges) == 20_000


def test_labels_are_escaped():
    x = leaf(2)
    nodes, _ = parse(tg.viz.to_dot(x + 1.0, params={'say "hi"\\': x}))
    assert label_lines(nodes["n1"])[0] == 'say "hi"\\'


# ---------------------------------------------------------------------------------------
# Shapes, dtypes and saved bytes
# ---------------------------------------------------------------------------------------

def _node_meta(out):
    """{DOT id: label lines} for op nodes, and the walk's graph."""
    g = graph._walk([out])
    nodes, _ = parse(tg.viz.to_dot(out))
    return g, {k: label_lines(v) for k, v in nodes.items()}


def test_shapes_shown_are_the_real_ones():
    x, w = leaf(3, 1), leaf(4)
    m = tg.vt_mul(x, w)                     # (3, 4); saved by nothing downstream but vt_mul
    e = tg.vt_exp(m)                        # saves its result: (3, 4)
    s = e + x                               # add saves nothing; root: known
    f = tg.vt_float32(tg.vt_mul(s, s))      # vt_mul saves s: known again
    out = tg.vt_mul(f, tg.vt_mul(2.0, f))   # 2.0 is not saved: counts disagree
    known = {m: "(3, 4) float64", e: "(3, 4) float64", s: "(3, 4) float64",
             f: "(3, 4) float32", out: "(3, 4) float32"}
    g, labels = _node_meta(out)
    for tensor, text in known.items():
        k = g.index[id(tensor.grad_fn)]
        shown = [line for line in labels[f"n{k}"] if line.startswith("(")]
        assert shown in ([text], []), (tensor.grad_fn.name, shown)
        meta = g.meta.get((id(tensor.grad_fn), 0))
        assert meta is None or meta == (tensor.shape, tensor.dtype)
    for tensor in (e, s, f, out):            # these must be known
        assert (id(tensor.grad_fn), 0) in g.meta, tensor.grad_fn.name


def test_every_node_shows_its_output_shape_even_when_nothing_is_saved():
    x = leaf(2, 3)
    m = tg.vt_mul(x, x) + 0.0                # add keeps nothing, but its node knows its output
    m3 = tg.vt_mul(2.0, m)
    g = graph._walk([m3 + 0.0])
    assert g.meta[(id(m.grad_fn), 0)] == ((2, 3), np.float64)
    assert m.grad_fn.output_meta == (((2, 3), np.float64),)


def test_saved_bytes_per_node_and_in_total():
    x, w = leaf(3, 4), leaf(4)
    m = tg.vt_mul(x, w)                      # keeps x (96 B) and w (32 B)
    out = tg.vt_exp(m)                       # keeps its result (96 B)
    nodes, _ = parse(tg.viz.to_dot(out))
    assert label_lines(nodes["n0"])[-1] == "saved 96 B"
    assert label_lines(nodes["n1"])[-1] == "saved 128 B"
    dot = tg.viz.to_dot(out)
    assert 'label="2 ops, 2 leaves, 224 B saved"' in dot
    big = tg.vt_exp(tg.tensor(np.ones((64, 64)), requires_grad=True))
    assert "saved 32.0 KiB" in tg.viz.to_dot(big)


def test_a_freed_graph_says_so():
    x = leaf(3)
    out = tg.vt_exp(tg.vt_mul(x, x))
    out.backward(tg.ones(3))
    nodes, edges = parse(tg.viz.to_dot(out))
    assert label_lines(nodes["n0"])[-1] == "saved: freed"
    assert label_lines(nodes["n1"]) == ["vt_mul", "(3,) float64", "saved: freed"]
    assert len(nodes) == 3 and len(edges) == 3


# ---------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad,match", [
    (np.ones(2), "expected a Tensor"), ([], "no tensor"), ([tg.ones(2), 3], "got int")])
def test_bad_roots_raise(bad, match):
    with pytest.raises((TypeError, ValueError), match=match):
        tg.viz.to_dot(bad)


@pytest.mark.parametrize("params,match", [
    (3, "params must be a Module"), ({"w": np.ones(2)}, r"params\['w'\] is a ndarray"),
    ([tg.ones(2)], r"\(name, tensor\) pairs")])
def test_bad_params_raise(params, match):
    with pytest.raises(TypeError, match=match):
        tg.viz.to_dot(tg.ones(2), params=params)


# ---------------------------------------------------------------------------------------
# The plugin
# ---------------------------------------------------------------------------------------

def test_entry_point_publishes_tg_viz():
    eps = [ep for ep in metadata.entry_points(group="tapegrad") if ep.name == "viz"]
    if not eps:
        pytest.skip("tapegrad-viz is not installed (no entry point to resolve)")
    (ep,) = eps
    assert ep.value == "tapegrad_viz.plugin"
    assert ep.load() is plugin
    assert "tapegrad-viz" in tg.registry().plugins
    assert tg.viz is graph
    assert tg.viz.to_dot is graph.to_dot and tg.viz.render is graph.render
    assert tapegrad_viz.API == ("viz",)


# ---------------------------------------------------------------------------------------
# With tapegrad-nn: a real Module
# ---------------------------------------------------------------------------------------

def test_an_mlp_graph_names_every_parameter_from_the_module():
    pytest.importorskip("tapegrad_nn", reason="needs tapegrad-nn for tg.nn")
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Tanh(), tg.nn.Linear(8, 3))
    x = tg.tensor(np.random.default_rng(0).standard_normal((5, 4)))
    loss = tg.cross_entropy(model(x), np.array([0, 1, 2, 0, 1]))
    for params in (model, dict(model.named_parameters())):
        nodes, edges = parse(tg.viz.to_dot(loss, params=params))
        names = {label_lines(a)[0]: a for a in nodes.values()}
        assert {"0.weight", "0.bias", "2.weight", "2.bias"} <= set(names)
        assert all(names[n]["class"] == "parameter" for n in ("0.weight", "2.bias"))
        assert label_lines(names["0.weight"])[1] == "(8, 4) float64"
        n_nodes, n_leaves, n_edges = reference_counts(loss)
        assert (n_nodes, n_leaves, n_edges) == (4, 4, 7)
        assert len(nodes) == n_nodes + n_leaves and len(edges) == n_edges
        assert label_lines(nodes["n0"])[:2] == ["cross_entropy", "() float64"]
