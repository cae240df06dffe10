"""The benchmark suite runs, checks its results, and reports (benchmarks/, ci/bench).

The smoke test runs W1 in --quick mode with NumPy and tapegrad only: torch is a
benchmark-only dependency and no test needs it.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def benchmarks(monkeypatch):
    """The ``benchmarks`` package, importable from the repository root."""
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    import benchmarks.registry
    import benchmarks.runner
    return benchmarks


def test_quick_w1_prints_ratios_and_writes_json(tmp_path):
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--workloads", "W1",
         "--libraries", "numpy,tapegrad", "--json", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    assert "W1" in proc.stdout
    assert re.search(r"tapegrad/numpy", proc.stdout)
    assert re.search(r"\d+\.\d\dx", proc.stdout), proc.stdout
    assert "torch" not in proc.stdout.split("\n", 2)[1]   # not asked for: no column

    data = json.loads(out.read_text())
    assert data["schema"] == 1
    assert data["config"]["libraries"] == ["numpy", "tapegrad"]
    time_ = data["workloads"]["W1"]["metrics"]["time"]
    assert time_["unit"] == "us/op"
    for lib in ("numpy", "tapegrad"):
        result = time_["results"][lib]
        assert len(result["rounds"]) == data["config"]["rounds"]
        assert 0 < result["min"] <= result["median"] <= result["max"]
    assert time_["ratios"]["tapegrad/numpy"] > 0
    assert time_["ratios"]["torch/numpy"] is None
    checked = data["workloads"]["W1"]["checked_against_numpy"]
    assert checked["tapegrad"]["max_rel_diff"] <= 1e-10


def test_w1_numpy_reference_gradient_matches_finite_differences(benchmarks):
    from benchmarks.workloads.w1_elementwise_chain import W1, initial_x

    case = W1.build("numpy")
    grad = case.outputs(case.run())["grad"]
    x0, eps = initial_x(W1.params), 1e-6
    numeric = np.empty_like(x0)
    for i in range(x0.size):
        step = np.zeros_like(x0)
        step[i] = eps
        numeric[i] = (_w1_loss(x0 + step, W1.params) - _w1_loss(x0 - step, W1.params)) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5)
    assert 1e-3 < np.abs(grad).min() and np.abs(grad).max() < 10   # no under/overflow


def _w1_loss(x, params):
    """W1's loss, written independently of the benchmark's NumPy case."""
    a, b = params["scale"], params["shift"]
    for _ in range(params["n_ops"] // len(params["cycle"])):
        x = np.tanh(np.sin(x) * a + b) - b
    return x.sum()


def test_a_result_that_differs_from_numpy_aborts_with_the_index(benchmarks):
    from benchmarks.runner import MismatchError, check_outputs
    from benchmarks.workloads.w1_elementwise_chain import W1

    reference = {"loss": 1.5, "grad": np.linspace(0.1, 1.0, 16)}
    assert check_outputs(W1, "tapegrad", dict(reference), reference) == 0.0

    wrong = dict(reference, grad=reference["grad"].copy())
    wrong["grad"][7] *= 1 + 1e-8
    with pytest.raises(MismatchError, match=r"tapegrad's 'grad'.*index \(7,\)"):
        check_outputs(W1, "tapegrad", wrong, reference)
    with pytest.raises(MismatchError, match="dtype float32"):
        check_outputs(W1, "torch", dict(reference, grad=reference["grad"].astype("f4")),
                      reference)
    with pytest.raises(MismatchError, match="outputs"):
        check_outputs(W1, "torch", {"loss": 1.5}, reference)


def test_every_other_workload_runs_and_checks_against_numpy(tmp_path):
    """W2, W3 and W5 in --quick mode: their outputs must match the NumPy reference."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--workloads", "W2,W5",
         "--libraries", "numpy,tapegrad", "--json", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    for key in ("W2", "W5"):
        assert data["workloads"][key]["checked_against_numpy"]
