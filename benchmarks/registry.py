"""The benchmark vocabulary: libraries, workloads, cases and metrics.

A **workload** is one fixed computation from DESIGN.md §8 (W1, W2, ...). For each
**library** it has a *builder*: a function that takes the workload's parameters, does
all set-up (data, parameters, imports) and returns a **case**. A case's ``run()`` is the
timed step (one forward + backward); ``outputs(result)`` turns what ``run()`` returned
into plain NumPy values, outside the timed region, so the parent can check them against
the NumPy reference. A **metric** turns one timed sample into one reported figure
(e.g. microseconds per op).

Adding a workload is one module in ``benchmarks/workloads/``::

    W7 = register(Workload(key="W7", title="...", params={...},
                           metrics=(time_per("op", 1000),)))

    @W7.implementation("numpy")
    def _numpy(params):
        ...
        return Case(run=step, outputs=lambda result: {"grad": result})

plus one ``@W7.implementation(...)`` each for ``tapegrad`` and ``torch``, and an import
line in ``benchmarks/workloads/__init__.py``. A library without a builder for a workload
reports "n/a" for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Outputs = Mapping[str, Any]          # output name -> float or numpy array
Builder = Callable[[Mapping[str, Any]], "Case"]

REFERENCE = "numpy"


# -- libraries ------------------------------------------------------------------------


@dataclass(frozen=True)
class Library:
    """A library a workload can be written in.

    ``optional`` libraries that fail to import are reported as "n/a"; a required one
    that fails to import aborts the run.
    """

    name: str            # the key used everywhere ("numpy", "tapegrad", "torch")
    module: str          # what the worker imports to check that it is there
    optional: bool       # missing -> "n/a" instead of an error
    description: str


LIBRARIES: dict[str, Library] = {
    lib.name: lib
    for lib in (
        Library("numpy", "numpy", False,
                "NumPy with a hand-written backward: the floor, no framework overhead"),
        Library("tapegrad", "tapegrad", False, "tapegrad, the library under test"),
        Library("tapegrad-compiled", "tapegrad", False,
                "tapegrad with the step under tg.compile (recorded once, then replayed)"),
        Library("tapegrad-fwd-over-rev", "tapegrad", False,
                "tapegrad's Hessian as forward mode over the gradient, one tangent per "
                "column (W5)"),
        Library("tapegrad-vmap", "tapegrad", False,
                "tapegrad with the transform vectorized by tg.vmap (W5: forward over "
                "reverse over a batch of tangents; W9: vmap(grad))"),
        Library("tapegrad-vmap-compiled", "tapegrad", False,
                "the tapegrad-vmap call under tg.compile (recorded once, then replayed)"),
        Library("torch", "torch", True, "PyTorch on the CPU (optional)"),
        Library("torch-func", "torch", True,
                "torch.func's transforms on the CPU (W5: torch.func.hessian; W9: "
                "vmap(grad)) (optional)"),
        Library("jax", "jax", True,
                "JAX on the CPU, the step under jax.jit (optional; float64 enabled)"),
    )
}


def import_jax():
    """jax, with float64 enabled (JAX defaults to float32 and would silently compute the
    float64 workloads in float32); called by every JAX builder."""
    import jax
    jax.config.update("jax_enable_x64", True)
    return jax


# -- cases and metrics ----------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One workload, built and ready to time, in one library (lives in a worker).

    run:     the timed step; returns whatever ``outputs`` needs (keep conversions out).
    outputs: result of ``run()`` -> {name: float | ndarray}, compared with the reference.
    extras:  optional, called after a timed sample: {name: float} of untimed measurements
             (e.g. bytes of memory held) that metrics can read.
    """

    run: Callable[[], Any]
    outputs: Callable[[Any], Outputs]
    extras: Callable[[], Mapping[str, float]] | None = None


@dataclass(frozen=True)
class Sample:
    """One timed sample, as the worker sends it back."""

    seconds: float                   # wall time of one ``run()``, averaged over ``calls``
    calls: int                       # how many ``run()`` calls the sample timed
    outputs: Outputs                 # outputs of the last call
    extras: Mapping[str, float] = field(default_factory=dict)
    gc_collections: tuple[float, ...] = ()   # cyclic-GC runs per call, by generation


@dataclass(frozen=True)
class Metric:
    """A reported figure, computed from one sample; lower is better."""

    name: str                            # "time", "peak memory", ...
    unit: str                            # "us/op", "ms/step", "MiB", ...
    extract: Callable[[Sample], float]


def time_per(what: str, count: int, *, unit: str = "us") -> Metric:
    """Wall time of one ``run()`` divided by ``count`` (e.g. per op of a chain)."""
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}[unit] / count
    return Metric("time", f"{unit}/{what}", lambda sample: sample.seconds * scale)


# -- workloads ------------------------------------------------------------------------


@dataclass
class Workload:
    """A fixed computation, implemented once per library.

    Outputs of every library must match the reference library's (NumPy's unless
    ``reference`` says otherwise: a workload whose hand-written NumPy version would be no
    more trustworthy than the library under test) within ``rtol``/``atol``
    (``numpy.allclose`` semantics) or the run aborts.
    """

    key: str                                 # "W1"
    title: str                               # one line, for the table
    description: str                         # what it measures and why, for --list / JSON
    params: Mapping[str, Any]                # fixed sizes and constants, passed to builders
    metrics: tuple[Metric, ...]
    rtol: float = 1e-10
    atol: float = 0.0
    reference: str = REFERENCE               # the library every other one is checked against
    builders: dict[str, Builder] = field(default_factory=dict)

    def implementation(self, library: str) -> Callable[[Builder], Builder]:
        """Decorator: register ``builder(params) -> Case`` for ``library``."""
        if library not in LIBRARIES:
            raise ValueError(f"{self.key}: unknown library {library!r}; "
                             f"known: {', '.join(LIBRARIES)}")

        def decorate(builder: Builder) -> Builder:
            if library in self.builders:
                raise ValueError(f"{self.key}: two implementations for {library!r}")
            self.builders[library] = builder
            return builder

        return decorate

    def build(self, library: str) -> Case:
        """The case for ``library`` (called inside that library's worker)."""
        return self.builders[library](self.params)


WORKLOADS: dict[str, Workload] = {}


def register(workload: Workload) -> Workload:
    """Add ``workload`` to the suite (in the order modules register them)."""
    if workload.key in WORKLOADS:
        raise ValueError(f"workload {workload.key} registered twice")
    WORKLOADS[workload.key] = workload
    return workload


def all_workloads() -> dict[str, Workload]:
    """Every registered workload, by key (importing the workload modules first)."""
    from . import workloads  # noqa: F401  (registers on import)
    return WORKLOADS
