"""The process group: ``init()``, who am I, small collectives, and failing loudly.

Everything goes through one MPI communicator (``MPI.COMM_WORLD`` unless ``init(comm=...)``
gets another). mpi4py is imported by ``init()``, not when tapegrad loads, so tapegrad
works (and ``tg.distributed`` exists) where mpi4py or an MPI library is missing.

Note: [failing instead of hanging]
MPI collectives wait forever for a rank that never arrives. Two guards turn that into an
error on every rank:

- ``init()`` installs a ``sys.excepthook`` that, for an exception nobody caught, prints
  the traceback and calls ``comm.Abort()``: the MPI launcher then stops every rank at
  once. A rank killed by a signal is handled by the launcher itself (``mpiexec`` stops
  the job when one process dies).
- Every wait of this package polls ``Request.Test()`` against a deadline (``timeout``,
  300 s by default). A rank whose peers do not answer in time raises
  ``DistributedError`` naming what it waited for; nobody catches it, so the hook above
  aborts the job. A communicator with an unfinished collective cannot be used or even
  finalized safely afterwards, so an ``atexit`` handler also aborts it if the error was
  caught.
"""

import atexit
import numbers
import os
import sys
import time
import traceback

import numpy as np
import tapegrad as tg

__all__ = ["init", "is_initialized", "get_rank", "get_world_size", "World", "barrier",
           "all_reduce", "broadcast", "cuda_aware", "DistributedError"]

DEFAULT_TIMEOUT = 300.0
"""Seconds a rank waits for its peers before it gives up (``TAPEGRAD_DIST_TIMEOUT``
overrides it, ``init(timeout=...)`` overrides both)."""


class DistributedError(RuntimeError):
    """A collective could not complete: a peer died, raised, or did not arrive in time."""


class World:
    """What ``init()`` returns: this process's ``rank`` (0 .. ``size`` - 1), the ``size``
    of the world, the mpi4py communicator ``comm``, the ``timeout`` in seconds, and
    ``cuda_aware`` (whether the MPI library reads GPU memory directly).

    >>> import tapegrad as tg
    >>> world = tg.distributed.init()       # no launcher: a world of one process
    >>> world.rank, world.size
    (0, 1)
    """

    def __init__(self, comm, timeout):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.timeout = timeout
        self.cuda_aware = _detect_cuda_aware()
        self.broken = False          # a wait timed out: the communicator is unusable

    def __repr__(self):
        return (f"World(rank={self.rank}, size={self.size}, timeout={self.timeout:g}, "
                f"cuda_aware={self.cuda_aware})")


_WORLD = None


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise RuntimeError(
            f"tg.distributed needs mpi4py and an MPI library: pip install mpi4py mpich "
            f"(or use your cluster's MPI with pip install mpi4py); importing mpi4py.MPI "
            f"failed: {exc}") from exc
    return MPI


def init(timeout=None, comm=None):
    """Join the process group the MPI launcher started and return this process's
    :class:`World` (``rank``, ``size``). Calling it again returns the same world.

    Start the processes with ``mpiexec -n 4 python train.py``; without a launcher the
    world is this one process. ``timeout`` (seconds, default 300 or
    ``TAPEGRAD_DIST_TIMEOUT``) bounds every wait for the other ranks; past it this rank
    raises and the whole job is aborted. ``comm`` is an mpi4py communicator to use instead
    of ``MPI.COMM_WORLD``.

    >>> import tapegrad as tg
    >>> world = tg.distributed.init()
    >>> tg.distributed.get_rank(), tg.distributed.get_world_size()
    (0, 1)
    >>> tg.distributed.init() is world
    True
    """
    global _WORLD
    explicit = timeout is not None
    if timeout is None:
        timeout = float(os.environ.get("TAPEGRAD_DIST_TIMEOUT", DEFAULT_TIMEOUT))
    elif isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(f"init: timeout must be a number of seconds, got {timeout!r}")
    if not timeout > 0:
        raise ValueError(f"init: timeout must be positive, got {timeout}")
    if _WORLD is not None:
        if comm is not None and comm is not _WORLD.comm:
            raise RuntimeError("init: already initialized with another communicator")
        if explicit:
            _WORLD.timeout = float(timeout)
        return _WORLD
    MPI = _mpi()
    if comm is None:
        comm = MPI.COMM_WORLD
    elif not isinstance(comm, MPI.Comm):
        raise TypeError(f"init: comm must be an mpi4py communicator, got {type(comm).__name__}")
    world = World(comm, float(timeout))
    _WORLD = world
    if world.size > 1:
        _install_abort_guards(world)
    return world


