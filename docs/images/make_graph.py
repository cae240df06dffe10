"""Draw docs/images/mlp-graph.svg: the graph behind one loss of a small MLP.

    python docs/images/make_graph.py             # rewrites docs/images/mlp-graph.svg
    python docs/images/make_graph.py graph.png   # elsewhere (.svg, .png, .pdf, or .dot)

Needs tapegrad with tapegrad-nn and tapegrad-viz installed, and Graphviz's ``dot``
program for every format but .dot (Debian/Ubuntu: ``apt-get install graphviz``). The
tests of tapegrad-viz run it as well (plugins/tapegrad-viz/tests/test_viz_docs.py).
"""

import sys
from pathlib import Path

import numpy as np
import tapegrad as tg

PICTURE = Path(__file__).resolve().with_name("mlp-graph.svg")


def build():
    """A 4-16-16-3 MLP, a batch of 8 inputs and its cross-entropy loss.

    The input requires grad as well (an input-gradient, "saliency", computation), so the
    picture shows a plain leaf beside the named parameters. Seeded: same picture each run.
    """
    tg.manual_seed(0)
    model = tg.nn.Sequential(tg.nn.Linear(4, 16), tg.nn.ReLU(),
                             tg.nn.Linear(16, 16), tg.nn.Tanh(),
                             tg.nn.Linear(16, 3))
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.standard_normal((8, 4)), requires_grad=True)
    labels = rng.integers(0, 3, size=8)
    loss = tg.cross_entropy(model(x), labels)
    return model, x, loss


def main(path=PICTURE):
    """Render the picture into `path`; returns the path."""
    model, x, loss = build()
    return tg.viz.render(loss, path, params=model)


if __name__ == "__main__":
    print(main(*sys.argv[1:2]))
