"""The benchmark suite runs, checks its results, and reports (benchmarks/, ci/bench).

The smoke test runs W1 in --quick mode with NumPy and tapegrad only: torch is a
benchmark-only dependency and no test needs it.
"""

import importlib.util
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


def _quick_w1(tmp_path, libraries):
    """`python -m benchmarks --quick` on W1 with `libraries`: (the finished process, the
    path of its JSON), after checking that it succeeded."""
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--workloads", "W1",
         "--libraries", libraries, "--json", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, out


def test_quick_w1_prints_ratios_and_writes_json(tmp_path):
    proc, out = _quick_w1(tmp_path, "numpy,tapegrad")

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


def test_w6_implementations_run_small_agree_and_checkpointing_holds_less(benchmarks):
    """W6 and W6-64 in-process at small sizes (the full ones take minutes per round): NumPy's
    and tapegrad's outputs agree for every variant (and each checkpointed variant equals its
    plain run bit for bit, which the cases check themselves), and every metric reads its
    figure from the case's extras."""
    from benchmarks.registry import Sample
    from benchmarks.runner import check_outputs
    from benchmarks.workloads.w6_checkpoint import W6, W6_64, segment_sizes

    assert (W6.params["layers"], W6_64.params["layers"]) == (32, 64)
    assert segment_sizes("SqrtN", 32, 4) == [6, 6, 5, 5, 5, 5]
    assert segment_sizes("SqrtN", 64, 4) == [8] * 8
    small = dict(W6.params, layers=9, width=64, batch=128)
    reference = None
    for library in ("numpy", "tapegrad"):
        case = W6.builders[library](small)
        case.run()
        outputs = case.outputs(case.run())            # the second call rotates the order
        reference = reference or outputs
        check_outputs(W6, library, outputs, reference)
        sample = Sample(seconds=0.0, calls=1, outputs=outputs, extras=dict(case.extras()))
        figures = {metric.name: metric.extract(sample) for metric in W6.metrics}
        assert all(value > 0 for value in figures.values()), figures
        # 9 activations of 128 x 64 float32 (32 KiB): plain keeps 9; SqrtN (3, 3, 3) the
        # output of segment 1, the input of the plain last segment and its 3 outputs: 5/9;
        # Every(4) (4, 4, 1): 3/9 (tapegrad adds a few KiB of nodes and tensors)
        assert figures["held plain"] * 2 ** 20 >= 9 * 32 * 1024       # reported in MiB
        assert 5 / 9 <= figures["held SqrtN/plain"] < 5 / 9 + 0.05
        assert 3 / 9 <= figures["held Every(4)/plain"] < 3 / 9 + 0.05


def test_w8_gpt_blocks_tapegrad_matches_the_numpy_backward(benchmarks):
    """W8 in-process at a small size: tapegrad's modules (MultiheadAttention, LayerNorm,
    GELU, Linear) give the hand-written NumPy forward and backward's loss and gradients."""
    from benchmarks.runner import check_outputs
    from benchmarks.workloads.w8_gpt_blocks import W8

    small = dict(W8.params, embed=32, batch=2, seq=8)
    reference = W8.builders["numpy"](small)
    reference = reference.outputs(reference.run())
    case = W8.builders["tapegrad"](small)
    check_outputs(W8, "tapegrad", case.outputs(case.run()), reference)
    assert abs(reference["loss"]) > 1 and np.abs(reference["grad x"]).max() > 0.1


