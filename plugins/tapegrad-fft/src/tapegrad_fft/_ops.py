"""The ops of tapegrad-fft: np.fft's one-dimensional transforms, fftshift/ifftshift and
the crop/pad op their gradients need; kernels, VJP, JVP and batching rules side by side.

Flat op names are ``fft_<name>`` (``fft_fft``, ``fft_rfft``, ...): the public names live
in the ``tg.fft`` namespace (fft.py), as np.fft's do.

Every transform is linear, so its JVP is the op itself (``jvp="linear"``) and its VJP is
its adjoint, written as another transform of this plugin (no dense DFT matrix):

- The adjoint of a transform with norm N is the opposite transform with the *dual* norm:
  "backward" <-> "forward", "ortho" <-> "ortho" (the unnormalized DFT's adjoint is n times
  the normalized inverse).
- ``n`` crops or zero-pads the input before the transform; the adjoint crops or pads the
  gradient back to the input's length (``_fft_fit``).
- rfft keeps bins 0..n//2 of a real input's DFT: its adjoint pads those bins to n, takes
  the inverse (dual norm) and keeps the real part, which is irfft of those bins with the
  middle ones halved (a real result, half the work of a complex inverse).
- irfft reads bins 1..ceil(n/2)-1 twice (each stands for itself and its conjugate) and
  ignores the imaginary part of bin 0 (and of bin n/2, n even): its adjoint is rfft of the
  gradient (dual norm) with those bins doubled, which gives 0 imaginary gradient at bin 0
  and the Nyquist bin, as finite differences do.
- hfft(a) = irfft(conj(a)) with the swapped norm and ihfft(x) = conj(rfft(x)) likewise
  (np.fft defines them so): their adjoints are ihfft and fft, with the same doubling/
  projection.
"""

import numpy as np
import tapegrad as tg

_DUAL = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _dual(norm):
    try:
        return _DUAL[norm]
    except (KeyError, TypeError):
        # Only reached after the forward kernel accepted `norm`, i.e. never; kept so that a
        # future norm name fails loudly here rather than giving a wrong gradient.
        raise ValueError(f"fft: invalid norm value {norm!r}; should be 'backward', 'ortho' "
                         f"or 'forward'") from None


def _axis_length(x, axis):
    return x.shape[axis]


# ---------------------------------------------------------------------------------------
# _fft_fit: crop or zero-pad along an axis, optionally doubling the bins irfft reads twice
# ---------------------------------------------------------------------------------------

