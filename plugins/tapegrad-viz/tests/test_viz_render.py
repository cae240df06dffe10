"""tg.viz.render: draws with Graphviz's `dot` when it is installed, says how to install
it when it is not, and writes DOT source without it.

The paths that need no Graphviz run everywhere: a missing `dot` is simulated with an
empty PATH, and the command line is checked against a stand-in `dot` script.
"""

import shutil
import stat
import sys
import xml.etree.ElementTree as ET

import pytest
import tapegrad as tg

HAVE_DOT = shutil.which("dot") is not None
SVG = "{http://www.w3.org/2000/svg}"


_ALIVE = []     # see graph()


def graph():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    x = tg.tensor([3.0, 4.0], requires_grad=True)
    # NOTE: a graph reaches its leaves weakly (a leaf nobody holds gets no gradient, so it
    # is not drawn either): keep x alive for the tests that count it.
    _ALIVE.append(x)
    return (x + w) + x, {"w": w}


@pytest.fixture
def no_dot(tmp_path, monkeypatch):
    """A PATH on which there is no `dot`."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert shutil.which("dot") is None


def fake_dot(folder, code):
    """A stand-in `dot` (a Python script running `code`) in `folder`."""
    folder.mkdir()
    exe = folder / "dot"
    exe.write_text(f"#!{sys.executable}\nimport sys, pathlib\nhere = pathlib.Path(__file__).parent\n"
                   + code)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_without_dot_render_raises_saying_how_to_install_graphviz(tmp_path, no_dot):
    out, params = graph()
    with pytest.raises(RuntimeError, match="Graphviz program `dot`") as info:
        tg.viz.render(out, tmp_path / "graph.svg", params=params)
    assert "apt-get install graphviz" in str(info.value)
    assert "tg.viz.to_dot" in str(info.value)
    assert not (tmp_path / "graph.svg").exists()


@pytest.mark.parametrize("suffix", [".dot", ".gv"])
def test_dot_source_is_written_without_graphviz(tmp_path, no_dot, suffix):
    out, params = graph()
    path = tg.viz.render(out, str(tmp_path / f"graph{suffix}"), params=params)
    assert path == tmp_path / f"graph{suffix}"
    assert path.read_text() == tg.viz.to_dot(out, params=params)


def test_the_format_comes_from_the_suffix_or_format(tmp_path, monkeypatch):
    exe = fake_dot(tmp_path / "bin", '(here / "args").write_text(" ".join(sys.argv[1:]))\n'
                                     '(here / "stdin").write_bytes(sys.stdin.buffer.read())\n')
    monkeypatch.setenv("PATH", str(exe.parent))
    out, params = graph()
    tg.viz.render(out, tmp_path / "graph.PNG", params=params)
    assert (exe.parent / "args").read_text().split() == ["-Tpng", "-o", str(tmp_path / "graph.PNG")]
    assert (exe.parent / "stdin").read_text() == tg.viz.to_dot(out, params=params)
    tg.viz.render(out, tmp_path / "graph", format="pdf")
    assert (exe.parent / "args").read_text().split()[0] == "-Tpdf"


def test_a_failing_dot_is_reported_with_its_message(tmp_path, monkeypatch):
    exe = fake_dot(tmp_path / "bin", 'sys.exit(\'Format: "xyz" not recognized\')\n')
    monkeypatch.setenv("PATH", str(exe.parent))
    with pytest.raises(RuntimeError, match=r'dot -Txyz` failed \(exit status 1\).*"xyz" not recognized'):
        tg.viz.render(graph()[0], tmp_path / "graph.xyz")


def test_a_path_without_suffix_needs_a_format(tmp_path):
    with pytest.raises(ValueError, match="cannot tell the format"):
        tg.viz.render(graph()[0], tmp_path / "graph")


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz `dot` is not installed (apt-get install graphviz)")
def test_render_draws_an_svg_with_every_node_and_edge(tmp_path):
    out, params = graph()
    path = tg.viz.render(out, tmp_path / "graph.svg", params=params)
    root = ET.parse(path).getroot()
    groups = root.iter(f"{SVG}g")
    classes = {}
    for g in groups:
        cls = g.get("class", "")
        if cls.startswith(("node", "edge")):
            title = g.find(f"{SVG}title").text
            classes[title] = cls
    assert classes == {"n0": "node op output", "n1": "node op", "n2": "node leaf",
                       "n3": "node parameter", "n2->n1": "edge", "n3->n1": "edge",
                       "n1->n0": "edge", "n2->n0": "edge"}
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "w" in texts and "(2,) float64" in texts


@pytest.mark.skipif(not HAVE_DOT, reason="Graphviz `dot` is not installed (apt-get install graphviz)")
def test_render_png(tmp_path):
    path = tg.viz.render(graph()[0], tmp_path / "graph.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
