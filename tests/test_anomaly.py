"""Anomaly mode names the op and the user's line when a backward produces NaN or inf."""

import numpy as np
import pytest
import tapegrad as tg


def test_nan_gradient_is_reported_with_the_creating_line():
    x = tg.tensor([0.0, 1.0], requires_grad=True)
    with tg.detect_anomaly(), np.errstate(divide="ignore"):
        y = tg.sqrt(x)                      # d/dx sqrt(x) is inf at 0
        with pytest.raises(RuntimeError, match=r"(?s)'sqrt'.*NaN or inf.*test_anomaly.py"):
            y.backward(tg.ones(2))


def test_without_anomaly_mode_inf_gradients_pass_through_like_numpy():
    x = tg.tensor([0.0, 1.0], requires_grad=True)
    with np.errstate(divide="ignore"):
        tg.sqrt(x).backward(tg.ones(2))
    assert np.isinf(x.grad.numpy()[0])
