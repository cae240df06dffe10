"""tg.data: DataLoader batches and TensorDataset."""


import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import run_doctests
from tapegrad_nn import data


def rows(n, width=3):
    """Labels 0..n-1 and features whose first column is 10 * label (to check alignment)."""
    y = np.arange(n)
    x = y[:, None] * 10.0 + np.arange(width)
    return x, y


def epoch_labels(loader):
    return [yb.numpy().tolist() for _, yb in loader]


# -- batches ----------------------------------------------------------------------------------

@pytest.mark.parametrize("n, batch_size, drop_last, sizes", [
    (10, 3, False, [3, 3, 3, 1]),
    (10, 3, True, [3, 3, 3]),
    (9, 3, False, [3, 3, 3]),
    (9, 3, True, [3, 3, 3]),
    (2, 5, False, [2]),
    (2, 5, True, []),
    (7, 1, False, [1] * 7),
    (0, 4, False, []),
])
@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
def test_batches_cover_the_data_once_per_epoch(n, batch_size, drop_last, sizes, shuffle):
    x, y = rows(n)
    loader = tg.data.DataLoader(x, y, batch_size=batch_size, shuffle=shuffle,
                                drop_last=drop_last, seed=1)
    assert len(loader) == len(sizes)
    for _ in range(3):
        batches = list(loader)
        assert [len(yb) for _, yb in batches] == sizes
        assert all(isinstance(b, tuple) and len(b) == 2 for b in batches)
        seen = np.concatenate([yb.numpy() for _, yb in batches]) if batches else np.array([])
        assert len(set(seen.tolist())) == len(seen)                       # no repeats
        if not drop_last:
            assert sorted(seen.tolist()) == list(range(n))                # every row
        for xb, yb in batches:
            assert xb.shape == (len(yb), 3)
            np.testing.assert_array_equal(xb.numpy()[:, 0], yb.numpy() * 10.0)  # aligned


def test_without_shuffle_batches_come_in_order_every_epoch():
    x, y = rows(7)
    loader = tg.data.DataLoader(x, y, batch_size=3)
    for _ in range(2):
        assert epoch_labels(loader) == [[0, 1, 2], [3, 4, 5], [6]]


def test_a_single_array_gives_one_tuples():
    loader = tg.data.DataLoader(np.arange(5.0), batch_size=2)
    batches = list(loader)
    assert all(len(b) == 1 for b in batches)
    assert [xb.numpy().tolist() for (xb,) in batches] == [[0.0, 1.0], [2.0, 3.0], [4.0]]


def test_batches_keep_each_arrays_dtype_and_trailing_shape():
    n = 6
    arrays = [np.ones((n, 2, 3), np.float32), np.arange(n), np.arange(n, dtype=np.int32),
              np.arange(n) % 2 == 0, np.ones(n, np.float64), np.ones((n, 1), np.uint8)]
    loader = tg.data.DataLoader(*arrays, batch_size=4, shuffle=True, seed=0)
    for batch in loader:
        for a, t in zip(arrays, batch):
            assert isinstance(t, tg.Tensor)
            assert t.dtype == a.dtype
            assert t.shape[1:] == a.shape[1:]
            assert not t.requires_grad


def test_tensors_and_lists_are_accepted():
    x = tg.tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    y = [1, 0, 1, 0]
    (xb, yb), (xb2, yb2) = tg.data.DataLoader(x, y, batch_size=2)
    assert not xb.requires_grad and xb.grad_fn is None
    assert xb.numpy().tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert yb.dtype == np.int64 and yb2.numpy().tolist() == [1, 0]


def test_batches_are_copies_of_the_data():
    x = np.zeros((4, 2))
    t = tg.tensor(np.zeros(4))
    for xb, tb in tg.data.DataLoader(x, t, batch_size=2):
        xb += 1.0
        tb[0] = 5.0
    assert not x.any() and not t.numpy().any()
    (xr, _) = tg.data.TensorDataset(x, t)[1]
    xr += 1.0
    assert not x.any()


# -- shuffling ----------------------------------------------------------------------------------

def test_shuffle_is_reproducible_for_a_seed():
    x, y = rows(30)
    a = tg.data.DataLoader(x, y, batch_size=4, shuffle=True, seed=123)
    b = tg.data.DataLoader(x, y, batch_size=4, shuffle=True, seed=123)
    assert [epoch_labels(a) for _ in range(3)] == [epoch_labels(b) for _ in range(3)]


