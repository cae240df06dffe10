"""tg.scipy.signal: convolve and correlate against scipy.signal for every mode in 1-D and
N-D, gradients against finite differences of SciPy's functions, errors."""

import numpy as np
import pytest
import scipy.signal as ss
import tapegrad as tg

SIG = tg.scipy.signal
RNG = np.random.default_rng(5)
CASES = [((7,), (3,)), ((3,), (6,)), ((4, 5), (2, 3)), ((3, 3), (4, 2)), ((2, 3, 4), (2, 2, 2))]


def fd(f, x, eps=1e-6):
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += eps
        lo[idx] -= eps
        out[idx] = (f(hi) - f(lo)) / (2 * eps)
    return out


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("s1,s2", CASES)
def test_matches_scipy_with_gradients(name, mode, s1, s2):
    a, b = RNG.standard_normal(s1), RNG.standard_normal(s2)
    if mode == "valid" and not (all(x >= y for x, y in zip(s1, s2))
                                or all(y >= x for x, y in zip(s1, s2))):
        with pytest.raises(ValueError, match="in mode 'valid' one input must be at least as large"):
            getattr(SIG, name)(tg.tensor(a), tg.tensor(b), mode=mode)
        return
    theirs = getattr(ss, name)
    want = theirs(a, b, mode=mode)
    at, bt = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
    out = getattr(SIG, name)(at, bt, mode=mode)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)
    w = RNG.standard_normal(want.shape)
    (out * tg.tensor(w)).sum().backward()
    np.testing.assert_allclose(at.grad.numpy(), fd(lambda x: np.sum(theirs(x, b, mode=mode) * w), a),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(bt.grad.numpy(), fd(lambda y: np.sum(theirs(a, y, mode=mode) * w), b),
                               rtol=1e-6, atol=1e-8)


def test_method_is_accepted_and_ignored():
    a, b = RNG.standard_normal(6), RNG.standard_normal(3)
    for method in ("auto", "direct", "fft"):
        np.testing.assert_allclose(SIG.convolve(tg.tensor(a), tg.tensor(b), method=method).numpy(),
                                   ss.convolve(a, b), rtol=1e-12)


def test_second_derivative_through_convolve():
    a = tg.tensor(RNG.standard_normal(5), requires_grad=True)
    b = tg.tensor(RNG.standard_normal(3), requires_grad=True)
    assert tg.gradgradcheck(lambda x, y: SIG.convolve(x, y, mode="same") ** 2, (a, b))


def test_errors_name_the_function():
    with pytest.raises(ValueError, match="convolve: mode must be 'full', 'same' or 'valid'"):
        SIG.convolve(tg.ones(3), tg.ones(2), mode="circular")
    with pytest.raises(ValueError, match="convolve: in1 and in2 must have the same number"):
        SIG.convolve(tg.ones(3), tg.ones((2, 2)))
    with pytest.raises(ValueError, match="convolve: method must be"):
        SIG.convolve(tg.ones(3), tg.ones(2), method="winograd")


def test_float32_stays_float32():
    out = SIG.convolve(tg.tensor(np.float32([1, 2, 3])), tg.tensor(np.float32([1, 1])))
    assert out.dtype == np.float32
