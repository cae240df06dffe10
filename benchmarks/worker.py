"""The worker: one process per library, ``python -m benchmarks.worker LIBRARY``.

It imports only its own library, so one library's allocator state and garbage never
slow another's loop, and it lives for the whole run, so imports and warm-up happen once.

Protocol (``runner.WorkerProcess`` is the other end): length-prefixed pickles on
stdin/stdout. The worker first sends ``("hello", info)``; then answers each request with
``("ok", value)`` or ``("error", text)``:

- ``("prepare", key, min_time)``: build the workload's case, run it once to warm up, and
  choose how many calls one sample times so that it lasts about ``min_time`` seconds.
- ``("sample", key)``: time one sample; the value is a ``registry.Sample``.
- ``("exit",)``: leave.

Both ends are processes this package starts; pickle is not read from anywhere else.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import pickle
import struct
import sys
import time
import traceback
from typing import Any, BinaryIO

from .registry import LIBRARIES, Sample, all_workloads

_HEADER = struct.Struct(">Q")


def send(stream: BinaryIO, message: Any) -> None:
    """Write one length-prefixed pickled message and flush it."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def receive(stream: BinaryIO) -> Any:
    """Read one message written by ``send``; EOFError if the other end has gone."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("the other end closed the pipe")
    (size,) = _HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError("the other end closed the pipe mid-message")
    return pickle.loads(payload)


def pin_to_cores(threads: int) -> list[int] | None:
    """Restrict this worker to `threads` of the CPUs it may run on (the first ones), before
    any library starts a thread pool; returns them (None where the OS has no affinity
    call or the worker may use no more than that already).

    NOTE: the thread settings are not enough for every library: JAX 0.10's XLA CPU
    client ran W3's GEMMs on both cores of a 2-CPU machine with
    ``--xla_cpu_multi_thread_eigen=false`` set (1.9 CPU-seconds per wall second; 53 ms a
    step, 92 ms pinned to one core), so its ratios compared two cores with one. The
    workers run one at a time, so pinning them all to the same cores is fair."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if threads <= 0 or len(allowed) <= threads:
        return None
    cores = allowed[:threads]
    os.sched_setaffinity(0, cores)
    return cores


def library_info(library: str, threads: int) -> dict[str, Any]:
    """Import ``library`` and describe it: availability, version, relevant settings."""
    lib = LIBRARIES[library]
    try:
        module = __import__(lib.module)
    except Exception as exc:  # noqa: BLE001  (any import failure means "not available")
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"}
    info: dict[str, Any] = {"available": True,
                            "version": getattr(module, "__version__", "unknown")}
    if lib.module == "torch":
        # NOTE: one intra-op thread, like NumPy's elementwise loops (and the BLAS threads
        # the runner pins through the environment): the ratios compare per-op cost, not
        # how many cores a library grabs.
        module.set_num_threads(threads)
        info["threads"] = module.get_num_threads()
    if library == "jax":
        # NOTE: float64, so that W1/W4 compute what NumPy computes (JAX defaults to
        # float32 and would silently downcast); the XLA CPU thread pool is pinned by the
        # runner through XLA_FLAGS, which must be set before jax is imported.
        from .registry import import_jax
        import_jax()
        info["devices"] = [str(d) for d in module.devices()]
        info["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    if library == "tapegrad":
        from importlib.metadata import entry_points
        plugins = {}
        for ep in entry_points(group="tapegrad"):
            dist = ep.dist
            plugins[ep.name] = f"{dist.name} {dist.version}" if dist else ep.value
        info["plugins"] = plugins
    return info


class _Worker:
    """The state of one worker: the cases it built, and what it last computed."""

    def __init__(self, library: str):
        self.library = library
        self.workloads = all_workloads()
        self.cases: dict[str, Any] = {}     # workload key -> Case
        self.calls: dict[str, int] = {}     # workload key -> calls per sample
        # NOTE: the result of the latest call stays alive until the next call replaces
        # it, so every timed sample frees exactly `calls` results (tapegrad's and torch's
        # include a graph), the first one left over from the previous sample.
        self.last: dict[str, Any] = {}

    def prepare(self, key: str, min_time: float) -> dict[str, Any]:
        workload = self.workloads[key]
        start = time.perf_counter()
        case = workload.build(self.library)
        built = time.perf_counter()
        self.last[key] = case.run()                 # warm-up: first-call costs
        first = time.perf_counter()
        self.last[key] = case.run()
        one = time.perf_counter() - first
        self.cases[key] = case
        self.calls[key] = max(1, math.ceil(min_time / max(one, 1e-9)))
        return {"build_s": built - start, "first_call_s": first - built,
                "calls": self.calls[key]}

    def sample(self, key: str) -> Sample:
        case, calls = self.cases[key], self.calls[key]
        run, perf_counter = case.run, time.perf_counter
        gc.collect()                                # garbage from before is not charged
        collections = [gen["collections"] for gen in gc.get_stats()]
        start = perf_counter()
        for _ in range(calls):
            self.last[key] = run()
        elapsed = perf_counter() - start
        collections = [gen["collections"] - before
                       for gen, before in zip(gc.get_stats(), collections, strict=True)]
        extras = dict(case.extras()) if case.extras is not None else {}
        return Sample(seconds=elapsed / calls, calls=calls,
                      outputs=dict(case.outputs(self.last[key])), extras=extras,
                      gc_collections=tuple(n / calls for n in collections))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.worker")
    parser.add_argument("library", choices=sorted(LIBRARIES))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    # The protocol owns the real stdout; anything a library prints goes to stderr.
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    requests = sys.stdin.buffer

    cores = pin_to_cores(args.threads)
    info = library_info(args.library, args.threads)
    if cores is not None:
        info["cores"] = cores
    send(channel, ("hello", info))
    if not info["available"]:
        return 0
    worker = _Worker(args.library)
    while True:
        try:
            request = receive(requests)
        except EOFError:
            return 0
        command, *rest = request
        if command == "exit":
            return 0
        try:
            if command == "prepare":
                reply = worker.prepare(*rest)
            elif command == "sample":
                reply = worker.sample(*rest)
            else:
                raise ValueError(f"unknown request {command!r}")
        except Exception:  # noqa: BLE001  (reported to the parent, which aborts)
            send(channel, ("error", traceback.format_exc()))
        else:
            send(channel, ("ok", reply))


if __name__ == "__main__":
    raise SystemExit(main())
