"""DataLoader's attributes that code ported from PyTorch reads (issue 15, "PyTorch habits"):
``dataset``, ``batch_size``, ``drop_last``, ``sampler``, ``num_workers``/``pin_memory``."""

import numpy as np
import pytest
import tapegrad as tg


def test_dataset_is_the_tensordataset_given():
    ds = tg.data.TensorDataset(np.arange(10.0).reshape(5, 2), np.arange(5))
    loader = tg.data.DataLoader(ds, batch_size=2)
    assert loader.dataset is ds
    assert len(loader.dataset) == 5


def test_dataset_over_arrays_reads_the_same_rows():
    x, y = np.arange(12.0).reshape(6, 2), np.array([3, 1, 4, 1, 5, 9])
    loader = tg.data.DataLoader(x, y, batch_size=4, drop_last=True)
    ds = loader.dataset
    assert isinstance(ds, tg.data.TensorDataset)
    assert len(ds) == 6 and ds is loader.dataset            # built once
    xr, yr = ds[4]
    np.testing.assert_array_equal(xr.numpy(), x[4])
    assert yr.item() == y[4]
    assert loader.batch_size == 4 and loader.drop_last is True and loader.sampler is None
    assert len(loader) == 1


def test_num_workers_and_pin_memory_are_accepted_and_change_nothing():
    x = np.arange(20.0).reshape(10, 2)
    plain = tg.data.DataLoader(x, batch_size=3, shuffle=True, seed=5)
    ported = tg.data.DataLoader(x, batch_size=3, shuffle=True, seed=5, num_workers=4,
                                pin_memory=True)
    assert ported.num_workers == 4 and ported.pin_memory is True
    assert plain.num_workers == 0 and plain.pin_memory is False
    for (a,), (b,) in zip(plain, ported):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_num_workers_must_be_a_non_negative_int(bad):
    with pytest.raises(ValueError, match="num_workers"):
        tg.data.DataLoader(np.zeros(3), num_workers=bad)