def test_chart_of_ratios_is_drawn(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO_ROOT))
    from benchmarks import chart
    results = {"workloads": {
        "W1": {"metrics": {"time": {"unit": "us/op", "ratios": {
            "tapegrad/numpy": 2.8, "torch/numpy": 7.4, "tapegrad/torch": 0.38}}}},
        "W6": {"metrics": {"time plain": {"unit": "ms/step", "ratios": {"tapegrad/numpy": 1.0}},
                           "held plain": {"unit": "MiB", "ratios": {"tapegrad/numpy": 1.0}}}}}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(results))
    rows = chart.collect([path])
    assert rows == [("W1", {"tapegrad/numpy": 2.8, "torch/numpy": 7.4}),
                    ("W6\n(time plain)", {"tapegrad/numpy": 1.0})]
    out = tmp_path / "ratios.png"
    assert chart.main([str(path), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_w7_compiled_is_checked_against_tapegrad_eager(tmp_path, benchmarks):
    """W7 (the CNN step) has no NumPy case: its reference is tapegrad eager, and the
    compiled step's loss and gradients must match it (torch's too, where installed)."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--workloads", "W7",
         "--libraries", "numpy,tapegrad,tapegrad-compiled", "--json", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "every round checked against tapegrad" in proc.stdout
    w7 = json.loads(out.read_text())["workloads"]["W7"]
    assert w7["reference"] == "tapegrad"
    assert w7["metrics"]["time"]["results"]["numpy"] is None
    assert set(w7["checked_against_numpy"]) == {"tapegrad", "tapegrad-compiled"}
    assert w7["metrics"]["time"]["results"]["tapegrad-compiled"]["median"] > 0
    from benchmarks import chart
    assert chart.collect([out]) == []                 # no ratio to NumPy: no bars


def test_w7_outputs_are_the_loss_and_every_gradient(benchmarks):
    from benchmarks.runner import MismatchError, check_outputs
    from benchmarks.workloads.w7_cnn_training import W7

    case = W7.build("tapegrad")
    outputs = case.outputs(case.run())
    assert np.log(10) / 2 < outputs["loss"] < 2 * np.log(10)       # ~chance at the start
    grads = {k: v for k, v in outputs.items() if k.startswith("grad ")}
    assert len(grads) == 4 * 3 + 2                   # 3 x (conv w, b, bn w, b) + linear w, b
    assert all(v.dtype == np.float32 and np.abs(v).max() > 0 for v in grads.values())
    again = case.outputs(case.run())                 # the step restores its start
    assert check_outputs(W7, "tapegrad", again, outputs) == 0.0
    wrong = dict(outputs, loss=outputs["loss"] * 1.01)
    with pytest.raises(MismatchError, match="tapegrad reference"):
        check_outputs(W7, "torch", wrong, outputs)


@pytest.mark.needs_torch
def test_w7_torch_agrees_with_tapegrad(benchmarks):
    from benchmarks.runner import check_outputs
    from benchmarks.workloads.w7_cnn_training import W7

    ours, theirs = W7.build("tapegrad"), W7.build("torch")
    reference = ours.outputs(ours.run())
    check_outputs(W7, "torch", theirs.outputs(theirs.run()), reference)


def test_quick_w1_with_compiled_prints_its_first_call(tmp_path):
    """The table reports a compiler's one-off first call (tg.compile's recording; jax.jit's
    trace + XLA compile), which the medians leave out."""
    proc, out = _quick_w1(tmp_path, "numpy,tapegrad-compiled")
    first = json.loads(out.read_text())["workloads"]["W1"]["diagnostics"][
        "tapegrad-compiled"]["first_call_s"]
    assert first > 0
    match = re.search(r"first call \(.*\): tapegrad-compiled ([\d.]+) (ms|s)", proc.stdout)
    assert match, proc.stdout
    printed = float(match[1]) / (1e3 if match[2] == "ms" else 1)
    assert printed == pytest.approx(first, rel=0.01)


def test_jax_is_an_optional_library_with_the_issue_workloads(benchmarks):
    """JAX (jit) is the comparison issue 16 asks for on W1-W3; like torch it is optional:
    missing, its column reads n/a (W4's 200,000 unrolled ops would take XLA minutes to
    compile, so W4 has no JAX case; see benchmarks/README.md)."""
    from benchmarks.registry import LIBRARIES, all_workloads
    from benchmarks.report import RATIOS

    assert LIBRARIES["jax"].optional
    workloads = all_workloads()
    for key in ("W1", "W2", "W3"):
        assert "jax" in workloads[key].builders, key
    assert "jax" not in workloads["W4"].builders
    assert ("jax", "numpy") in RATIOS and ("tapegrad-compiled", "jax") in RATIOS


@pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                    reason="jax is a benchmark-only dependency (ci/bench installs it)")
def test_jax_cases_match_the_numpy_reference(benchmarks):
    from benchmarks.registry import all_workloads
    from benchmarks.runner import check_outputs

    for key in ("W1", "W2"):
        workload = all_workloads()[key]
        reference = workload.build("numpy")
        expected = reference.outputs(reference.run())
        case = workload.build("jax")
        check_outputs(workload, "jax", case.outputs(case.run()), expected)


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"),
                    reason="the OS has no CPU affinity call (the worker pins nothing)")
def test_a_one_thread_worker_runs_on_one_core():
    # the thread variables do not bind every library's pools (JAX's XLA CPU client used
    # both cores of a 2-CPU machine with them set): the worker pins itself to one CPU.
    code = ("import json, os; from benchmarks.worker import pin_to_cores; "
            "before = sorted(os.sched_getaffinity(0)); cores = pin_to_cores(1); "
            "print(json.dumps([before, cores, sorted(os.sched_getaffinity(0))]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    before, cores, after = json.loads(proc.stdout)
    if len(before) == 1:
        assert cores is None and after == before     # one CPU allowed: nothing to pin
    else:
        assert cores == before[:1] and after == cores
