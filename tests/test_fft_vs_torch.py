"""tg.fft's gradients equal torch.fft's (PyTorch's complex convention, which tapegrad
follows: z.grad = dL/dRe z + i dL/dIm z), first order and double backward, for every
transform, norm, n cropping/padding, odd/even lengths and real/complex inputs."""

import numpy as np
import pytest
import tapegrad as tg

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")

RNG = np.random.default_rng(2026)


def _input(kind, shape):
    if kind == "real":
        return RNG.standard_normal(shape)
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def _torch_call(name, t, kw):
    kw = dict(kw)
    if "axis" in kw:
        kw["dim"] = kw.pop("axis")
    if "axes" in kw:
        kw["dim"] = kw.pop("axes")
    return getattr(torch.fft, name)(t, **kw)


CASES = []
for norm in ("backward", "ortho", "forward"):
    CASES += [
        ("fft", "complex", (5,), {"norm": norm}),
        ("fft", "real", (3, 6), {"n": 4, "axis": 0, "norm": norm}),
        ("ifft", "complex", (2, 7), {"n": 10, "norm": norm}),
        ("rfft", "real", (8,), {"norm": norm}),
        ("rfft", "real", (2, 7), {"n": 5, "norm": norm}),
        ("rfft", "real", (4, 3), {"n": 9, "axis": -2, "norm": norm}),
        ("irfft", "complex", (5,), {"norm": norm}),
        ("irfft", "complex", (5,), {"n": 7, "norm": norm}),
        ("irfft", "complex", (3, 4), {"n": 12, "axis": 0, "norm": norm}),
        ("hfft", "complex", (6,), {"norm": norm}),
        ("hfft", "complex", (2, 4), {"n": 5, "norm": norm}),
        ("ihfft", "real", (7,), {"norm": norm}),
        ("ihfft", "real", (3, 6), {"n": 4, "axis": 0, "norm": norm}),
        ("fftn", "complex", (2, 3, 4), {"axes": (0, 2), "norm": norm}),
        ("ifft2", "complex", (3, 5), {"s": (4, 4), "norm": norm}),
        ("rfftn", "real", (3, 4, 5), {"norm": norm}),
        ("rfft2", "real", (4, 5), {"s": (3, 6), "norm": norm}),
        ("irfftn", "complex", (3, 4), {"norm": norm}),
        ("irfft2", "complex", (4, 3), {"s": (5, 5), "norm": norm}),
    ]
CASES += [("fftshift", "complex", (4, 5), {}), ("ifftshift", "real", (3, 5), {"axes": (0,)})]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}" for c in CASES])
def test_gradients_equal_torch_fft(case):
    name, kind, shape, kw = case
    z = _input(kind, shape)
    zt = tg.tensor(z, requires_grad=True)
    y = getattr(tg.fft, name)(zt, **kw)
    w = _input("complex" if y.dtype.kind == "c" else "real", y.shape)
    zr = torch.tensor(z, requires_grad=True)
    yr = _torch_call(name, zr, kw)
    np.testing.assert_allclose(y.numpy(), yr.detach().resolve_conj().numpy(), rtol=1e-12, atol=1e-12)

    # First order, and the double backward through the gradient as a function of w.
    wt = tg.tensor(w, requires_grad=True)
    wr = torch.tensor(w, requires_grad=True)
    y.backward(gradient=wt, create_graph=True)
    (gr,) = torch.autograd.grad(yr, zr, grad_outputs=wr, create_graph=True)
    np.testing.assert_allclose(zt.grad.numpy(), gr.detach().resolve_conj().numpy(), rtol=1e-12, atol=1e-12)
    c = _input(kind, shape)
    zt.grad.backward(gradient=tg.tensor(c))
    (ggr,) = torch.autograd.grad(gr, wr, grad_outputs=torch.tensor(c))
    np.testing.assert_allclose(wt.grad.numpy(), ggr.resolve_conj().numpy(), rtol=1e-12, atol=1e-12)
