"""tapegrad-distributed: data-parallel training across processes and machines over MPI.

Installing this distribution adds, through the entry-point group ``tapegrad``
(``distributed = "tapegrad_distributed.plugin"``), the public name ``tg.distributed``:

- ``tg.distributed.init()``: join the processes ``mpiexec`` started; returns the
  :class:`World` (``rank``, ``size``); ``get_rank()``, ``get_world_size()``;
- ``tg.distributed.DistributedDataParallel(module, bucket_cap_mb=25)``: gradients averaged
  across the ranks during ``backward()``, bucketed, each bucket's ``Iallreduce`` started
  as soon as its gradients are ready; ``no_sync()``;
- ``tg.distributed.DistributedSampler`` and ``DistributedDataLoader``: disjoint shards of
  the data, reshuffled every epoch from a seed;
- ``barrier()``, ``all_reduce(x, op)``, ``broadcast(x, root)``, ``cuda_aware()``.

MPI comes from mpi4py (imported by ``init()``, not before), with any MPI library: the
``mpich`` wheel from PyPI, or a cluster's Open MPI / MPICH / Intel MPI.

>>> import tapegrad as tg
>>> world = tg.distributed.init()          # without mpiexec: a world of one process
>>> world.rank, world.size
(0, 1)
"""

# NOTE: import tapegrad before anything of this package (see tapegrad_checkpoint): tapegrad
# loads its plugins on first import, and that must not start from inside ``plugin``.
import tapegrad as _tapegrad  # noqa: F401

from .ddp import CommStats, DistributedDataParallel
from .sampler import DistributedDataLoader, DistributedSampler
from .world import (
    DistributedError,
    World,
    all_reduce,
    barrier,
    broadcast,
    cuda_aware,
    get_rank,
    get_world_size,
    init,
    is_initialized,
)

__version__ = "0.1.0"

__all__ = ["init", "is_initialized", "get_rank", "get_world_size", "World", "barrier",
           "all_reduce", "broadcast", "cuda_aware", "DistributedError",
           "DistributedDataParallel", "CommStats", "DistributedSampler",
           "DistributedDataLoader"]

API = ("distributed",)
"""The public names this plugin adds to ``tapegrad``."""