def is_initialized():
    """Whether ``init()`` has run in this process.

    >>> import tapegrad as tg
    >>> world = tg.distributed.init()
    >>> tg.distributed.is_initialized()
    True
    """
    return _WORLD is not None


def _require(who):
    if _WORLD is None:
        raise RuntimeError(
            f"{who}: call tg.distributed.init() first (once per process, before building "
            f"DistributedDataParallel or samplers), and start the processes with "
            f"mpiexec -n N python your_script.py")
    return _WORLD


def get_rank():
    """This process's rank, 0 .. world size - 1 (requires ``init()``)."""
    return _require("get_rank").rank


def get_world_size():
    """The number of processes (requires ``init()``)."""
    return _require("get_world_size").size


# -- waiting with a deadline ----------------------------------------------------------

def _wait(world, request, what):
    """Complete `request`, polling it until the world's timeout; raise DistributedError
    (which aborts the job, see Note: [failing instead of hanging]) past it."""
    if request.Test():
        return
    deadline = time.monotonic() + world.timeout
    spins = 0
    while not request.Test():
        spins += 1
        if spins > 200:
            # NOTE: sleep between polls: with more ranks than cores (mpiexec -n 4 on two),
            # a rank spinning in Test() would starve the one it is waiting for.
            time.sleep(min(1e-3, 1e-5 * (spins - 200)))
            if time.monotonic() > deadline:
                world.broken = True
                raise DistributedError(
                    f"tg.distributed: rank {world.rank} of {world.size} waited "
                    f"{world.timeout:g} s for {what} and gave up: another rank died, raised, "
                    f"or is not calling the same collectives in the same order; aborting "
                    f"the job (set the limit with tg.distributed.init(timeout=...) or "
                    f"TAPEGRAD_DIST_TIMEOUT)")


def _sync_point(world, what):
    """Wait until every rank has reached this point (Ibarrier with the timeout), so the
    blocking collective that follows cannot hang on a missing rank."""
    if world.size > 1:
        _wait(world, world.comm.Ibarrier(), what)


def barrier():
    """Wait until every rank calls ``barrier()`` (with the timeout of ``init``)."""
    _sync_point(_require("barrier"), "the other ranks at barrier()")


# -- small collectives on arrays --------------------------------------------------------

_OPS = ("sum", "mean", "max", "min")


def _host_array(value, who):
    if isinstance(value, tg.Tensor):
        return np.array(value.detach().cpu().numpy(), copy=True), value
    if isinstance(value, (numbers.Number, np.ndarray, np.generic, list, tuple)):
        arr = np.array(value, copy=True)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{who}: expected numbers, got an array of dtype {arr.dtype}")
        return arr, value
    raise TypeError(f"{who}: expected a tensor, an ndarray or a number, got {type(value).__name__}")


def _like(arr, original):
    if isinstance(original, tg.Tensor):
        out = tg.tensor(arr)
        return out if original.device.name == "cpu" else out.to(original.device)
    if isinstance(original, np.ndarray):
        return arr
    return arr.item() if arr.ndim == 0 else arr


def all_reduce(value, op="mean"):
    """Combine `value` (a tensor, ndarray or number, the same shape on every rank) across
    the ranks with ``op`` ("sum", "mean", "max" or "min"); every rank gets the result, of
    the kind it gave (a new tensor: no graph, on the tensor's device).

    >>> import tapegrad as tg
    >>> world = tg.distributed.init()
    >>> tg.distributed.all_reduce(3.0, op="sum")            # the sum over a world of one
    3.0
    """
    world = _require("all_reduce")
    if op not in _OPS:
        raise ValueError(f"all_reduce: op must be one of {_OPS}, got {op!r}")
    arr, original = _host_array(value, "all_reduce")
    if op == "mean" and arr.dtype.kind not in "fc":       # (complex stays complex)
        arr = arr.astype(np.float64)
    MPI = _mpi()
    mpi_op = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]
    if world.size > 1:
        # NOTE: np.ascontiguousarray makes a 0-d array 1-d: reshape back
        flat = np.ascontiguousarray(arr).reshape(-1)
        _wait(world, world.comm.Iallreduce(MPI.IN_PLACE, flat, op=mpi_op),
              f"all_reduce({op}) of an array of shape {arr.shape}")
        arr = flat.reshape(arr.shape)
    if op == "mean":
        arr = arr / world.size
    return _like(arr, original)


