"""``tg.data``: mini-batches over in-memory arrays.

>>> import numpy as np, tapegrad as tg
>>> x = np.arange(10.0).reshape(5, 2)
>>> y = np.array([0, 1, 0, 1, 1])
>>> for xb, yb in tg.data.DataLoader(x, y, batch_size=2):
...     print(xb.shape, yb.tolist())
(2, 2) [0, 1]
(2, 2) [0, 1]
(1, 2) [1]

No worker processes: a batch is gathered with one NumPy fancy-indexing per array, which
for in-memory data is faster than handing work to another process.
"""

import numbers

import numpy as np
import tapegrad as tg

__all__ = ["TensorDataset", "DataLoader"]


class TensorDataset:
    """Arrays (NumPy arrays, tensors or nested lists) of equal first dimension, read
    together: ``dataset[i]`` is the tuple of the i-th rows, as tensors.

    Arrays are not copied (NumPy arrays and cpu tensors are shared); dtypes are kept, so
    integer labels stay integers. Tensors that require grad are read detached.

    >>> import numpy as np, tapegrad as tg
    >>> ds = tg.data.TensorDataset(np.zeros((3, 2), np.float32), np.array([7, 8, 9]))
    >>> len(ds)
    3
    >>> x1, y1 = ds[1]
    >>> x1.dtype, y1.item()
    (dtype('float32'), 8)
    >>> [t.shape for t in ds[[2, 0]]]
    [(2, 2), (2,)]
    """

    def __init__(self, *arrays):
        self.arrays = _check_arrays("TensorDataset", arrays)

    def __len__(self):
        return _length(self.arrays[0])

    def __getitem__(self, index):
        if isinstance(index, tg.Tensor):
            index = index.numpy()
        elif isinstance(index, list):
            index = np.asarray(index, dtype=np.intp)
        return tuple(_take(a, index) for a in self.arrays)

    def __repr__(self):
        shapes = ", ".join(f"{tuple(a.shape)} {a.dtype}" for a in self.arrays)
        return f"TensorDataset({shapes})"


