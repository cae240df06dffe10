"""tapegrad-viz: pictures of the graph behind a tensor.

Installing this distribution adds, through the entry-point group ``tapegrad``
(``viz = "tapegrad_viz.plugin"``), the public name ``tg.viz`` with:

- ``tg.viz.to_dot(t, params=None)``: the Graphviz DOT source of the graph that produced
  ``t`` (ops with their output shapes and dtypes where known and the bytes each keeps
  saved for backward; leaves, and parameters named from a Module or a dict);
- ``tg.viz.render(t, path, params=None)``: the picture, drawn by Graphviz's ``dot``
  program (a RuntimeError saying how to install it when it is missing).

>>> import tapegrad as tg
>>> w = tg.tensor([1.0, 2.0], requires_grad=True)
>>> print(tg.viz.to_dot(w + w, params={"w": w}))          # doctest: +ELLIPSIS
digraph tapegrad {
...
  n0 [label="add\\n(2,) float64\\nsaved 0 B", class="op output", ...];
  n1 [label="w\\n(2,) float64", class="parameter", ...];
  n1 -> n0;
  n1 -> n0;
}
"""

# NOTE: import tapegrad before anything of this package: tapegrad loads its plugins when
# it is first imported, and that import must not start from inside ``plugin`` (a half-run
# plugin module would publish nothing). Importing it here makes ``import
# tapegrad_viz.plugin`` safe as the very first import of a program.
import tapegrad as _tapegrad  # noqa: F401

__version__ = "0.1.0"

API = ("viz",)
"""The public names this plugin adds to ``tapegrad``."""