def test_each_epoch_has_a_new_order_and_seeds_differ():
    x, y = rows(30)
    loader = tg.data.DataLoader(x, y, batch_size=30, shuffle=True, seed=5)
    orders = [epoch_labels(loader)[0] for _ in range(4)]
    assert len({tuple(o) for o in orders}) == 4
    assert all(sorted(o) == list(range(30)) for o in orders)
    other = tg.data.DataLoader(x, y, batch_size=30, shuffle=True, seed=6)
    assert epoch_labels(other)[0] != orders[0]
    assert orders[0] != list(range(30))


def test_the_order_is_default_rng_seed_advanced_once_per_epoch():
    x, y = rows(20)
    loader = tg.data.DataLoader(x, y, batch_size=7, shuffle=True, seed=9)
    rng = np.random.default_rng(9)
    for _ in range(3):
        want = rng.permutation(20)
        assert sum(epoch_labels(loader), []) == want.tolist()


def test_an_epoch_that_is_not_finished_still_advances_the_order():
    x, y = rows(20)
    a = tg.data.DataLoader(x, y, batch_size=5, shuffle=True, seed=2)
    b = tg.data.DataLoader(x, y, batch_size=5, shuffle=True, seed=2)
    next(iter(a))                         # epoch 0, abandoned after one batch
    list(b)                               # epoch 0, complete
    assert epoch_labels(a) == epoch_labels(b)
    assert a.epoch == b.epoch == 2


def test_set_epoch_replays_and_jumps():
    x, y = rows(16)
    ref = tg.data.DataLoader(x, y, batch_size=16, shuffle=True, seed=4)
    epochs = [epoch_labels(ref) for _ in range(4)]
    loader = tg.data.DataLoader(x, y, batch_size=16, shuffle=True, seed=4)
    loader.set_epoch(2)
    assert loader.epoch == 2
    assert epoch_labels(loader) == epochs[2]
    assert epoch_labels(loader) == epochs[3]       # then carries on
    loader.set_epoch(0)
    assert epoch_labels(loader) == epochs[0]
    loader.set_epoch(1)                            # set_epoch of the next epoch: no change
    assert epoch_labels(loader) == epochs[1]


def test_without_a_seed_loaders_differ_and_the_seed_is_recorded():
    x, y = rows(50)
    a = tg.data.DataLoader(x, y, batch_size=50, shuffle=True)
    b = tg.data.DataLoader(x, y, batch_size=50, shuffle=True)
    assert isinstance(a.seed, int) and a.seed != b.seed
    first = epoch_labels(a)
    assert first != epoch_labels(b)
    replay = tg.data.DataLoader(x, y, batch_size=50, shuffle=True, seed=a.seed)
    assert epoch_labels(replay) == first


# -- TensorDataset --------------------------------------------------------------------------------

def test_tensor_dataset_reads_rows_together():
    x, y = rows(5)
    ds = tg.data.TensorDataset(x, y)
    assert len(ds) == 5
    xr, yr = ds[3]
    assert xr.numpy().tolist() == [30.0, 31.0, 32.0] and yr.item() == 3
    xb, yb = ds[[4, 0]]
    assert yb.numpy().tolist() == [4, 0] and xb.shape == (2, 3)
    xs, ys = ds[1:3]
    assert ys.numpy().tolist() == [1, 2]
    xt, yt = ds[tg.tensor([2])]
    assert yt.numpy().tolist() == [2]
    assert "TensorDataset" in repr(ds)


def test_a_loader_over_a_tensor_dataset_equals_one_over_its_arrays():
    x, y = rows(11)
    a = tg.data.DataLoader(tg.data.TensorDataset(x, y), batch_size=4, shuffle=True, seed=3)
    b = tg.data.DataLoader(x, y, batch_size=4, shuffle=True, seed=3)
    assert epoch_labels(a) == epoch_labels(b)
    assert len(a) == len(b) == 3


# -- errors ---------------------------------------------------------------------------------------

class _EpochSampler:
    """A sampler like DistributedSampler: its order depends on the epoch it is set to."""

    def __init__(self, n):
        self.dataset_size, self.epoch = n, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        return iter(np.roll(np.arange(self.dataset_size), self.epoch)[::-1].tolist())

    def __len__(self):
        return self.dataset_size


def test_a_sampler_gives_the_rows_of_each_batch_in_its_order():
    x, y = np.arange(10.0) * 10, np.arange(10)
    loader = tg.data.DataLoader(x, y, batch_size=3, sampler=[7, 2, 2, 9, 0])
    batches = [(xb.numpy().tolist(), yb.numpy().tolist()) for xb, yb in loader]
    assert batches == [([70.0, 20.0, 20.0], [7, 2, 2]), ([90.0, 0.0], [9, 0])]
    assert len(loader) == 2 and "sampler=[7, 2, 2, 9, 0]" in repr(loader)
    assert len(tg.data.DataLoader(x, batch_size=3, sampler=[7, 2, 2, 9], drop_last=True)) == 1


