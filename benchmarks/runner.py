"""The parent side: start one worker per library, interleave rounds, check every result.

For each workload, every worker first builds and warms up its case; then each round asks
numpy, tapegrad and torch in turn for one timed sample, so slow drifts of the machine
(other processes, frequency changes) land on all libraries alike. The first ``warmup``
rounds are thrown away. Every sample's outputs are checked against the reference (NumPy's,
or the library a workload names in ``Workload.reference``: W7's is tapegrad eager)
before the sample is kept; a mismatch raises ``MismatchError`` and nothing is reported.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .registry import LIBRARIES, REFERENCE, Outputs, Sample, Workload
from .worker import receive, send

REPO_ROOT = Path(__file__).resolve().parent.parent

# Thread pools of the BLAS/OpenMP runtimes NumPy and PyTorch may use; pinned for every
# worker alike (torch's own intra-op pool is set by the worker).
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                   "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "BLIS_NUM_THREADS")


class BenchmarkError(RuntimeError):
    """The run cannot go on (a worker failed, a required library is missing, ...)."""


class MismatchError(BenchmarkError):
    """A library's result differs from the reference's: its figures would be lies."""


# -- checking -------------------------------------------------------------------------


def check_outputs(workload: Workload, library: str, outputs: Outputs,
                  reference: Outputs) -> float:
    """Raise ``MismatchError`` unless ``outputs`` match ``reference`` for ``workload``.

    Each output must have the reference's shape and dtype and be ``allclose`` to it
    with the workload's ``rtol``/``atol``. Returns the largest relative difference seen
    (for the JSON report).
    """
    where = f"{workload.key} ({workload.title})"
    if set(outputs) != set(reference):
        raise MismatchError(
            f"{where}: {library} returned outputs {sorted(outputs)}, "
            f"the {workload.reference} reference {sorted(reference)}")
    worst = 0.0
    for name, ref_value in reference.items():
        ref, got = np.asarray(ref_value), np.asarray(outputs[name])
        if got.shape != ref.shape or got.dtype != ref.dtype:
            raise MismatchError(
                f"{where}: {library}'s {name!r} has shape {got.shape} and dtype "
                f"{got.dtype}; the {workload.reference} reference's has shape {ref.shape} and dtype "
                f"{ref.dtype}")
        if not np.allclose(got, ref, rtol=workload.rtol, atol=workload.atol):
            excess = np.abs(got - ref) - (workload.atol + workload.rtol * np.abs(ref))
            excess = np.where(np.isnan(excess), np.inf, excess)
            index = np.unravel_index(int(np.argmax(excess)), ref.shape) if ref.ndim else ()
            at = f"at index {tuple(int(i) for i in index)} " if ref.ndim else ""
            raise MismatchError(
                f"{where}: {library}'s {name!r} does not match the {workload.reference} reference "
                f"(rtol={workload.rtol:g}, atol={workload.atol:g}): {at}{library} gives "
                f"{got[index].item()!r}, {workload.reference} {ref[index].item()!r}. No figures are "
                f"reported for a wrong result.")
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.abs(got - ref) / np.abs(ref)
        rel = rel[np.isfinite(rel)]
        worst = max(worst, float(rel.max()) if rel.size else 0.0)
    return worst


# -- workers --------------------------------------------------------------------------


class WorkerProcess:
    """A running ``python -m benchmarks.worker LIBRARY`` and the pipes to it."""

    def __init__(self, library: str, threads: int):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        env.update({var: str(threads) for var in THREAD_ENV_VARS})
        if library == "jax":
            env["JAX_PLATFORMS"] = "cpu"
            if threads == 1:
                # XLA's CPU backend runs its own Eigen pool; one thread, like the others.
                env["XLA_FLAGS"] = " ".join(filter(None, (
                    env.get("XLA_FLAGS"), "--xla_cpu_multi_thread_eigen=false",
                    "intra_op_parallelism_threads=1")))
        self.library = library
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.worker", library, "--threads", str(threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO_ROOT, env=env)
        self.info: dict[str, Any] = {}

    def hello(self) -> dict[str, Any]:
        """Wait for the worker's greeting: whether its library imports, and its version."""
        kind, self.info = self._receive("start")
        if kind != "hello":
            raise BenchmarkError(f"{self.library} worker: unexpected greeting {kind!r}")
        return self.info

    def request(self, *message: Any) -> Any:
        """Send one request and return the worker's answer (raise if it failed)."""
        try:
            send(self.proc.stdin, message)
        except (BrokenPipeError, OSError) as exc:
            raise self._died(message[0]) from exc
        kind, value = self._receive(message[0])
        if kind == "error":
            raise BenchmarkError(
                f"the {self.library} worker failed on {' '.join(map(str, message))}:\n"
                f"{value}")
        return value

    def close(self) -> None:
        """Ask the worker to leave; kill it if it does not within a few seconds."""
        if self.proc.poll() is None:
            try:
                send(self.proc.stdin, ("exit",))
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()

    def _receive(self, what: str) -> Any:
        try:
            return receive(self.proc.stdout)
        except EOFError:
            raise self._died(what) from None

    def _died(self, what: str) -> BenchmarkError:
        code = self.proc.wait()
        return BenchmarkError(f"the {self.library} worker exited (code {code}) during "
                              f"{what!r}; its stderr is above")


