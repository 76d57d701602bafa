"""Draw a training step's IR: the gradient of a small loss with a loop, after
msir-fuse, as README's picture (docs/images/ir-graph.svg).

    python examples/ir_graph.py [out.svg]

Writes SVG when Graphviz's `dot` is installed, the DOT text otherwise."""

import sys
from pathlib import Path

import numpy as np

import msir


def loss(x, w):
    h = np.tanh(x @ w)
    s = 0.0
    for _ in range(3):
        s = s + np.sum(h * h)
    return s


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent.parent / "docs/images/ir-graph.svg"
    x, w = np.ones((4, 3)), np.full((3, 2), 0.1)
    picture = msir.viz.graph(msir.grad(loss, argnums=1), x, w, stage="msir-fuse")
    written = picture.save(out if msir.viz.dot_available() else out.with_suffix(".dot"))
    print(f"wrote {written}")
