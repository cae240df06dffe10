"""Turn a ``SuiteRun`` into figures: the table printed to stdout and the JSON file.

Figures per (workload, metric, library): the median over the kept rounds, with min, max
and quartiles. Ratios ``a/b`` are the median over rounds of a's figure divided by b's in
the same round (the rounds are interleaved, so pairing them cancels slow drift of the
machine); above 1 means ``a`` is slower or uses more.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .registry import Metric
from .runner import REPO_ROOT, LibraryRun, SuiteRun, WorkloadRun

SCHEMA_VERSION = 1

# (numerator, denominator) of the ratios reported, in table order.
RATIOS = (("tapegrad", "numpy"), ("tapegrad-compiled", "numpy"), ("torch", "numpy"),
          ("jax", "numpy"),
          ("tapegrad", "torch"), ("tapegrad-compiled", "torch"),
          ("tapegrad-compiled", "jax"),
          ("tapegrad-fwd-over-rev", "numpy"), ("tapegrad-vmap", "numpy"),
          ("tapegrad-vmap-compiled", "numpy"), ("torch-func", "numpy"),
          ("tapegrad-vmap", "torch-func"), ("tapegrad-vmap-compiled", "torch-func"))


# -- figures --------------------------------------------------------------------------


def metric_values(run: LibraryRun, metric: Metric) -> list[float]:
    """The metric's value for each kept round of ``run``."""
    return [metric.extract(sample) for sample in run.samples]


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Median, spread and the raw values of one library's rounds."""
    q1, q3 = np.percentile(values, [25, 75]) if values else (float("nan"),) * 2
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "q1": float(q1), "q3": float(q3), "rounds": list(values)}


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float:
    """Median over rounds of numerator/denominator of the same round."""
    return statistics.median(a / b for a, b in zip(numerators, denominators, strict=True))


def workload_figures(result: WorkloadRun) -> dict[str, Any]:
    """Everything reported about one workload, as plain data (the JSON entry)."""
    workload = result.workload
    metrics = {}
    for metric in workload.metrics:
        values = {lib: metric_values(run, metric) for lib, run in result.runs.items()}
        ratios = {f"{a}/{b}": (paired_ratio(values[a], values[b])
                               if a in values and b in values else None)
                  for a, b in RATIOS}
        metrics[metric.name] = {
            "unit": metric.unit,
            "results": {lib: summarize(v) for lib, v in values.items()}
                       | {lib: None for lib in result.not_available},
            "ratios": ratios,
        }
    return {
        "title": workload.title,
        "description": workload.description,
        "params": dict(workload.params),
        "tolerance": {"rtol": workload.rtol, "atol": workload.atol},
        # the library "checked_against_numpy" compares with (its key kept for the schema)
        "reference": workload.reference,
        "metrics": metrics,
        "checked_against_numpy": {
            lib: {"max_rel_diff": run.max_rel_diff}
            for lib, run in result.runs.items()},
        "diagnostics": {
            lib: {"calls_per_sample": run.calls_per_sample,
                  "build_s": run.prepare["build_s"],
                  "first_call_s": run.prepare["first_call_s"],
                  # mean over rounds of CPython cyclic-GC collections per call, gen 0..2
                  "gc_collections_per_call": [
                      statistics.fmean(gens) for gens in
                      zip(*(s.gc_collections for s in run.samples), strict=True)]}
            for lib, run in result.runs.items()},
        "not_available": dict(result.not_available),
    }


# -- JSON -----------------------------------------------------------------------------


def to_json(suite: SuiteRun) -> dict[str, Any]:
    """The whole run as JSON-ready data (see ``benchmarks/README.md`` for the schema)."""
    return {
        "schema": SCHEMA_VERSION,
        "created": datetime.fromtimestamp(suite.started, timezone.utc).isoformat(),
        "seconds": suite.seconds,
        "config": dict(suite.config),
        "environment": _environment(suite.libraries),
        "workloads": {r.workload.key: workload_figures(r) for r in suite.workloads},
    }