def _fit_kernel(x, axis=-1, size=1, double=None, scale=2.0):
    """x cropped (the first `size` entries) or zero-padded to `size` along `axis`, then
    entries 1..ceil(double/2)-1 along it multiplied by `scale` (2: irfft's adjoint; 0.5:
    rfft's, computed with irfft) when `double` (an irfft length) is given. A new array
    (never a view)."""
    x = np.asarray(x)
    axis = axis % x.ndim
    m = x.shape[axis]
    if size <= m:
        out = np.array(x[(slice(None),) * axis + (slice(0, size),)])
    else:
        out = np.zeros(x.shape[:axis] + (size,) + x.shape[axis + 1:], dtype=x.dtype)
        out[(slice(None),) * axis + (slice(0, m),)] = x
    if double is not None:
        hi = min((double + 1) // 2, size)       # bins 1..ceil(n/2)-1: not DC, not Nyquist
        if hi > 1:
            # NOTE: a Python float keeps float32/complex64 (NEP 50: weak scalars)
            out[(slice(None),) * axis + (slice(1, hi),)] *= scale
    return out


def _fit_vjp(g, ans, x, axis=-1, size=1, double=None, scale=2.0):
    # The scaling is diagonal and real and commutes with cropping/padding, so the adjoint
    # is the same op back to x's length.
    return (tg._fft_fit(g, axis=axis, size=_axis_length(x, axis), double=double,
                        scale=scale),)


def _fit(x, axis, size, double=None, scale=2.0):
    """_fft_fit, skipped when it would copy x unchanged (the common case: no n=)."""
    if double is None and x.shape[axis] == size:
        return x
    return tg._fft_fit(x, axis=axis, size=size, double=double, scale=scale)


def _shift_axis(axis, nd, name):
    """A per-example axis as the batched array's (vmapped axis first)."""
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(axis, nd, name)
    return axis % nd + 1


def _fit_batch(inputs, batched, axis=-1, size=1, double=None, scale=2.0):
    x = inputs[0]
    return tg._fft_fit(x, axis=_shift_axis(axis, x.ndim - 1, "_fft_fit"), size=size,
                       double=double, scale=scale)


# ---------------------------------------------------------------------------------------
# The one-dimensional transforms
# ---------------------------------------------------------------------------------------

def _length(x, n, axis):
    """The transform length np.fft uses: n, or the input's length along axis."""
    return x.shape[axis] if n is None else n


def _fft_vjp(g, ans, x, n=None, axis=-1, norm=None):
    return (_fit(tg.fft_ifft(g, axis=axis, norm=_dual(norm)), axis, _axis_length(x, axis)),)


def _ifft_vjp(g, ans, x, n=None, axis=-1, norm=None):
    return (_fit(tg.fft_fft(g, axis=axis, norm=_dual(norm)), axis, _axis_length(x, axis)),)


def _rfft_vjp(g, ans, x, n=None, axis=-1, norm=None):
    # Re(ifft(g zero-padded to n)) with the dual norm, computed as irfft of g with its
    # middle bins halved (irfft counts each twice): a real result at half the cost of a
    # complex inverse. irfft ignores Im(g[0]) (and Im of the Nyquist bin), as Re() does.
    nn = _length(x, n, axis)
    half = tg._fft_fit(g, axis=axis, size=g.shape[axis], double=nn, scale=0.5)
    return (_fit(tg.fft_irfft(half, n=nn, axis=axis, norm=_dual(norm)), axis,
                 _axis_length(x, axis)),)


def _ihfft_vjp(g, ans, x, n=None, axis=-1, norm=None):
    # ihfft(x) = conj(rfft(x)) (swapped norm): the adjoint is Re(fft(g padded)), which is
    # hfft of g with its middle bins halved.
    nn = _length(x, n, axis)
    half = tg._fft_fit(g, axis=axis, size=g.shape[axis], double=nn, scale=0.5)
    return (_fit(tg.fft_hfft(half, n=nn, axis=axis, norm=_dual(norm)), axis,
                 _axis_length(x, axis)),)


def _irfft_length(x, n, axis):
    return 2 * (x.shape[axis] - 1) if n is None else n


def _irfft_vjp(g, ans, x, n=None, axis=-1, norm=None):
    nn = _irfft_length(x, n, axis)
    return (tg._fft_fit(tg.fft_rfft(g, axis=axis, norm=_dual(norm)), axis=axis,
                        size=_axis_length(x, axis), double=nn),)


def _hfft_vjp(g, ans, x, n=None, axis=-1, norm=None):
    nn = _irfft_length(x, n, axis)
    return (tg._fft_fit(tg.fft_ihfft(g, axis=axis, norm=_dual(norm)), axis=axis,
                        size=_axis_length(x, axis), double=nn),)


def _refuse_complex(name, kernel):
    """np.fft's rfft and ihfft refuse a complex input with a TypeError about a ufunc loop;
    this one names the function and the dtype (PyTorch refuses too)."""
    def checked(x, n=None, axis=-1, norm=None):
        x = np.asarray(x)
        if x.dtype.kind == "c":
            raise TypeError(f"fft.{name}: the input must be real, got {x.dtype} (shape "
                            f"{x.shape}); use fft.fft for a complex input")
        return kernel(x, n=n, axis=axis, norm=norm)
    checked.__name__ = checked.__qualname__ = f"{name}_kernel"
    return checked


def _transform_batch(name):
    def batch(inputs, batched, n=None, axis=-1, norm=None):
        x = inputs[0]
        op = getattr(tg, f"fft_{name}")
        return op(x, n=n, axis=_shift_axis(axis, x.ndim - 1, name), norm=norm)
    batch.__name__ = batch.__qualname__ = f"{name}_batch"
    return batch


# ---------------------------------------------------------------------------------------
# fftshift / ifftshift
# ---------------------------------------------------------------------------------------

def _fftshift_vjp(g, ans, x, axes=None):
    return (tg.fft_ifftshift(g, axes=axes),)


def _ifftshift_vjp(g, ans, x, axes=None):
    return (tg.fft_fftshift(g, axes=axes),)


def _shift_axes(axes, nd, name):
    if axes is None:
        return tuple(range(1, nd + 1))
    if isinstance(axes, (int, np.integer)):
        return _shift_axis(int(axes), nd, name)
    return tuple(_shift_axis(int(a), nd, name) for a in axes)


def _shift_batch(name):
    def batch(inputs, batched, axes=None):
        x = inputs[0]
        return getattr(tg, f"fft_{name}")(x, axes=_shift_axes(axes, x.ndim - 1, name))
    batch.__name__ = batch.__qualname__ = f"{name}_batch"
    return batch


def _kernel(fn):
    """np.fft's function as a kernel: an array (never a NumPy scalar), dtype as NumPy's."""
    def kernel(x, *args, **params):
        return np.asarray(fn(np.asarray(x), *args, **params))
    kernel.__name__ = kernel.__qualname__ = f"{fn.__name__}_kernel"
    return kernel


# ---------------------------------------------------------------------------------------
# Samples: odd and even lengths, n cropping and padding, every norm, negative axes
# ---------------------------------------------------------------------------------------

def _rng(seed):
    return np.random.default_rng(seed)


def _real(*shape, seed=0):
    return _rng(seed).standard_normal(shape)


def _cplx(*shape, seed=0):
    r = _rng(seed)
    return r.standard_normal(shape) + 1j * r.standard_normal(shape)


def _transform_samples(make, seed):
    """Samples of a 1-d transform (n, axis, norm); `make` builds the input."""
    out = []
    for k, (shape, kw) in enumerate([
            ((6,), {}), ((5,), {"norm": "ortho"}), ((3, 4), {"axis": 0, "norm": "forward"}),
            ((2, 5), {"n": 8}), ((2, 7), {"n": 4, "axis": -1, "norm": "ortho"}),
            ((4, 3), {"n": 5, "axis": -2, "norm": "backward"}), ((5, 2), {"n": 3, "axis": 0}),
    ]):
        out.append(tg.Sample(make(*shape, seed=seed + k), **kw))
        if make is _cplx and k % 2 == 0:
            # a real input too: the kit's real checks and the engine's real-part projection
            out.append(tg.Sample(_real(*shape, seed=seed + k), **kw))
    return out


def _register_transform(registry, name, fn, vjp, make, seed, doc, complex_input=True):
    kernel = _kernel(fn)
    if not complex_input:
        kernel = _refuse_complex(name, kernel)
    registry.register_op(
        f"fft_{name}", kernels={"cpu": kernel}, vjp=vjp, jvp="linear",
        batch=_transform_batch(name), save_ans=False, method=False, complex=True,
        samples=_transform_samples(make, seed), doc=doc)


def register(registry):
    registry.register_op(
        "_fft_fit", kernels={"cpu": _fit_kernel}, vjp=_fit_vjp, jvp="linear",
        batch=_fit_batch, save_ans=False, method=False, complex=True,
        samples=[tg.Sample(_real(3, 4, seed=1), axis=1, size=6),
                 tg.Sample(_real(5, 2, seed=2), axis=0, size=3),
                 tg.Sample(_real(2, 6, seed=3), axis=-1, size=4, double=6),
                 tg.Sample(_real(2, 4, seed=4), axis=-1, size=6, double=9),
                 tg.Sample(_cplx(5, seed=5), axis=0, size=5, double=8),
                 tg.Sample(_real(3, 5, seed=6), axis=1, size=5, double=9, scale=0.5)],
        doc="Internal to tg.fft's gradients: x cropped or zero-padded to `size` along "
            "`axis`, then entries 1..ceil(double/2)-1 multiplied by `scale` (default 2) "
            "when `double` (an irfft length) is given.")
    _register_transform(
        registry, "fft", np.fft.fft, _fft_vjp, _cplx, 10,
        "np.fft.fft: the 1-d discrete Fourier transform along `axis`, of length `n`.")
    _register_transform(
        registry, "ifft", np.fft.ifft, _ifft_vjp, _cplx, 20,
        "np.fft.ifft: the 1-d inverse discrete Fourier transform along `axis`.")
    _register_transform(
        registry, "rfft", np.fft.rfft, _rfft_vjp, _real, 30,
        "np.fft.rfft: the 1-d DFT of a real input, bins 0..n//2 (complex input refused).",
        complex_input=False)
    _register_transform(
        registry, "irfft", np.fft.irfft, _irfft_vjp, _cplx, 40,
        "np.fft.irfft: the real inverse of rfft (length n, default 2*(m-1)).")
    _register_transform(
        registry, "hfft", np.fft.hfft, _hfft_vjp, _cplx, 50,
        "np.fft.hfft: the real DFT of a Hermitian-symmetric signal given by its first "
        "half (length n, default 2*(m-1)).")
    _register_transform(
        registry, "ihfft", np.fft.ihfft, _ihfft_vjp, _real, 60,
        "np.fft.ihfft: the inverse of hfft, of a real input (complex input refused).",
        complex_input=False)
    for name, fn, vjp, seed in (("fftshift", np.fft.fftshift, _fftshift_vjp, 70),
                                ("ifftshift", np.fft.ifftshift, _ifftshift_vjp, 80)):
        registry.register_op(
            f"fft_{name}", kernels={"cpu": _kernel(fn)}, vjp=vjp, jvp="linear",
            batch=_shift_batch(name), save_inputs=(False,), save_ans=False, method=False,
            complex=True,
            samples=[tg.Sample(_real(5, seed=seed)), tg.Sample(_real(4, 5, seed=seed + 1)),
                     tg.Sample(_real(3, 4, 5, seed=seed + 2), axes=(0, -1)),
                     tg.Sample(_real(3, 4, seed=seed + 3), axes=-2)],
            doc=f"np.fft.{name}: np.roll by half the length along `axes` (default all).")
