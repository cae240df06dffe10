"""tg.distributed across real processes: each test launches ``mpiexec -n 2`` (or 4) on the
scripts in ``mpi_scripts/`` and checks what every rank reported.

They skip, saying why, when mpi4py, an MPI library or ``mpiexec`` is missing; the test
command installs all three (ci/requirements-test.txt), so there they run.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

SCRIPTS = Path(__file__).resolve().parent / "mpi_scripts"


def _mpiexec():
    """The mpiexec of the MPI that mpi4py loads: the one next to this interpreter (the
    mpich wheel's, in a virtual environment) first, then PATH's; TAPEGRAD_MPIEXEC wins."""
    if os.environ.get("TAPEGRAD_MPIEXEC"):
        return os.environ["TAPEGRAD_MPIEXEC"]
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def _env():
    # NOTE: drop the process-manager variables of an MPI this process may have started
    # (the doctests init a singleton world): a launched job must not try to join it.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "HYDRA_", "HYDI_", "OMPI_"))}
    return env


def _python():
    # The scripts run with this interpreter's flags (-S in tests/test_isolation.py).
    return [sys.executable] + (["-S"] if sys.flags.no_site else [])


_PROBE = None


def _mpi_or_skip():
    global _PROBE
    if _PROBE is None:
        mpiexec = _mpiexec()
        if mpiexec is None:
            _PROBE = "no mpiexec next to the interpreter or on PATH (pip install mpich)"
        else:
            try:
                out = subprocess.run(
                    [mpiexec, "-n", "2", *_python(), "-c",
                     "from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"],
                    capture_output=True, text=True, timeout=60, env=_env())
                _PROBE = "" if out.returncode == 0 else (
                    f"mpiexec -n 2 cannot run mpi4py here: {(out.stderr or out.stdout)[-500:]}")
            except (OSError, subprocess.TimeoutExpired) as exc:
                _PROBE = f"mpiexec -n 2 failed: {exc}"
    if _PROBE:
        pytest.skip(_PROBE)
    return _mpiexec()


def run_mpi(n, script, *args, timeout=60):
    mpiexec = _mpi_or_skip()
    start = time.monotonic()
    out = subprocess.run([mpiexec, "-n", str(n), *_python(), str(SCRIPTS / script), *args],
                         capture_output=True, text=True, timeout=timeout, env=_env())
    return out, time.monotonic() - start


def _reports(out, folder, n):
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return [json.loads((folder / f"rank{r}.json").read_text()) for r in range(n)]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("two_ranks")
    out, _ = run_mpi(2, "ddp_checks.py", str(folder))
    return _reports(out, folder, 2)


# -- the same training as one process ------------------------------------------------------

def test_two_ranks_train_the_digits_mlp_to_the_parameters_of_one_process(two_ranks):
    for rep in two_ranks:
        assert rep["size"] == 2 and rep["steps"] == 5 and rep["buckets"] > 1
        assert rep["start_equal_to_rank0"]          # rank 0's weights were broadcast
        assert rep["moved"] > 1e-2                  # the training did change the weights
        assert rep["max_param_diff"] < 1e-6, rep["max_param_diff"]


def test_four_ranks_train_the_digits_mlp_to_the_parameters_of_one_process(tmp_path):
    out, _ = run_mpi(4, "ddp_checks.py", str(tmp_path), "--only", "equivalence", timeout=90)
    for rep in _reports(out, tmp_path, 4):
        assert rep["size"] == 4 and rep["steps"] == 5 and rep["start_equal_to_rank0"]
        assert rep["max_param_diff"] < 1e-6, rep["max_param_diff"]


def test_bytes_per_step_is_every_gradient_once(two_ranks):
    rep = two_ranks[0]
    assert rep["bytes_per_step"] == 8 * rep["n_params"]      # float64


def test_no_sync_accumulates_locally_and_reduces_the_sum_once(two_ranks):
    for rep in two_ranks:
        assert rep["no_sync_allreduces"] == 0
        assert rep["no_sync_steps"] == 1
        assert rep["no_sync_grad_diff"] < 1e-10


# -- overlap -------------------------------------------------------------------------------

def test_bucket_allreduces_start_before_backward_ends(two_ranks):
    for rep in two_ranks:
        n = rep["n_buckets_overlap"]
        assert n >= 6
        # the first bucket (the last layers) starts before the first layer's gradient
        # exists, and all but the last bucket start before the last gradient is computed
        assert rep["bucket0_start_index"] < rep["first_layer_grad_index"]
        assert rep["starts_before_last_grad"] == n - 1
        assert rep["bucket0_start_index"] < rep["returned_index"]
        events = rep["overlap_events"]
        t_start0 = next(t for t, k, w in events if k == "allreduce_start" and w == 0)
        t_last_grad = max(t for t, k, w in events if k == "grad_ready")
        assert t_start0 < t_last_grad
        # and the gradients are final before backward() returns
        kinds = [k for _, k, _ in events]
        assert kinds.index("synced") < rep["returned_index"]


def test_some_allreduces_complete_while_backward_still_runs(two_ranks):
    # polling from the hooks moves the collectives forward during backward
    assert max(rep["done_before_last_grad"] for rep in two_ranks) >= 1


# -- data ------------------------------------------------------------------------------------

def test_sampler_shards_are_disjoint_cover_the_data_and_reshuffle_per_epoch(two_ranks):
    epochs = [rep["sampler_epochs"] for rep in two_ranks]
    for e in range(2):
        a, b = epochs[0][e], epochs[1][e]
        assert len(a) == len(b) == 52                 # 103 rows: one repeated to even out
        assert set(a) | set(b) == set(range(103))
        assert len(set(a) & set(b)) <= 1
    assert epochs[0][0] != epochs[0][1]


# -- errors ------------------------------------------------------------------------------------

def test_different_models_on_the_ranks_raise_on_every_rank(two_ranks):
    for rep in two_ranks:
        msg = rep["mismatch_error"]
        assert "rank 0 has parameter 'weight' of shape (3, 4)" in msg
        assert "rank 1 has parameter 'weight' of shape (4, 4)" in msg
        assert "rank 1 has 4" in rep["count_mismatch_error"]


def test_unused_parameters_raise_a_clear_error_or_count_as_zero(two_ranks):
    for rep in two_ranks:
        assert "b.bias, b.weight" in rep["unused_error"]
        assert "find_unused_parameters=True" in rep["unused_error"]
        grads = rep["unused_grads"]
        assert np.allclose(grads["module.a.bias"], 4.5) and np.allclose(grads["module.b.bias"], 1.5)
        after = rep["unused_grads_after_zero"]
        assert np.allclose(after["module.a.bias"], 3.0) and np.allclose(after["module.b.weight"], 0.0)
    assert two_ranks[0]["unused_grads"] == two_ranks[1]["unused_grads"]


@pytest.mark.parametrize("mode, message", [
    ("raise", "rank 1 of 2 stopped on an uncaught ValueError; aborting all ranks"),
    ("hang", "rank 0 of 2 waited 3 s for the gradient all-reduce of bucket 0"),
    ("die", None),
])
def test_a_failing_rank_stops_the_others_quickly(mode, message):
    out, seconds = run_mpi(2, "failures.py", mode, timeout=60)
    text = out.stdout + out.stderr
    assert out.returncode != 0, text[-3000:]
    assert "finished all steps" not in text
    assert seconds < 30, seconds
    if message:
        assert message in text, text[-3000:]


# -- the example program -------------------------------------------------------------------

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "train_digits_ddp.py"


@pytest.mark.skipif(not EXAMPLE.exists(), reason="examples/train_digits_ddp.py is not here")
def test_the_digits_example_trains_on_two_ranks():
    mpiexec = _mpi_or_skip()
    out = subprocess.run([mpiexec, "-n", "2", *_python(), str(EXAMPLE), "--epochs", "2"],
                         capture_output=True, text=True, timeout=120, env=_env())
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "2 rank(s), global batch 64 = 2 x 32" in out.stdout
    assert "the 2 ranks hold the same weights" in out.stdout
    acc = float(out.stdout.split("epoch  2")[1].split("test accuracy")[1].split()[0])
    assert acc > 0.7


def test_tg_grad_gives_each_rank_its_own_gradients_and_leaves_grad_alone(two_ranks):
    for rep in two_ranks:
        assert rep["tg_grad_local_diff"] == 0.0
        assert rep["tg_grad_left_grad_none"] and rep["tg_grad_steps"] == 0
        assert rep["tg_grad_then_backward_diff"] < 1e-12, rep["tg_grad_then_backward_diff"]
