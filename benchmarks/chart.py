"""A bar chart of a benchmark run's ratios: ``python -m benchmarks.chart RESULTS.json
[MORE.json ...] -o ratios.png``.

For every workload in the given JSON files (what ``python -m benchmarks --json`` writes),
one group of bars: tapegrad / NumPy-by-hand and PyTorch / NumPy-by-hand for the
workload's first figure (its time), on a log scale with a line at 1 (NumPy's cost). Below
the line a library is faster than the hand-written NumPy version. matplotlib is an
optional benchmark dependency (``ci/bench`` installs it), never a test-time requirement of
the library itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SERIES = (("tapegrad/numpy", "tapegrad (eager)", "#3b6ea8"),
          ("tapegrad-compiled/numpy", "tapegrad (tg.compile)", "#6aa84f"),
          ("torch/numpy", "PyTorch CPU", "#d9822b"),
          ("jax/numpy", "JAX jit", "#8e63b5"))


def collect(paths):
    """[(label, {series: ratio})] in file order, first time-like metric of each workload."""
    rows = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        for key, workload in data["workloads"].items():
            metrics = workload.get("metrics", {})
            name = next((m for m in metrics if m.startswith("time")), None)
            if name is None or "ratios" not in metrics[name]:
                continue
            ratios = metrics[name]["ratios"]
            label = key if name == "time" else f"{key}\n({name})"
            series = {s: ratios[s] for s, _, _ in SERIES if s in ratios}
            if all(v is None for v in series.values()):
                continue                   # no NumPy case (W7): nothing to draw against it
            rows.append((label, series))
    return rows


def draw(rows, out, title="tapegrad benchmarks: time relative to NumPy with a hand-written backward"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("no workload with ratios in the given results")
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(rows) + 2), 4.2), dpi=120)
    width = 0.8 / len(SERIES)
    for k, (series, label, color) in enumerate(SERIES):
        xs = [i + (k - (len(SERIES) - 1) / 2) * width for i in range(len(rows))]
        ys = [r.get(series) for _, r in rows]
        present = [(x, y) for x, y in zip(xs, ys) if y is not None]
        if not present:
            continue
        bars = ax.bar([x for x, _ in present], [y for _, y in present], width, label=label,
                      color=color)
        for bar, (_, y) in zip(bars, present):
            ax.annotate(f"{y:.0f}x" if y >= 10 else f"{y:.3g}x", (bar.get_x() + bar.get_width() / 2, y),
                        ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="#444444", linewidth=1, linestyle="--")
    ax.set_yscale("log")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([label for label, _ in rows], fontsize=8)
    ax.set_ylabel("time / NumPy by hand (log scale)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chart", description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="JSON files written by python -m benchmarks")
    parser.add_argument("-o", "--output", default="benchmarks/results/ratios.png")
    args = parser.parse_args(argv)
    rows = collect(args.results)
    draw(rows, args.output)
    print(f"chart of {len(rows)} workloads written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
