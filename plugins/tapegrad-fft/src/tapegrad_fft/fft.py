"""``tg.fft``: np.fft with gradients (tapegrad-fft).

Same names, arguments and defaults as np.fft (``n``/``s``, ``axis``/``axes``,
``norm="backward" | "ortho" | "forward"``); the values are np.fft's (pocketfft) bit for
bit, with its dtypes (float32/complex64 in, complex64 out). ``out=`` is refused: tensors
are not written into. The gradients follow PyTorch's complex convention (docs/autograd.md):
a real input of a complex-valued transform gets the real part of the complex gradient.

>>> import tapegrad as tg
>>> x = tg.tensor([1.0, 2.0, 0.0, -1.0], requires_grad=True)
>>> tg.fft.fft(x)
tensor([2.+0.j, 1.-3.j, 0.+0.j, 1.+3.j], dtype=complex128, grad_fn=<fft_fft>)
>>> y = tg.fft.rfft(x)
>>> y.backward(gradient=tg.tensor([1.0, 0.0, 0.0]))   # L = Re(y[0]) = sum(x): real gradient
>>> x.grad
tensor([1., 1., 1., 1.])
"""

import warnings

import numpy as np
import tapegrad as tg

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
           "irfft2", "rfftn", "irfftn", "hfft", "ihfft", "fftshift", "ifftshift",
           "fftfreq", "rfftfreq"]


def _no_out(name, out):
    if out is not None:
        raise TypeError(f"fft.{name}: out= is not supported (tensors are not written into; "
                        f"use the returned tensor)")


def _shape(a):
    shape = getattr(a, "shape", None)
    return tuple(shape) if shape is not None else np.shape(a)


# ---------------------------------------------------------------------------------------
# One-dimensional transforms: one op each (tapegrad_fft/_ops.py)
# ---------------------------------------------------------------------------------------

def fft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.fft: the 1-d discrete Fourier transform (complex result).

    >>> import tapegrad as tg
    >>> tg.fft.fft(tg.tensor([1.0, 0.0, 0.0, 0.0]))
    tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex128)
    """
    _no_out("fft", out)
    return tg.fft_fft(a, n=n, axis=axis, norm=norm)


def ifft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.ifft: the 1-d inverse discrete Fourier transform.

    >>> import tapegrad as tg
    >>> tg.fft.ifft(tg.tensor([4.0, 0.0, 0.0, 0.0]))
    tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j], dtype=complex128)
    """
    _no_out("ifft", out)
    return tg.fft_ifft(a, n=n, axis=axis, norm=norm)


def rfft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.rfft: the DFT of a real input, bins 0..n//2 (a complex input is refused).

    >>> import tapegrad as tg
    >>> tg.fft.rfft(tg.tensor([1.0, 1.0, 1.0, 1.0]))
    tensor([4.+0.j, 0.+0.j, 0.+0.j], dtype=complex128)
    """
    _no_out("rfft", out)
    return tg.fft_rfft(a, n=n, axis=axis, norm=norm)


def irfft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.irfft: the real inverse of rfft, of length n (default 2 * (m - 1)). The
    imaginary parts of bin 0 (and of bin n/2 for even n) are ignored, so their gradient
    is 0.

    >>> import tapegrad as tg
    >>> tg.fft.irfft(tg.tensor([4.0, 0.0, 0.0]))
    tensor([1., 1., 1., 1.])
    """
    _no_out("irfft", out)
    return tg.fft_irfft(a, n=n, axis=axis, norm=norm)


def hfft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.hfft: the (real) DFT of a Hermitian-symmetric signal given by its first half.

    >>> import tapegrad as tg
    >>> tg.fft.hfft(tg.tensor([1.0, 0.0, 0.0]))
    tensor([1., 1., 1., 1.])
    """
    _no_out("hfft", out)
    return tg.fft_hfft(a, n=n, axis=axis, norm=norm)


def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.ihfft: the inverse of hfft, of a real input (a complex input is refused).

    >>> import tapegrad as tg
    >>> tg.fft.ihfft(tg.tensor([1.0, 1.0, 1.0, 1.0]))
    tensor([1.-0.j, 0.-0.j, 0.-0.j], dtype=complex128)
    """
    _no_out("ihfft", out)
    return tg.fft_ihfft(a, n=n, axis=axis, norm=norm)