class DataLoader:
    """Iterate over arrays of equal first dimension in mini-batches of tensors.

    Each batch is a tuple with one tensor per array (a 1-tuple for a single array): the
    same rows of each, in the same order. Batches are copies (changing one in place
    never changes the data) and keep each array's dtype. A NumPy array or cpu tensor gives
    cpu tensors; a tensor on another device gives batches on that device.

    Args:
        *arrays: NumPy arrays, tensors or nested lists, all with the same length; or a
            single :class:`TensorDataset`.
        batch_size: rows per batch (a positive int); the last batch may be smaller.
        shuffle: visit the rows in a new random order every epoch.
        drop_last: drop the last batch if it is smaller than `batch_size`.
        seed: seed of the shuffling (an int, or None for fresh OS entropy, then recorded in
            ``loader.seed``).
        sampler: the row indices of an epoch, instead of ``shuffle``: any iterable of
            ints with a length, iterated once per epoch (PyTorch's ``sampler=``; for
            example ``tg.distributed.DistributedSampler``). It decides the order, so
            ``shuffle=True`` with it is an error; ``loader.set_epoch(e)`` calls the
            sampler's ``set_epoch(e)`` when it has one (otherwise, as in PyTorch, call
            that yourself before each epoch).
        num_workers: accepted for code written for PyTorch's DataLoader and kept as an
            attribute; it changes nothing (no worker processes, see above): the batches
            are the same.
        pin_memory: accepted and kept likewise (no pinned memory); changes nothing.

    ``len(loader)`` is the number of batches per epoch. As PyTorch's, the loader has
    ``dataset`` (the TensorDataset given, or one over the arrays: ``len(loader.dataset)``
    is the number of rows), ``batch_size``, ``drop_last``, ``sampler`` (None unless
    given) and ``num_workers``.

    Shuffling uses one ``numpy.random.default_rng(seed)``, advanced by one
    ``permutation(n)`` at the start of each epoch (each ``iter(loader)``). So every epoch
    has its own order, and two loaders with the same seed give the same sequence of
    epochs: epoch ``e`` visits ``rng.permutation(n)`` drawn after ``e`` earlier draws.
    ``set_epoch(e)`` makes the next ``iter(loader)`` produce epoch ``e`` (to resume
    training, say), whatever was iterated before.

    >>> import numpy as np, tapegrad as tg
    >>> x = np.arange(6.0)
    >>> loader = tg.data.DataLoader(x, batch_size=4, shuffle=True, seed=0)
    >>> len(loader)
    2
    >>> epoch0 = np.concatenate([xb.numpy() for (xb,) in loader])
    >>> epoch1 = np.concatenate([xb.numpy() for (xb,) in loader])
    >>> sorted(epoch0.tolist()) == sorted(epoch1.tolist()) == x.tolist()
    True
    >>> bool((epoch0 == epoch1).all())          # a new order each epoch
    False
    >>> rng = np.random.default_rng(0)          # the documented order
    >>> bool((epoch0 == x[rng.permutation(6)]).all())
    True
    >>> loader.set_epoch(0)                     # replay epoch 0
    >>> bool((np.concatenate([xb.numpy() for (xb,) in loader]) == epoch0).all())
    True
    >>> len(loader.dataset), loader.batch_size, loader.drop_last
    (6, 4, False)
    """

    def __init__(self, *arrays, batch_size=1, shuffle=False, drop_last=False, seed=None,
                 sampler=None, num_workers=0, pin_memory=False):
        self._dataset = None
        if len(arrays) == 1 and isinstance(arrays[0], TensorDataset):
            self._dataset = arrays[0]
            arrays = arrays[0].arrays
        self.arrays = _check_arrays("DataLoader", arrays)
        if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) \
                or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be an int >= 0, got {num_workers!r}")
        self.num_workers = int(num_workers)
        self.pin_memory = bool(pin_memory)
        self.sampler = _check_sampler(sampler, shuffle, self.dataset_size)
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
            raise TypeError(
                f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        if batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size must be a positive int, got {batch_size}")
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        if seed is None:
            seed = np.random.SeedSequence().entropy
        elif isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(
                f"DataLoader: seed must be a non-negative int or None, got {seed!r}")
        elif seed < 0:
            raise ValueError(f"DataLoader: seed must be a non-negative int or None, got {seed}")
        self.seed = int(seed)
        self._rng = np.random.default_rng(self.seed)
        self._epoch = 0            # the epoch the next iter() produces
        self._drawn = 0            # permutations drawn from self._rng so far

    @property
    def dataset(self):
        """The data set read (PyTorch's ``loader.dataset``): the TensorDataset given, or
        a TensorDataset over the arrays (sharing them)."""
        if self._dataset is None:
            self._dataset = TensorDataset(*self.arrays)
        return self._dataset

    @property
    def dataset_size(self):
        """The number of rows (the arrays' common first dimension)."""
        return _length(self.arrays[0])

    @property
    def epoch(self):
        """The epoch the next ``iter(loader)`` produces (0 for the first)."""
        return self._epoch

    def __len__(self):
        n = self.dataset_size if self.sampler is None else len(self.sampler)
        b = self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def set_epoch(self, epoch):
        """Make the next ``iter(loader)`` produce epoch `epoch` (counted from 0).

        Epoch ``e``'s order depends only on the seed and ``e``; set_epoch of the next epoch
        is free, a jump replays the generator from the seed.
        """
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral):
            raise TypeError(f"DataLoader.set_epoch: epoch must be an int >= 0, got {epoch!r}")
        if epoch < 0:
            raise ValueError(f"DataLoader.set_epoch: epoch must be an int >= 0, got {epoch}")
        self._epoch = int(epoch)
        if self.sampler is not None and hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(self._epoch)

    def _order(self):
        n = self.dataset_size
        if self.sampler is not None:
            self._epoch += 1
            return _sampled_order(self.sampler, n)
        if not self.shuffle:
            self._epoch += 1
            return np.arange(n)
        if self._drawn > self._epoch:
            self._rng = np.random.default_rng(self.seed)
            self._drawn = 0
        while self._drawn < self._epoch:
            self._rng.permutation(n)
            self._drawn += 1
        order = self._rng.permutation(n)
        self._drawn += 1
        self._epoch += 1
        return order

    def __iter__(self):
        order = self._order()
        return self._batches(order)

    def _batches(self, order):
        n, b = len(order), self.batch_size
        stop = n - n % b if self.drop_last else n
        for start in range(0, stop, b):
            index = order[start:start + b]
            yield tuple(_take(a, index) for a in self.arrays)

    def __repr__(self):
        order = (f"shuffle={self.shuffle}, " if self.sampler is None
                 else f"sampler={self.sampler!r}, ")
        return (f"DataLoader({self.dataset_size} rows in {len(self.arrays)} arrays, "
                f"batch_size={self.batch_size}, {order}"
                f"drop_last={self.drop_last}, seed={self.seed})")


