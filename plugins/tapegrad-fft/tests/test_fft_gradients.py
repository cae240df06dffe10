"""tg.fft's gradients against complex finite differences of np.fft itself (the real loss
L = Re(sum(conj(w) * f(z))), perturbing real and imaginary parts separately), first and
second order, with the core alone (backward(gradient=..., create_graph=True))."""

import numpy as np
import pytest
import tapegrad as tg

RNG = np.random.default_rng(1234)


def _cplx(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def _fd_grad(f, z, w, eps=1e-5):
    """dL/dRe z + 1j dL/dIm z (dL/dz for real z) of L = Re(sum(conj(w) * f(z)))."""
    def loss(v):
        return np.real(np.sum(np.conj(w) * f(v)))
    out = np.zeros(z.shape, dtype=complex if np.iscomplexobj(z) else float)
    flat = out.reshape(-1)
    parts = (1.0, 1j) if np.iscomplexobj(z) else (1.0,)
    for j in range(z.size):
        for p in parts:
            d = np.zeros(z.size, dtype=z.dtype)
            d[j] = eps * p
            d = d.reshape(z.shape)
            diff = (loss(z + d) - loss(z - d)) / (2 * eps)
            flat[j] += diff * (1.0 if p == 1.0 else 1j)
    return out


# (name, np function, input kind, keyword arguments): odd/even lengths, n cropping and
# padding, every norm, negative axes; irfft/hfft with odd and even n (Nyquist bin or not).
CASES = []
for norm in (None, "ortho", "forward"):
    CASES += [
        ("fft", "complex", (5,), {"norm": norm}),
        ("fft", "real", (2, 6), {"n": 4, "norm": norm}),
        ("fft", "complex", (3, 4), {"n": 7, "axis": 0, "norm": norm}),
        ("ifft", "complex", (6,), {"n": 9, "norm": norm}),
        ("ifft", "complex", (4, 3), {"n": 2, "axis": -2, "norm": norm}),
        ("rfft", "real", (7,), {"norm": norm}),
        ("rfft", "real", (2, 6), {"norm": norm}),
        ("rfft", "real", (3, 5), {"n": 8, "axis": -1, "norm": norm}),
        ("rfft", "real", (6, 2), {"n": 3, "axis": 0, "norm": norm}),
        ("irfft", "complex", (5,), {"norm": norm}),
        ("irfft", "complex", (5,), {"n": 9, "norm": norm}),
        ("irfft", "complex", (2, 4), {"n": 4, "norm": norm}),
        ("irfft", "complex", (3, 4), {"n": 13, "axis": 0, "norm": norm}),
        ("irfft", "complex", (6,), {"n": 3, "norm": norm}),
        ("irfft", "real", (5,), {"norm": norm}),
        ("hfft", "complex", (4,), {"norm": norm}),
        ("hfft", "complex", (4,), {"n": 7, "norm": norm}),
        ("hfft", "complex", (2, 5), {"n": 12, "axis": 1, "norm": norm}),
        ("ihfft", "real", (6,), {"norm": norm}),
        ("ihfft", "real", (5, 2), {"n": 9, "axis": 0, "norm": norm}),
        ("ihfft", "real", (7,), {"n": 4, "norm": norm}),
        ("fftn", "complex", (2, 3, 4), {"axes": (0, 2), "norm": norm}),
        ("ifftn", "complex", (3, 4), {"s": (5, 2), "axes": (0, 1), "norm": norm}),
        ("fft2", "real", (3, 4), {"norm": norm}),
        ("ifft2", "complex", (2, 3), {"axes": (1, 1), "norm": norm}),
        ("rfftn", "real", (3, 4), {"norm": norm}),
        ("rfft2", "real", (3, 5), {"s": (4, 6), "norm": norm}),
        ("irfftn", "complex", (3, 4), {"norm": norm}),
        ("irfft2", "complex", (4, 3), {"s": (3, 5), "norm": norm}),
        ("irfftn", "complex", (2, 3, 3), {"s": (2, 4), "axes": (0, -1), "norm": norm}),
    ]
CASES += [("fftshift", "real", (5, 4), {}), ("fftshift", "complex", (3, 4), {"axes": 0}),
          ("ifftshift", "complex", (5, 2), {"axes": (-1, 0)})]


def _input(kind, shape):
    return _cplx(*shape) if kind == "complex" else RNG.standard_normal(shape)


def _ids(case):
    name, kind, shape, kw = case
    return f"{name}-{kind}-{shape}-{kw}"


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_first_order_matches_complex_finite_differences(case):
    name, kind, shape, kw = case
    z = _input(kind, shape)
    ref = getattr(np.fft, name)
    out = ref(z, **kw)
    w = _cplx(*out.shape) if np.iscomplexobj(out) else RNG.standard_normal(out.shape)
    zt = tg.tensor(z, requires_grad=True)
    y = getattr(tg.fft, name)(zt, **kw)
    assert np.array_equal(y.numpy(), out) and y.dtype == out.dtype
    y.backward(gradient=tg.tensor(w))
    got = zt.grad.numpy()
    assert got.dtype == z.dtype and got.shape == z.shape
    np.testing.assert_allclose(got, _fd_grad(lambda v: ref(v, **kw), z, w),
                               rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_second_order_matches_finite_differences(case):
    """The VJP u(w) is itself differentiated: the gradient of Re(sum(conj(c) * u(w)))
    with respect to the cotangent w, against FD in w (u is computed by np.fft through
    first-order tapegrad, which the first test checked)."""
    name, kind, shape, kw = case
    z = _input(kind, shape)
    ref = getattr(np.fft, name)
    out = ref(z, **kw)
    complex_out = np.iscomplexobj(out)
    w = _cplx(*out.shape) if complex_out else RNG.standard_normal(out.shape)
    c = _cplx(*z.shape) if kind == "complex" else RNG.standard_normal(z.shape)
    fn = getattr(tg.fft, name)

    def u_of(wv):
        zt = tg.tensor(z, requires_grad=True)
        fn(zt, **kw).backward(gradient=tg.tensor(wv))
        return zt.grad.numpy()

    zt = tg.tensor(z, requires_grad=True)
    wt = tg.tensor(w, requires_grad=True)
    fn(zt, **kw).backward(gradient=wt, create_graph=True)
    u = zt.grad
    assert u.requires_grad
    u.backward(gradient=tg.tensor(c))
    np.testing.assert_allclose(wt.grad.numpy(), _fd_grad(u_of, w, c), rtol=1e-7, atol=1e-8)


def test_irfft_ignores_the_imaginary_part_of_dc_and_nyquist():
    """The forward ignores Im(h[0]) and Im(h[n/2]) (n even): their gradient is exactly 0,
    and the middle bins count twice."""
    h = tg.tensor(_cplx(5), requires_grad=True)
    tg.fft.irfft(h).backward(gradient=tg.tensor(np.ones(8)))
    g = h.grad.numpy()
    assert g[0].imag == 0 and g[4].imag == 0
    np.testing.assert_allclose(g, [1, 0, 0, 0, 0], atol=1e-15)   # sum(y) = h0.real


def test_complex64_and_float32_are_preserved():
    for dtype, kind in ((np.complex64, "complex"), (np.float32, "real")):
        for name in ("fft", "ifft", "irfft", "hfft", "fftn", "irfftn") + (
                ("rfft", "ihfft", "rfftn") if kind == "real" else ()):
            z = _input(kind, (4, 6)).astype(dtype)
            zt = tg.tensor(z, requires_grad=True)
            y = getattr(tg.fft, name)(zt)
            ref = getattr(np.fft, name)(z)
            assert y.dtype == ref.dtype and np.array_equal(y.numpy(), ref), name
            y.backward(gradient=tg.ones_like(y))
            assert zt.grad.dtype == dtype, name


def _tangent(fn, z, t):
    """The tangent of fn(z) when z carries tangent t, through the engine's forward mode
    (what tg.jvp does; tapegrad.testing.check_jvp is real-only, so driven directly)."""
    from tapegrad import _forward
    x = tg.tensor(z)
    level = _forward.enter_level()
    try:
        d = _forward.detached_dual(x)
        _forward.set_tangent(d, level, tg.tensor(t))
        return _forward.tangent_of(fn(d), level).numpy()
    finally:
        _forward.exit_level(level)


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_forward_mode_matches_finite_differences(case):
    name, kind, shape, kw = case
    z, t = _input(kind, shape), _input(kind, shape)
    ref = getattr(np.fft, name)
    got = _tangent(lambda v: getattr(tg.fft, name)(v, **kw), z, t)
    eps = 1e-5
    numeric = (ref(z + eps * t, **kw) - ref(z - eps * t, **kw)) / (2 * eps)
    assert got.dtype == ref(z, **kw).dtype
    np.testing.assert_allclose(got, numeric, rtol=1e-7, atol=1e-8)


def test_rfft_refuses_a_complex_input_naming_the_function():
    for name in ("rfft", "ihfft"):
        with pytest.raises(TypeError, match=f"fft.{name}: the input must be real.*complex128"):
            getattr(tg.fft, name)(tg.tensor(_cplx(4)))