def write_json(data: Mapping[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    os.replace(tmp, path)


def _environment(libraries: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "git_commit": _git_commit(),
        "libraries": {lib: dict(info) for lib, info in libraries.items()},
        "executable": sys.executable,
    }


def _git_commit() -> str | None:
    """HEAD of the repository, with ``+dirty`` when the work tree has changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO_ROOT, check=True, capture_output=True,
                               text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


# -- the table ------------------------------------------------------------------------


def format_table(data: Mapping[str, Any]) -> str:
    """The human-readable report of ``to_json``'s data."""
    config, env = data["config"], data["environment"]
    libs = config["libraries"]
    versions = " | ".join(
        f"{lib} {info['version']}" if info["available"] else f"{lib} n/a (not installed)"
        for lib, info in env["libraries"].items())
    lines = [
        f"tapegrad benchmarks: median of {_count(config['rounds'], 'interleaved round')} "
        f"({_count(config['warmup'], 'warm-up round')} dropped), "
        f"{_count(config['threads'], 'thread')}" + (", QUICK (not for figures)"
                                                   if config.get("quick") else ""),
        f"{versions}   (Python {env['python']}, {env['machine']}, "
        f"{env['cpu_count']} CPUs)",
        "",
    ]
    for key, wl in data["workloads"].items():
        # NOTE: only the columns this workload has (W5's and W9's transform variants
        # would be n/a everywhere else); a library that is not installed still shows
        here = [lib for lib in libs
                if any(m["results"].get(lib) for m in wl["metrics"].values())
                or "has no" not in wl["not_available"].get(lib, "has no")]
        ratio_names = [f"{a}/{b}" for a, b in RATIOS if a in here and b in here]
        rows = [["", *here, *ratio_names]]
        for name, metric in wl["metrics"].items():
            cells = [f"{name} [{metric['unit']}]"]
            for lib in here:
                res = metric["results"].get(lib)
                cells.append(_figure(res) if res else "n/a")
            for ratio in ratio_names:
                value = metric["ratios"].get(ratio)
                cells.append(f"{value:.2f}x" if value is not None else "n/a")
            rows.append(cells)
        lines.append(f"{key}  {wl['title']}")
        lines.extend("  " + line for line in _align(rows))
        for lib, reason in wl["not_available"].items():
            if lib in here:
                lines.append(f"  {lib}: n/a, {reason}")
        checked = ", ".join(f"{lib} {c['max_rel_diff']:.1e}"
                            for lib, c in wl["checked_against_numpy"].items()
                            if lib != wl.get("reference", "numpy"))
        gc_runs = {lib: d["gc_collections_per_call"]
                   for lib, d in wl["diagnostics"].items() if any(d["gc_collections_per_call"])}
        first_calls = {lib: d["first_call_s"] for lib, d in wl["diagnostics"].items()
                       if lib in ("tapegrad-compiled", "tapegrad-vmap-compiled", "jax")}
        if first_calls:
            # NOTE: the cost a compiler pays once (tg.compile's recording, jax.jit's
            # trace + XLA compile), which the medians above leave out.
            lines.append("  first call (record/trace + compile + one step): " + ", ".join(
                f"{lib} {_seconds(t)}" for lib, t in first_calls.items()))
        if gc_runs:
            lines.append("  cyclic GC collections per step (gen 0/1/2): " + ", ".join(
                f"{lib} " + "/".join(f"{n:.3g}" for n in gens) for lib, gens in gc_runs.items()))
        reference = {"numpy": "NumPy"}.get(wl.get("reference", "numpy"), wl.get("reference"))
        lines.append(f"  every round checked against {reference} (rtol {wl['tolerance']['rtol']:g}); "
                     f"largest relative difference: {checked or '-'}")
        lines.append("")
    lines.append("Figures: median over rounds, +- half the interquartile range as % of the "
                 "median. a/b: median over rounds of a's figure / b's in the same round "
                 "(above 1: a is slower).")
    return "\n".join(lines)


def _seconds(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _figure(res: Mapping[str, Any]) -> str:
    median = res["median"]
    spread = 50.0 * (res["q3"] - res["q1"]) / median if median else 0.0
    return f"{median:.3g} +-{spread:.0f}%"


def _align(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip()
            for row in rows]