def _check_sampler(sampler, shuffle, n):
    if sampler is None:
        return None
    if shuffle:
        raise ValueError("DataLoader: sampler= decides the order of the rows, so it cannot be "
                         "combined with shuffle=True (shuffle in the sampler instead)")
    if not hasattr(sampler, "__iter__") or not hasattr(sampler, "__len__"):
        raise TypeError(f"DataLoader: sampler must be an iterable of row indices with a length "
                        f"(like tg.distributed.DistributedSampler), got {type(sampler).__name__}")
    size = getattr(sampler, "dataset_size", n)
    if size != n:
        raise ValueError(f"DataLoader: the sampler is for a data set of {size} rows, but the "
                         f"arrays have {n}")
    return sampler


def _sampled_order(sampler, n):
    """One epoch of the sampler's indices, checked: an index outside the data would be a
    silent wrap-around (negative) or an IndexError deep in a batch."""
    order = np.fromiter(iter(sampler), dtype=np.int64)
    if order.size != len(sampler):
        raise ValueError(f"DataLoader: the sampler gave {order.size} indices for an epoch, but "
                         f"its len() is {len(sampler)}")
    if order.size and (order.min() < 0 or order.max() >= n):
        bad = order[(order < 0) | (order >= n)][0]
        raise IndexError(f"DataLoader: the sampler gave row index {bad}, outside the data "
                         f"set's {n} rows")
    return order


def _check_arrays(who, arrays):
    if not arrays:
        raise ValueError(f"{who}: give at least one array")
    out = []
    for i, a in enumerate(arrays):
        if isinstance(a, tg.Tensor):
            a = a.detach()
            if a.device.name == "cpu":
                a = a.numpy()
        else:
            if isinstance(a, TensorDataset):
                raise TypeError(
                    f"{who}: a TensorDataset must be the only argument (got it as array {i} "
                    f"of {len(arrays)})")
            try:
                a = np.asarray(a)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"{who}: array {i} cannot be converted to an array: {exc}") from exc
        if a.dtype.kind not in "biufc":
            raise TypeError(
                f"{who}: array {i} has dtype {a.dtype}; only numbers and booleans can become "
                f"tensors")
        if a.ndim == 0:
            raise ValueError(
                f"{who}: array {i} is a scalar (shape ()); every array needs a first dimension "
                f"to index rows by")
        out.append(a)
    lengths = [a.shape[0] for a in out]
    if len(set(lengths)) != 1:
        raise ValueError(
            f"{who}: the arrays must have the same length (first dimension), got lengths "
            f"{lengths} (shapes {[tuple(a.shape) for a in out]})")
    return tuple(out)


def _length(a):
    return a.shape[0]


def _take(a, index):
    """Rows `index` of `a` (an ndarray, or a tensor on a device other than the cpu) as a
    new tensor (never a view of the data)."""
    if isinstance(a, np.ndarray):
        rows = a[index]
        if np.may_share_memory(rows, a):
            rows = rows.copy()
        return tg.asarray(rows)
    with tg.no_grad():
        return a[index]
