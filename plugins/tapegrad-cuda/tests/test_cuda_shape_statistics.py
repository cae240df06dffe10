"""tapegrad-shape's joining and statistics compositions (median, quantile, r_, diff, ...)
on the cuda device (the simulator): the same values and gradients as on the cpu, and the
constants they make (ranges, coordinates, weights) land on the tensor's device."""

import numpy as np
import pytest
import tapegrad as tg

RNG = np.random.default_rng(5)

CASES = [
    ("median", lambda t: tg.median(t, axis=1)),
    ("nanmedian", lambda t: tg.nanmedian(tg.where(t > 1.0, np.nan, t), axis=0)),
    ("quantile", lambda t: tg.quantile(t, 0.3, axis=1, method="hazen")),
    ("percentile", lambda t: tg.percentile(t, [10, 90])),
    ("nanquantile", lambda t: tg.nanquantile(tg.where(t > 1.0, np.nan, t), 0.7, axis=1)),
    ("diff", lambda t: tg.diff(t, n=2, axis=1, prepend=0.5)),
    ("gradient", lambda t: tg.gradient(t, [0.0, 1.0, 1.5, 3.0], 2.0)[0]),
    ("average", lambda t: tg.average(t, axis=1, weights=[1.0, 2.0, 3.0, 4.0, 5.0])),
    ("nanvar", lambda t: tg.nanvar(tg.where(t > 1.0, np.nan, t), axis=1, ddof=1)),
    ("ptp", lambda t: tg.ptp(t, axis=0)),
    ("r_", lambda t: tg.r_[t[0], 0:3, 2.5, t[1]]),
    ("c_", lambda t: tg.c_[t[0], t[1]]),
    ("append", lambda t: tg.append(t, [1.0, 2.0])),
    ("column_stack", lambda t: tg.column_stack([t[0], [1.0, 2.0, 3.0, 4.0, 5.0]])),
    ("array_split", lambda t: tg.array_split(t, 3, axis=1)[1]),
    ("any", lambda t: tg.any(t > 0, axis=1).astype(t.dtype) * t[:, 0]),
]


@pytest.mark.parametrize("name,f", CASES, ids=[c[0] for c in CASES])
def test_matches_cpu_in_value_and_gradient(cuda, name, f):
    pytest.importorskip("tapegrad_shape", reason="tapegrad-shape is not installed")
    x = RNG.standard_normal((4, 5))
    cpu = tg.tensor(x, requires_grad=True)
    dev = tg.tensor(x, device="cuda", requires_grad=True)
    out_cpu, out_dev = f(cpu), f(dev)
    assert out_dev.device.name == "cuda"
    np.testing.assert_allclose(out_dev.cpu().numpy(), out_cpu.numpy(), rtol=1e-12, equal_nan=True)
    w = RNG.standard_normal(out_cpu.shape)
    tg.nansum(out_cpu * w).backward()
    tg.nansum(out_dev * tg.tensor(w, device="cuda")).backward()
    np.testing.assert_allclose(dev.grad.cpu().numpy(), cpu.grad.numpy(), rtol=1e-12)