# ---------------------------------------------------------------------------------------
# N-dimensional transforms: the 1-d ops along each axis, in np.fft's order, so the values
# are np.fft's bit for bit (np.fft.fftn loops over the axes the same way) and the gradient
# is the 1-d rules' composition. Repeated axes transform again, as in NumPy.
# ---------------------------------------------------------------------------------------

def _cook_nd_args(name, a, s, axes, invreal=False):
    """np.fft's _cook_nd_args (numpy 2): the sizes and axes of an n-d transform, with its
    deprecation warnings; its errors (IndexError, ValueError) name the function."""
    shape = _shape(a)
    for ax in () if axes is None else axes:
        if not -len(shape) <= ax < len(shape):
            raise IndexError(f"fft.{name}: axis {ax} is out of bounds for an input of shape "
                             f"{shape} (axes={tuple(axes)})")
    if s is None:
        shapeless = True
        s = [shape[ax] for ax in (range(len(shape)) if axes is None else axes)]
    else:
        shapeless = False
    s = list(s)
    if axes is None:
        if not shapeless:
            warnings.warn("`axes` should not be `None` if `s` is not `None` (Deprecated in "
                          "NumPy 2.0). In a future version of NumPy, this will raise an "
                          "error and `s[i]` will correspond to the size along the "
                          "transformed axis specified by `axes[i]`. To retain current "
                          "behaviour, pass a sequence [0, ..., k-1] to `axes` for an array "
                          "of dimension k.", DeprecationWarning, stacklevel=4)
        axes = list(range(-len(s), 0))
    axes = list(axes)
    if len(s) != len(axes):
        raise ValueError(f"fft.{name}: shape and axes have different lengths (s={tuple(s)}, "
                         f"axes={tuple(axes)})")
    if invreal and shapeless:
        s[-1] = (shape[axes[-1]] - 1) * 2
    if None in s:
        warnings.warn("Passing an array containing `None` values to `s` is deprecated in "
                      "NumPy 2.0 and will raise an error in a future version of NumPy. To "
                      "use the default behaviour of the corresponding 1-D transform, pass "
                      "the value matching the default for its `n` parameter. To use the "
                      "default behaviour for every axis, the `s` argument can be omitted.",
                      DeprecationWarning, stacklevel=4)
    s = [shape[ax] if n == -1 else n for n, ax in zip(s, axes)]
    return s, axes


def _raw_fftnd(name, a, s, axes, op, norm):
    s, axes = _cook_nd_args(name, a, s, axes)
    for ii in reversed(range(len(axes))):
        a = op(a, n=s[ii], axis=axes[ii], norm=norm)
    return a


def fftn(a, s=None, axes=None, norm=None, out=None):
    """np.fft.fftn: the n-d DFT over `axes` (default all; with `s`, the last len(s)).

    >>> import tapegrad as tg
    >>> tg.fft.fftn(tg.ones((2, 2)))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]], dtype=complex128)
    """
    _no_out("fftn", out)
    return _raw_fftnd("fftn", a, s, axes, tg.fft_fft, norm)


