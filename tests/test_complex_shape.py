"""Complex input through tapegrad-shape (issue 18): NumPy's values (var/std real, cov with
X X^H, correlate conjugating v, lexicographic sort/max), gradients against PyTorch's (the
same convention) where torch has the op, and against complex finite differences.
(The contract kit checks every op declared complex with derived complex samples; these
tests cover the composed functions and NumPy's complex semantics.)"""

import numpy as np
import pytest
import tapegrad as tg

try:        # the comparisons with PyTorch run where it is installed (ci/bench installs it);
    import torch    # the finite-difference checks always run
    HAVE_TORCH = True
except ImportError:
    class _NoTorch:
        """Stands for torch where it is not installed: `torch.linalg.inv` and the like
        name a function check() then does not call."""
        def __getattr__(self, name):
            return self
    torch = _NoTorch()
    HAVE_TORCH = False

RNG = np.random.default_rng(180)


def crand(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def fd_grad(f, z, w, eps=1e-6):
    """The gradient dL/dRe(z) + i dL/dIm(z) of L = Re sum(conj(w) f(z)), by central
    differences (f on NumPy arrays, through tapegrad's forward)."""
    def loss(x):
        return float(np.real(np.sum(np.conj(w) * f(tg.tensor(x)).numpy())))
    g = np.zeros(z.shape, complex)
    for idx in np.ndindex(z.shape):
        for u in (1, 1j):
            zp, zm = z.copy(), z.copy()
            zp[idx] += eps * u
            zm[idx] -= eps * u
            g[idx] += u * (loss(zp) - loss(zm)) / (2 * eps)
    return g


def grad_of(f, z, w):
    x = tg.tensor(z, requires_grad=True)
    (g,) = tg.grad(f(x), [x], tg.tensor(w))
    return g.numpy()


def check(f, z, f_torch=None, f_np=None):
    out = f(tg.tensor(z))
    if f_np is not None:
        want = f_np(z)
        assert out.dtype == np.asarray(want).dtype
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)
    w = crand(*out.shape) if out.dtype.kind == "c" else RNG.standard_normal(out.shape)
    g = grad_of(f, z, w)
    np.testing.assert_allclose(g, fd_grad(f, z, w), rtol=1e-6, atol=1e-6)
    if f_torch is not None and HAVE_TORCH:
        t = torch.tensor(z, requires_grad=True)
        (tgrad,) = torch.autograd.grad(f_torch(t), [t], torch.tensor(w))
        np.testing.assert_allclose(g, tgrad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_var_and_std_of_complex_data_are_real_as_numpys(axis):
    z = crand(3, 4)
    check(lambda x: tg.var(x, axis=axis), z, lambda t: torch.var(t, dim=axis, correction=0),
          lambda a: np.var(a, axis=axis))
    check(lambda x: tg.std(x, axis=axis, ddof=1), z,
          lambda t: torch.std(t, dim=axis, correction=1), lambda a: np.std(a, axis=axis, ddof=1))


def test_nanvar_of_complex_data():
    z = crand(5)
    z[2] = np.nan
    assert np.isreal(np.nanvar(z))
    np.testing.assert_allclose(tg.nanvar(tg.tensor(z)).numpy(), np.nanvar(z), rtol=1e-12)


def test_cov_conjugates_and_corrcoef_clips_both_parts():
    z = crand(2, 5)
    check(tg.cov, z, torch.cov, np.cov)
    np.testing.assert_allclose(tg.cov(tg.tensor(z), aweights=np.arange(1., 6.)).numpy(),
                               np.cov(z, aweights=np.arange(1., 6.)), rtol=1e-12)
    check(tg.corrcoef, z, None, np.corrcoef)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_and_correlate(mode):
    a, v = crand(5), crand(3)
    check(lambda x: tg.convolve(x, tg.tensor(v), mode), a, None, lambda x: np.convolve(x, v, mode))
    check(lambda x: tg.convolve(tg.tensor(a), x, mode), v, None, lambda x: np.convolve(a, x, mode))
    check(lambda x: tg.correlate(tg.tensor(a), x, mode), v, None,
          lambda x: np.correlate(a, x, mode))


def test_cumsum_cumprod_prod():
    z = crand(2, 4)
    check(lambda x: tg.cumsum(x, axis=1), z, lambda t: torch.cumsum(t, 1),
          lambda a: np.cumsum(a, axis=1))
    check(lambda x: tg.cumprod(x, axis=1), z, lambda t: torch.cumprod(t, 1),
          lambda a: np.cumprod(a, axis=1))
    check(lambda x: tg.prod(x, axis=0), z, lambda t: torch.prod(t, 0), lambda a: np.prod(a, 0))


def test_tensordot_inner_kron_trace_diag():
    a, b = crand(2, 3, 4), crand(3, 4, 2)
    check(lambda x: tg.tensordot(x, tg.tensor(b), 2), a,
          lambda t: torch.tensordot(t, torch.tensor(b), 2), lambda x: np.tensordot(x, b, 2))
    check(lambda x: tg.tensordot(tg.tensor(a), x, 2), b,
          lambda t: torch.tensordot(torch.tensor(a), t, 2), lambda x: np.tensordot(a, x, 2))
    m = crand(3, 3)
    check(lambda x: tg.inner(x, tg.tensor(m)), m, None, lambda x: np.inner(x, m))
    check(lambda x: tg.kron(x, tg.tensor(m[:2, :2])), m, None, lambda x: np.kron(x, m[:2, :2]))
    check(tg.trace, m, torch.trace, np.trace)
    check(tg.diag, m, torch.diag, np.diag)
    check(lambda x: tg.triu(x, 1), m, lambda t: torch.triu(t, 1), lambda x: np.triu(x, 1))


def test_rearrangements_are_linear_and_keep_the_dtype():
    z = crand(2, 3, dtype=np.complex64)
    for f in (lambda x: tg.reshape(x, (3, 2)), tg.transpose, lambda x: x[::-1, 1:],
              lambda x: tg.concatenate([x, 2 * x], axis=0), lambda x: tg.stack([x, x]),
              lambda x: tg.pad(x, 1), lambda x: tg.roll(x, 1), lambda x: tg.flip(x, 1),
              lambda x: tg.tile(x, 2), lambda x: tg.repeat(x, 2, axis=1),
              lambda x: tg.take(x, [4, 0, 0]), lambda x: tg.where(x.real > 0, x, 0)):
        x = tg.tensor(z, requires_grad=True)
        out = f(x)
        assert out.dtype == np.complex64
        (g,) = tg.grad(out, [x], tg.tensor(crand(*out.shape, dtype=np.complex64)))
        assert g.dtype == np.complex64
        check(f, z.astype(np.complex128))


def test_sort_and_max_order_complex_lexicographically_as_numpy_with_gradients():
    z = np.array([1 + 1j, 1 - 1j, 0.5 + 3j, -2 + 0.5j, 0.5 - 1j])
    np.testing.assert_array_equal(tg.sort(tg.tensor(z)).numpy(), np.sort(z))
    np.testing.assert_array_equal(tg.argsort(tg.tensor(z)).numpy(), np.argsort(z))
    assert tg.max(tg.tensor(z)).item() == np.max(z)
    assert tg.min(tg.tensor(z)).item() == np.min(z)
    assert tg.argmax(tg.tensor(z)).item() == np.argmax(z)
    # their gradients route the cotangent (tests/test_complex_ordering.py checks them
    # against complex finite differences)
    x = tg.tensor(z, requires_grad=True)
    (g,) = tg.grad(tg.max(x), [x], tg.tensor(np.array(2 - 1j)))
    np.testing.assert_array_equal(g.numpy(), np.where(z == np.max(z), 2 - 1j, 0))