# -- the run --------------------------------------------------------------------------


@dataclass
class LibraryRun:
    """What one library produced for one workload."""

    library: str
    calls_per_sample: int
    prepare: Mapping[str, Any]           # build and first-call times, calls per sample
    samples: list[Sample] = field(default_factory=list)   # kept rounds, in order
    max_rel_diff: float = 0.0            # largest relative difference from the reference seen


@dataclass
class WorkloadRun:
    """One workload's results: a ``LibraryRun`` per library, or why there is none."""

    workload: Workload
    runs: dict[str, LibraryRun] = field(default_factory=dict)
    not_available: dict[str, str] = field(default_factory=dict)   # library -> reason


@dataclass
class SuiteRun:
    config: Mapping[str, Any]
    libraries: dict[str, dict[str, Any]]          # library -> worker's info
    workloads: list[WorkloadRun]
    started: float
    seconds: float


def run_suite(workloads: Sequence[Workload], libraries: Sequence[str], *, rounds: int,
              warmup: int, min_time: float, threads: int,
              log: TextIO | None = None) -> SuiteRun:
    """Run ``workloads`` on ``libraries`` (NumPy, the reference, always comes first)."""
    order = [REFERENCE] + [lib for lib in LIBRARIES if lib in libraries and lib != REFERENCE]
    config = {"rounds": rounds, "warmup": warmup, "min_time_s": min_time,
              "threads": threads, "libraries": order,
              "workloads": [w.key for w in workloads]}
    started, clock = time.time(), time.perf_counter()
    workers = {lib: WorkerProcess(lib, threads) for lib in order}   # start in parallel
    try:
        infos = {lib: worker.hello() for lib, worker in workers.items()}
        for lib, info in infos.items():
            if not info["available"] and not LIBRARIES[lib].optional:
                raise BenchmarkError(f"{lib} cannot be imported ({info['reason']}); "
                                     f"it is required for every benchmark")
        live = {lib: w for lib, w in workers.items() if infos[lib]["available"]}
        results = [_run_workload(w, live, infos, rounds, warmup, min_time, log)
                   for w in workloads]
    finally:
        for worker in workers.values():
            worker.close()
    return SuiteRun(config=config, libraries=infos, workloads=results, started=started,
                    seconds=time.perf_counter() - clock)


def _run_workload(workload: Workload, workers: Mapping[str, WorkerProcess],
                  infos: Mapping[str, Mapping[str, Any]], rounds: int, warmup: int,
                  min_time: float, log: TextIO | None) -> WorkloadRun:
    result = WorkloadRun(workload)
    for lib, info in infos.items():
        if not info["available"]:
            result.not_available[lib] = f"not installed ({info['reason']})"
        elif lib not in workload.builders:
            result.not_available[lib] = f"{workload.key} has no {lib} implementation"
    ref_lib = workload.reference
    if ref_lib in result.not_available:
        raise BenchmarkError(f"{workload.key}: {result.not_available[ref_lib]}; the {ref_lib} "
                             f"reference is what every other result is checked against")
    # The reference runs first in every round, so its first sample is there to check against.
    active = sorted((lib for lib in workers if lib not in result.not_available),
                    key=lambda lib: lib != ref_lib)

    for lib in active:
        prepared = workers[lib].request("prepare", workload.key, min_time)
        result.runs[lib] = LibraryRun(lib, prepared["calls"], prepared)
    _say(log, f"{workload.key}: {workload.title}: " + ", ".join(
        f"{lib} x{result.runs[lib].calls_per_sample}" for lib in active) + " calls/sample")

    reference: Outputs | None = None
    total = warmup + rounds
    for round_no in range(total):
        for lib in active:
            sample = workers[lib].request("sample", workload.key)
            if reference is None:          # the reference's first sample (it runs first)
                reference = sample.outputs
            run = result.runs[lib]
            diff = check_outputs(workload, lib, sample.outputs, reference)
            run.max_rel_diff = max(run.max_rel_diff, diff)
            if round_no >= warmup:
                run.samples.append(sample)
        _progress(log, f"{workload.key}: round {round_no + 1}/{total}"
                       + (" (warm-up)" if round_no < warmup else ""))
    _progress(log, None)
    return result


def _say(log: TextIO | None, text: str) -> None:
    if log is not None:
        print(text, file=log, flush=True)


def _progress(log: TextIO | None, text: str | None) -> None:
    """A progress line that rewrites itself on a terminal (and stays quiet elsewhere)."""
    if log is None or not log.isatty():
        return
    print("\r\033[K" + (text or ""), end="" if text else "", file=log, flush=True)