def test_set_epoch_is_passed_to_the_sampler_and_iterating_does_not_touch_it():
    sampler = _EpochSampler(4)
    loader = tg.data.DataLoader(np.arange(4), batch_size=4, sampler=sampler)
    first = [b.numpy().tolist() for (b,) in loader]
    assert first == [[3, 2, 1, 0]] and [b.numpy().tolist() for (b,) in loader] == first
    loader.set_epoch(1)
    assert sampler.epoch == 1 and [b.numpy().tolist() for (b,) in loader] == [[2, 1, 0, 3]]


@pytest.mark.parametrize("make, exc, match", [
    (lambda: tg.data.DataLoader(np.zeros(5), np.zeros(4)), ValueError,
     "DataLoader: the arrays must have the same length .*lengths \\[5, 4\\]"),
    (lambda: tg.data.DataLoader(np.zeros((3, 2)), np.zeros(3), np.zeros((2, 3))), ValueError,
     "lengths \\[3, 3, 2\\]"),
    (lambda: tg.data.TensorDataset(np.zeros(2), np.zeros(3)), ValueError,
     "TensorDataset: .*lengths \\[2, 3\\]"),
    (lambda: tg.data.DataLoader(), ValueError, "at least one array"),
    (lambda: tg.data.DataLoader(np.float64(3.0)), ValueError, "array 0 is a scalar"),
    (lambda: tg.data.DataLoader(np.array(["a", "b"])), TypeError, "array 0 has dtype <U1"),
    (lambda: tg.data.DataLoader(np.zeros(3), [[1], [2, 3], []]), TypeError,
     "array 1 cannot be converted"),
    (lambda: tg.data.DataLoader(np.zeros(3), batch_size=0), ValueError,
     "batch_size must be a positive int, got 0"),
    (lambda: tg.data.DataLoader(np.zeros(3), batch_size=2.5), TypeError, "batch_size"),
    (lambda: tg.data.DataLoader(np.zeros(3), batch_size=True), TypeError, "batch_size"),
    (lambda: tg.data.DataLoader(np.zeros(3), seed=1.5), TypeError, "seed must be"),
    (lambda: tg.data.DataLoader(np.zeros(3), seed=-1), ValueError, "seed must be"),
    (lambda: tg.data.DataLoader(tg.data.TensorDataset(np.zeros(3)), np.zeros(3)), TypeError,
     "TensorDataset must be the only argument"),
    (lambda: tg.data.DataLoader(np.zeros(3), sampler=[0, 1], shuffle=True), ValueError,
     "sampler= decides the order .*cannot be combined with shuffle=True"),
    (lambda: tg.data.DataLoader(np.zeros(3), sampler=3), TypeError,
     "sampler must be an iterable of row indices with a length.*got int"),
    (lambda: tg.data.DataLoader(np.zeros(3), sampler=_EpochSampler(5)), ValueError,
     "the sampler is for a data set of 5 rows, but the arrays have 3"),
    (lambda: list(tg.data.DataLoader(np.zeros(3), sampler=[0, 3])), IndexError,
     "the sampler gave row index 3, outside the data set's 3 rows"),
    (lambda: list(tg.data.DataLoader(np.zeros(3), sampler=[2, -1])), IndexError,
     "row index -1"),
])
def test_bad_arguments_raise_clear_errors(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_set_epoch_rejects_bad_epochs():
    loader = tg.data.DataLoader(np.zeros(3), shuffle=True, seed=0)
    with pytest.raises(ValueError, match="set_epoch: epoch must be an int >= 0"):
        loader.set_epoch(-1)
    with pytest.raises(TypeError, match="set_epoch"):
        loader.set_epoch(1.5)


def test_numpy_integer_batch_size_and_repr():
    loader = tg.data.DataLoader(np.zeros(10), batch_size=np.int64(4), seed=7)
    assert len(loader) == 3 and loader.batch_size == 4
    assert "batch_size=4" in repr(loader) and "seed=7" in repr(loader)


# -- the plugin's public names, docs ------------------------------------------------------------

def test_tg_data_is_this_module():
    assert tg.data is data
    assert tg.data.DataLoader is data.DataLoader and tg.data.TensorDataset is data.TensorDataset


def test_docstring_examples_run():
    result = run_doctests(data)
    assert result.attempted > 10
    assert result.failed == 0