def ifftn(a, s=None, axes=None, norm=None, out=None):
    """np.fft.ifftn: the n-d inverse DFT.

    >>> import tapegrad as tg
    >>> tg.fft.ifftn(tg.tensor([[4.0, 0.0], [0.0, 0.0]]))
    tensor([[1.+0.j, 1.+0.j],
            [1.+0.j, 1.+0.j]], dtype=complex128)
    """
    _no_out("ifftn", out)
    return _raw_fftnd("ifftn", a, s, axes, tg.fft_ifft, norm)


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """np.fft.fft2: fftn over the last two axes.

    >>> import tapegrad as tg
    >>> tg.fft.fft2(tg.ones((2, 2)))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]], dtype=complex128)
    """
    _no_out("fft2", out)
    return _raw_fftnd("fft2", a, s, axes, tg.fft_fft, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """np.fft.ifft2: ifftn over the last two axes.

    >>> import tapegrad as tg
    >>> tg.fft.ifft2(tg.tensor([[4.0, 0.0], [0.0, 0.0]]))
    tensor([[1.+0.j, 1.+0.j],
            [1.+0.j, 1.+0.j]], dtype=complex128)
    """
    _no_out("ifft2", out)
    return _raw_fftnd("ifft2", a, s, axes, tg.fft_ifft, norm)


def rfftn(a, s=None, axes=None, norm=None, out=None):
    """np.fft.rfftn: rfft along the last of `axes`, then fft along the others.

    >>> import tapegrad as tg
    >>> tg.fft.rfftn(tg.ones((2, 2)))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]], dtype=complex128)
    """
    return _rfftn("rfftn", a, s, axes, norm, out)


def _rfftn(name, a, s, axes, norm, out):
    _no_out(name, out)
    s, axes = _cook_nd_args(name, a, s, axes)
    a = tg.fft_rfft(a, n=s[-1], axis=axes[-1], norm=norm)
    for ii in range(len(axes) - 2, -1, -1):
        a = tg.fft_fft(a, n=s[ii], axis=axes[ii], norm=norm)
    return a


def irfftn(a, s=None, axes=None, norm=None, out=None):
    """np.fft.irfftn: ifft along all but the last of `axes`, then irfft along it.

    >>> import tapegrad as tg
    >>> tg.fft.irfftn(tg.tensor([[4.0, 0.0], [0.0, 0.0]]))
    tensor([[1., 1.],
            [1., 1.]])
    """
    return _irfftn("irfftn", a, s, axes, norm, out)


def _irfftn(name, a, s, axes, norm, out):
    _no_out(name, out)
    s, axes = _cook_nd_args(name, a, s, axes, invreal=True)
    for ii in range(len(axes) - 1):
        a = tg.fft_ifft(a, n=s[ii], axis=axes[ii], norm=norm)
    return tg.fft_irfft(a, n=s[-1], axis=axes[-1], norm=norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """np.fft.rfft2: rfftn over the last two axes.

    >>> import tapegrad as tg
    >>> tg.fft.rfft2(tg.ones((2, 2))).shape
    (2, 2)
    """
    return _rfftn("rfft2", a, s, axes, norm, out)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """np.fft.irfft2: irfftn over the last two axes.

    >>> import tapegrad as tg
    >>> tg.fft.irfft2(tg.tensor([[4.0, 0.0], [0.0, 0.0]]))
    tensor([[1., 1.],
            [1., 1.]])
    """
    return _irfftn("irfft2", a, s, axes, norm, out)


# ---------------------------------------------------------------------------------------
# Shifts and frequencies
# ---------------------------------------------------------------------------------------

def fftshift(x, axes=None):
    """np.fft.fftshift: the zero-frequency bin moved to the centre (np.roll by n//2).

    >>> import tapegrad as tg
    >>> tg.fft.fftshift(tg.tensor([0.0, 1.0, 2.0, -2.0, -1.0]))
    tensor([-2., -1.,  0.,  1.,  2.])
    """
    return tg.fft_fftshift(x, axes=axes)


def ifftshift(x, axes=None):
    """np.fft.ifftshift: the inverse of fftshift.

    >>> import tapegrad as tg
    >>> tg.fft.ifftshift(tg.tensor([-2.0, -1.0, 0.0, 1.0, 2.0]))
    tensor([ 0.,  1.,  2., -2., -1.])
    """
    return tg.fft_ifftshift(x, axes=axes)


def _spacing(name, d):
    if isinstance(d, tg.Tensor):
        if d.requires_grad:
            raise TypeError(f"fft.{name}: the sample spacing d must be a number (a tensor "
                            f"that requires grad has no gradient here); divide the result "
                            f"of fft.{name}(n) by d instead")
        d = d.item()
    return d


def fftfreq(n, d=1.0, device=None):
    """np.fft.fftfreq: the sample frequencies of an n-point DFT with spacing d (a float64
    tensor on `device`, default the default device).

    >>> import tapegrad as tg
    >>> tg.fft.fftfreq(4, d=0.5)
    tensor([ 0. ,  0.5, -1. , -0.5])
    """
    return tg.tensor(np.fft.fftfreq(n, _spacing("fftfreq", d)), device=device)


def rfftfreq(n, d=1.0, device=None):
    """np.fft.rfftfreq: the sample frequencies of rfft's n//2 + 1 bins.

    >>> import tapegrad as tg
    >>> tg.fft.rfftfreq(4, d=0.5)
    tensor([0. , 0.5, 1. ])
    """
    return tg.tensor(np.fft.rfftfreq(n, _spacing("rfftfreq", d)), device=device)