def broadcast(value, root=0):
    """Rank `root`'s `value` (a tensor, ndarray or number) on every rank.

    >>> import numpy as np, tapegrad as tg
    >>> world = tg.distributed.init()
    >>> tg.distributed.broadcast(np.arange(3))
    array([0, 1, 2])
    """
    world = _require("broadcast")
    if isinstance(root, bool) or not isinstance(root, numbers.Integral) or not 0 <= root < world.size:
        raise ValueError(f"broadcast: root must be a rank in 0..{world.size - 1}, got {root!r}")
    arr, original = _host_array(value, "broadcast")
    if world.size > 1:
        header = np.array(arr.shape + (0,) * (8 - arr.ndim) + (arr.ndim,), np.int64) \
            if arr.ndim <= 8 else None
        if header is None:
            raise ValueError(f"broadcast: at most 8 dimensions, got shape {arr.shape}")
        _wait(world, world.comm.Ibcast(header, root=root), "broadcast (shape)")
        shape = tuple(int(s) for s in header[:int(header[-1])])
        if shape != arr.shape:
            raise ValueError(
                f"broadcast: rank {world.rank} gave shape {arr.shape} but root {root} gave "
                f"{shape}; every rank must give an array of the root's shape")
        flat = np.ascontiguousarray(arr).reshape(-1)
        _wait(world, world.comm.Ibcast(flat, root=root), f"broadcast of shape {arr.shape}")
        arr = flat.reshape(shape)
    return _like(arr, original)


# -- CUDA-aware MPI ---------------------------------------------------------------------

def _detect_cuda_aware():
    """Whether the loaded MPI library can read and write GPU memory itself.

    ``TAPEGRAD_CUDA_AWARE_MPI=0/1`` decides; otherwise ask the library through the
    ``MPIX_Query_cuda_support()`` extension that MPICH and Open MPI both export (mpi4py
    does not wrap it), found in the ``libmpi`` this process loaded.
    """
    forced = os.environ.get("TAPEGRAD_CUDA_AWARE_MPI")
    if forced is not None:
        return forced.strip() not in ("", "0", "false", "no")
    try:
        import ctypes
        with open("/proc/self/maps") as maps:
            libs = sorted({line.split()[-1] for line in maps
                           if "libmpi" in line and line.rstrip().endswith((".so", ".so.12",
                                                                            ".so.40", ".so.1"))})
        for path in libs:
            query = getattr(ctypes.CDLL(path), "MPIX_Query_cuda_support", None)
            if query is not None:
                return bool(query())
    except (OSError, ValueError):
        pass
    return False


def cuda_aware():
    """Whether gradients of GPU tensors are all-reduced straight from GPU memory (a
    CUDA-aware MPI build) rather than staged through host memory. Requires ``init()``.

    >>> import tapegrad as tg
    >>> world = tg.distributed.init()
    >>> tg.distributed.cuda_aware()      # the MPICH wheel from PyPI is not CUDA-aware
    False
    """
    return _require("cuda_aware").cuda_aware


# -- aborting ------------------------------------------------------------------------------

# NOTE: MPI_Abort makes the launcher (MPICH's hydra) kill every rank at once, and its proxy
# may die before it has forwarded what the ranks last wrote: without a pause the traceback
# and the "aborting" line were lost about one run in fifteen. Half a second lets it drain.
_ABORT_GRACE_S = 0.5


def _abort(world):
    sys.stdout.flush()
    sys.stderr.flush()
    time.sleep(_ABORT_GRACE_S)
    world.comm.Abort(1)


def _install_abort_guards(world):
    previous = sys.excepthook

    def abort_on_uncaught(exc_type, exc, tb):
        try:
            traceback.print_exception(exc_type, exc, tb)
            if not issubclass(exc_type, KeyboardInterrupt):
                sys.stderr.write(
                    f"tg.distributed: rank {world.rank} of {world.size} stopped on an "
                    f"uncaught {exc_type.__name__}; aborting all ranks\n")
        finally:
            _abort(world)
        previous(exc_type, exc, tb)        # not reached: Abort ends the process

    sys.excepthook = abort_on_uncaught

    def abort_if_broken():
        if world.broken:
            sys.stderr.write(f"tg.distributed: rank {world.rank}: the communicator was left "
                             f"in a failed collective; aborting all ranks\n")
            _abort(world)

    atexit.register(abort_if_broken)
