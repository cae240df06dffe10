"""tg.vjp, tg.jvp and tg.func.grad on complex inputs follow the engine's convention
(docs/autograd.md, "Complex numbers"); the Jacobian/Hessian transforms refuse complex
inputs. References: closed forms of holomorphic and non-holomorphic functions, and complex
finite differences on the real and imaginary parts."""
import numpy as np
import pytest

import tapegrad as tg

Z0 = np.array([1.0 + 2.0j, 0.5 - 1.0j, -0.3 + 0.2j])
V = np.array([1.0 + 0.0j, 1.0j, 0.25 - 2.0j])


def _fd_grad_of_real_loss(loss, z, eps=1e-6):
    """dL/dx + i dL/dy by central differences (the .grad convention)."""
    out = np.zeros_like(z)
    for k in range(z.size):
        for unit in (1.0, 1.0j):
            e = np.zeros_like(z)
            e[k] = eps * unit
            d = (loss(z + e) - loss(z - e)) / (2 * eps)
            out[k] += d * unit
    return out


def test_vjp_of_a_holomorphic_function_is_v_times_the_conjugate_derivative():
    out, g = tg.vjp(lambda z: z * z * z, tg.tensor(Z0), tg.tensor(V))
    np.testing.assert_allclose(out.numpy(), Z0 ** 3)
    np.testing.assert_allclose(g.numpy(), V * np.conj(3 * Z0 ** 2), rtol=1e-13)


def test_vjp_equals_the_gradient_of_the_real_loss_re_sum_conj_v_f():
    # v^H J as the .grad of L = Re(sum(conj(v) f(z))), checked by finite differences
    def f_np(z):
        return np.abs(z) ** 2 * z + np.conj(z)
    _, g = tg.vjp(lambda z: tg.abs(z) ** 2 * z + tg.conj(z), tg.tensor(Z0), tg.tensor(V))
    expected = _fd_grad_of_real_loss(lambda z: np.real(np.sum(np.conj(V) * f_np(z))), Z0)
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-7, atol=1e-8)


def test_jvp_of_holomorphic_and_antiholomorphic_functions():
    _, t = tg.jvp(lambda z: tg.exp(z) * z, (tg.tensor(Z0),), (tg.tensor(V),))
    np.testing.assert_allclose(t.numpy(), (np.exp(Z0) * Z0 + np.exp(Z0)) * V, rtol=1e-13)
    _, t = tg.jvp(tg.conj, (tg.tensor(Z0),), (tg.tensor(V),))
    np.testing.assert_array_equal(t.numpy(), np.conj(V))


def test_func_grad_of_a_real_loss_of_complex_input():
    gz = tg.func.grad(lambda z: (tg.abs(z) ** 2).sum())(tg.tensor(Z0))
    np.testing.assert_allclose(gz.numpy(), 2 * Z0, rtol=1e-14)
    # the same as .backward()'s .grad
    z = tg.tensor(Z0, requires_grad=True)
    (tg.abs(z) ** 2).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), gz.numpy())


@pytest.mark.parametrize("transform", [
    lambda f, z: tg.jacobian(f, z),
    lambda f, z: tg.hessian(lambda z: tg.real(f(z)).sum(), z),
    lambda f, z: tg.func.jacrev(f)(z),
    lambda f, z: tg.func.jacfwd(f)(z),
])
def test_jacobians_and_hessians_refuse_complex_inputs(transform):
    with pytest.raises(TypeError, match="complex"):
        transform(lambda z: z * z, tg.tensor(Z0))
