"""Errors of the shape plugin's issue-14 functions that NumPy words unclearly (a bare
message without the function's name, or the wrong value)."""

import numpy as np
import pytest
import tapegrad as tg


def test_percentile_out_of_range_shows_q_as_given():
    # it showed q / 100 ("got 1.5" for 150)
    with pytest.raises(ValueError, match=r"^percentile: Percentiles must be in the range "
                                         r"\[0, 100\], got 150$"):
        tg.percentile(tg.ones(3), 150)
    with pytest.raises(ValueError, match=r"got \[50, -5\]$"):
        tg.nanpercentile(tg.ones(3), [50, -5])
    with pytest.raises(ValueError, match=r"^quantile: Quantiles must be in the range \[0, 1\], "
                                         r"got 1.5$"):
        tg.quantile(tg.ones(3), 1.5)


@pytest.mark.parametrize("directive", ["0,2,5", "0,2,2", "0,3,3"])
def test_r_trans1d_out_of_range_names_r_(directive):
    # NumPy (and tapegrad before): a bare "transpose: axes don't match array"
    with pytest.raises(ValueError):
        np.r_[directive, np.ones(2)]
    with pytest.raises(ValueError, match=r"^r_: trans1d \d is out of range for an item of 1 "
                                         r"dimension\(s\) \(shape \(2,\) made \d-d\)"):
        tg.r_[directive, tg.ones(2)]


@pytest.mark.parametrize("directive", ["0,2,-3", "0,2,-4", "0,3,-5", "0,3,-9", "0,4,1", "0,3,2"])
def test_r_trans1d_in_range_still_matches_numpy(directive):
    np.testing.assert_array_equal(tg.r_[directive, tg.arange(2.0)].numpy(),
                                  np.r_[directive, np.arange(2.0)])


def test_trace_and_ptp_errors_name_themselves():
    # they named the op they are made of (diagonal, max)
    with pytest.raises(ValueError, match=r"^trace: needs a tensor of at least 2 dimensions"):
        tg.trace(tg.ones(3))
    with pytest.raises(np.exceptions.AxisError, match=r"^trace: axis 2 is out of bounds"):
        tg.trace(tg.ones((2, 2)), axis1=0, axis2=2)
    with pytest.raises(np.exceptions.AxisError, match=r"^ptp: axis 3 is out of bounds for a "
                                                      r"tensor of dimension 2"):
        tg.ptp(tg.ones((2, 3)), axis=3)
    assert tg.ptp(tg.tensor([[1.0, 5.0], [2.0, 3.0]]), axis=(0, 1)).item() == 4.0
