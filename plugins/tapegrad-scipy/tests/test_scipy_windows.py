"""tg.kaiser (tapegrad_scipy.windows) against np.kaiser: values, dtypes, the gradient in
beta."""

import numpy as np
import pytest
import scipy.special as sp
import tapegrad as tg


@pytest.mark.parametrize("M", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("beta", [0.0, 0.5, 5.0, 14.0])
def test_kaiser_matches_numpy(M, beta):
    got, want = tg.kaiser(M, beta), np.kaiser(M, beta)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-14)


def test_kaiser_gradient_in_beta_is_the_bessel_ratio_derivative():
    M, beta = 6, 2.5
    b = tg.tensor(beta, requires_grad=True)
    tg.kaiser(M, b).sum().backward()
    n = np.arange(M)
    alpha = (M - 1) / 2
    r = np.sqrt(1 - ((n - alpha) / alpha) ** 2)
    # d/db i0(b r) / i0(b) = (r i1(b r) i0(b) - i0(b r) i1(b)) / i0(b)^2
    want = (r * sp.i1(beta * r) * sp.i0(beta) - sp.i0(beta * r) * sp.i1(beta)) / sp.i0(beta) ** 2
    np.testing.assert_allclose(b.grad.item(), want.sum(), rtol=1e-12)
    assert tg.gradgradcheck(lambda b: tg.kaiser(M, b), (tg.tensor(beta, requires_grad=True),))


def test_kaiser_dtype_and_errors():
    assert tg.kaiser(4, tg.tensor(np.float32(2.0))).dtype == np.float32
    assert tg.kaiser(4, 2).dtype == np.float64
    with pytest.raises(ValueError, match="kaiser: beta must be a scalar"):
        tg.kaiser(4, [1.0, 2.0])
