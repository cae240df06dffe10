"""The documentation: the picture docs/images/mlp-graph.svg and the script that draws it,
this plugin's README and its docstring examples.

The picture is drawn here with Graphviz's `dot` when it is installed; when it is not,
the script must fail with the "install Graphviz" error. Either way its DOT text is
checked, and the committed SVG must show exactly the graph the script builds today
(regenerate it with `python docs/images/make_graph.py` when this fails).
"""

import re
import runpy
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import tapegrad_viz
from tapegrad.testing import run_doctests
from tapegrad_viz import graph

README = Path(__file__).resolve().parents[1] / "README.md"
IMAGES = Path(__file__).resolve().parents[3] / "docs" / "images"
SVG = "{http://www.w3.org/2000/svg}"
PARAMS = {f"{k}.{p}" for k in (0, 2, 4) for p in ("weight", "bias")}


@pytest.fixture(scope="module")
def make_graph():
    pytest.importorskip("tapegrad_nn", reason="the picture is of a tg.nn model")
    if not (IMAGES / "make_graph.py").exists():
        pytest.skip("not run from a checkout of the repository (no docs/images)")
    return runpy.run_path(str(IMAGES / "make_graph.py"))


def dot_labels(dot):
    """{node id: label lines}, [(src, dst)] from to_dot's text."""
    nodes = dict(re.findall(r'^  (n\d+) \[label="((?:[^"\\]|\\.)*)"', dot, re.M))
    edges = re.findall(r"^  (n\d+) -> (n\d+)", dot, re.M)
    return {k: v.replace('\\"', '"').split("\\n") for k, v in nodes.items()}, sorted(edges)


def svg_labels(path):
    """The same, read back from an SVG that dot drew."""
    nodes, edges = {}, []
    for g in ET.parse(path).getroot().iter(f"{SVG}g"):
        cls = g.get("class", "").split()
        if "node" in cls:
            nodes[g.find(f"{SVG}title").text] = [t.text for t in g.iter(f"{SVG}text")]
        elif "edge" in cls:
            edges.append(tuple(g.find(f"{SVG}title").text.split("->")))
    return nodes, sorted(edges)


def test_the_script_writes_the_dot_text_of_the_mlp(make_graph, tmp_path):
    path = make_graph["main"](tmp_path / "mlp.dot")
    nodes, edges = dot_labels(path.read_text())
    names = {lines[0] for lines in nodes.values()}
    assert PARAMS <= names and "leaf" in names
    assert [lines[0] for lines in nodes.values()].count("linear") == 3
    assert len(nodes) == 6 + 7 and len(edges) == 3 * 3 + 3


def test_the_script_renders_the_picture_or_says_how_to_install_graphviz(make_graph, tmp_path):
    target = tmp_path / "mlp-graph.svg"
    if shutil.which("dot") is None:
        with pytest.raises(RuntimeError, match="apt-get install graphviz"):
            make_graph["main"](target)
        assert not target.exists()
        return
    make_graph["main"](target)
    model, _, loss = make_graph["build"]()
    assert svg_labels(target) == dot_labels(graph.to_dot(loss, params=model))


def test_the_committed_picture_shows_the_graph_the_script_builds(make_graph):
    picture = IMAGES / "mlp-graph.svg"
    assert picture.exists(), "docs/images/mlp-graph.svg is missing: run docs/images/make_graph.py"
    model, _, loss = make_graph["build"]()
    assert svg_labels(picture) == dot_labels(graph.to_dot(loss, params=model)), (
        "docs/images/mlp-graph.svg is out of date: run python docs/images/make_graph.py")


@pytest.mark.parametrize("module", [tapegrad_viz, graph], ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = run_doctests(module)
    assert result.attempted > 0
    assert result.failed == 0


def test_readme_examples_run():
    result = run_doctests(README)
    assert result.attempted > 0
    assert result.failed == 0
