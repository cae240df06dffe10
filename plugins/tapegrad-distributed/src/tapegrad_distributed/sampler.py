"""Giving each rank its own share of the data: ``DistributedSampler`` (which rows) and
``DistributedDataLoader`` (``tg.data.DataLoader`` over those rows).

``tg.data.DataLoader(arrays, sampler=DistributedSampler(...))`` works as in PyTorch (call
``loader.set_epoch(e)`` or the sampler's before each epoch). ``DistributedDataLoader``
builds the sampler from the world and advances its epoch on every ``iter()`` by itself.
"""

import numbers

import numpy as np
from tapegrad_nn.data import DataLoader

from .world import _require

__all__ = ["DistributedSampler", "DistributedDataLoader"]


def _check_int(who, name, value, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{who}: {name} must be an int >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"{who}: {name} must be an int >= {low}, got {value}")
    return int(value)


class DistributedSampler:
    """The row indices of one rank's shard of a data set of `dataset` rows (an int, or
    anything with a length), for one epoch at a time.

    The shards of the ranks are disjoint and together cover the data set: epoch ``e``
    orders the rows by ``numpy.random.default_rng((seed, e)).permutation(n)`` (the same
    on every rank; ``shuffle=False`` keeps ``0 .. n-1``), and rank ``r`` takes every
    ``num_replicas``-th row of that order starting at ``r``. When ``n`` is not a multiple
    of the number of ranks, ``drop_last=True`` drops the last rows of the order, else the
    first rows are repeated at the end so every rank gets as many rows (as PyTorch does:
    the ranks then take the same number of steps). Call ``set_epoch(e)`` before each
    epoch for a new order; the data loader below does it for you.

    ``num_replicas`` and ``rank`` default to the world of ``tg.distributed.init()``.

    >>> import tapegrad as tg
    >>> [list(tg.distributed.DistributedSampler(10, num_replicas=3, rank=r, shuffle=False))
    ...  for r in range(3)]
    [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    >>> s = tg.distributed.DistributedSampler(10, num_replicas=2, rank=0, seed=1)
    >>> s.set_epoch(0); e0 = list(s)
    >>> s.set_epoch(1); e1 = list(s)
    >>> len(s), e0 != e1
    (5, True)
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        who = "DistributedSampler"
        if isinstance(dataset, numbers.Integral) and not isinstance(dataset, bool):
            n = _check_int(who, "the data set size", dataset, 0)
        elif hasattr(dataset, "__len__") and not isinstance(dataset, (str, bytes)):
            n = len(dataset)
        else:
            raise TypeError(f"{who}: dataset must be a number of rows or have a length, got "
                            f"{type(dataset).__name__}")
        if num_replicas is None or rank is None:
            world = _require(who + " (without num_replicas= and rank=)")
            num_replicas = world.size if num_replicas is None else num_replicas
            rank = world.rank if rank is None else rank
        self.num_replicas = _check_int(who, "num_replicas", num_replicas, 1)
        self.rank = _check_int(who, "rank", rank, 0)
        if self.rank >= self.num_replicas:
            raise ValueError(f"{who}: rank must be in 0..{self.num_replicas - 1}, got {rank}")
        self.seed = _check_int(who, "seed", seed, 0)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.dataset_size = n
        if self.drop_last:
            self.num_samples = n // self.num_replicas
        else:
            self.num_samples = -(-n // self.num_replicas)
        if self.num_samples == 0:
            raise ValueError(f"{who}: {n} rows cannot give each of {self.num_replicas} ranks "
                             f"a row with drop_last=True")
        self.total_size = self.num_samples * self.num_replicas
        self.epoch = 0

    def set_epoch(self, epoch):
        """Use epoch `epoch`'s order from now on (call it with the same value on every rank)."""
        self.epoch = _check_int("DistributedSampler.set_epoch", "epoch", epoch, 0)

    def indices(self):
        """This rank's row indices for the current epoch, as an int array."""
        n = self.dataset_size
        if self.shuffle:
            order = np.random.default_rng((self.seed, self.epoch)).permutation(n)
        else:
            order = np.arange(n)
        if self.total_size > n:
            reps = -(-(self.total_size - n) // n)
            order = np.concatenate([order] + [order] * reps)[:self.total_size]
        else:
            order = order[:self.total_size]
        return order[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self):
        return self.num_samples

    def __repr__(self):
        return (f"DistributedSampler({self.dataset_size} rows, rank {self.rank} of "
                f"{self.num_replicas}: {self.num_samples} rows, shuffle={self.shuffle}, "
                f"seed={self.seed}, epoch={self.epoch})")


class DistributedDataLoader(DataLoader):
    """``tg.data.DataLoader`` over this rank's shard: mini-batches of the rows a
    :class:`DistributedSampler` picks. Every ``iter(loader)`` is one epoch; epochs advance
    by themselves (``set_epoch(e)`` to jump), with the same order on every rank.

    With ``batch_size=b`` on each of ``R`` ranks, one step of all ranks together sees a
    global batch of ``R * b`` rows. Arguments are those of ``tg.data.DataLoader`` plus
    ``num_replicas``/``rank`` (default: the world), and ``sampler`` to give a
    ``DistributedSampler`` yourself (then ``shuffle``/``seed`` are the sampler's).

    >>> import numpy as np, tapegrad as tg
    >>> x, y = np.arange(10.0), np.arange(10) % 2
    >>> loader = tg.distributed.DistributedDataLoader(x, y, batch_size=2, shuffle=False,
    ...                                               num_replicas=2, rank=1)
    >>> [xb.tolist() for xb, yb in loader]
    [[1.0, 3.0], [5.0, 7.0], [9.0]]
    """

    def __init__(self, *arrays, batch_size=1, shuffle=True, drop_last=False, seed=0,
                 num_replicas=None, rank=None, sampler=None):
        super().__init__(*arrays, batch_size=batch_size, shuffle=False, drop_last=drop_last,
                         seed=seed)
        if sampler is None:
            sampler = DistributedSampler(self.dataset_size, num_replicas=num_replicas,
                                         rank=rank, shuffle=shuffle, seed=seed)
        elif not isinstance(sampler, DistributedSampler):
            raise TypeError(f"DistributedDataLoader: sampler must be a DistributedSampler, "
                            f"got {type(sampler).__name__}")
        elif sampler.dataset_size != self.dataset_size:
            raise ValueError(f"DistributedDataLoader: the sampler is for {sampler.dataset_size} "
                             f"rows but the arrays have {self.dataset_size}")
        self.sampler = sampler
        self.shuffle = sampler.shuffle
        self.seed = sampler.seed
        self._next_epoch = sampler.epoch

    @property
    def epoch(self):
        """The epoch the next ``iter(loader)`` produces."""
        return self._next_epoch

    def set_epoch(self, epoch):
        """Make the next ``iter(loader)`` produce epoch `epoch` (on every rank)."""
        self.sampler.set_epoch(epoch)
        self._next_epoch = self.sampler.epoch

    def __len__(self):
        n, b = len(self.sampler), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def __iter__(self):
        self.sampler.set_epoch(self._next_epoch)
        self._next_epoch += 1
        order = self.sampler.indices()
        return self._batches(order)

    def __repr__(self):
        return (f"DistributedDataLoader({self.dataset_size} rows in {len(self.arrays)} "
                f"arrays, batch_size={self.batch_size}, drop_last={self.drop_last}, "
                f"{self.sampler!r})")

