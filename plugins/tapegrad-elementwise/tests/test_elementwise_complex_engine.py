"""Complex tensors through the engine (issue 18): requires_grad on complex, the
complex=True opt-in and the refusal of other ops, the real part for a real input of a
complex op, the cast for a complex input given a real gradient, backward's seed, and
forward mode -- against PyTorch's convention (z.grad = dL/dx + i dL/dy)."""

import warnings

import numpy as np
import pytest
import tapegrad as tg


def _torch():
    return pytest.importorskip("torch")

Z = np.array([1 + 2j, 3 - 1j, -0.5 + 0.25j])


def _register(name, vjp, *, complex, jvp=None):
    """A throwaway op over the cpu registry (removed by the caller's finally)."""
    from tapegrad import _engine
    op = _engine.Op(name, "tests", {"cpu": lambda a: a * 2.0}, vjp, jvp, 1, False, (), None,
                    False, True, [], "", None, False, supports_complex=complex)
    _engine.install_op(op)
    return op


def _jvp(f, x, t):
    """(f(x), its tangent) with the engine's forward mode (tg.jvp, in tapegrad-higher,
    takes real inputs only)."""
    from tapegrad import _forward
    level = _forward.enter_level()
    try:
        d = _forward.detached_dual(x)
        _forward.set_tangent(d, level, t)
        out = f(d)
        return out, _forward.tangent_of(out, level)
    finally:
        _forward.exit_level(level)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_a_complex_tensor_may_require_grad(dtype):
    z = tg.tensor(Z.astype(dtype), requires_grad=True)
    assert z.requires_grad and z.dtype == dtype
    with pytest.raises(TypeError, match="only floating-point and complex tensors"):
        tg.tensor(np.array([1, 2]), requires_grad=True)


@pytest.mark.needs_torch
def test_backward_of_a_complex_output_needs_gradient_as_pytorch():
    torch = _torch()
    z = tg.tensor(Z[:1], requires_grad=True)
    y = z + z
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for real scalar"):
        y.backward()
    y.backward(gradient=np.array([1 - 2j]))
    zt = torch.tensor(Z[:1], requires_grad=True)
    (zt + zt).backward(torch.tensor([1 - 2j]))
    np.testing.assert_allclose(z.grad.numpy(), zt.grad.numpy())


def test_an_op_without_complex_rules_refuses_a_complex_input_that_requires_grad():
    from tapegrad import _engine
    op = _register("_test_cx_refused", lambda g, ans, x: (g * 2.0,), complex=False)
    try:
        z = tg.tensor(Z, requires_grad=True)
        with pytest.raises(TypeError, match="_test_cx_refused: the op has no complex gradient "
                                            "rule.*complex128"):
            op(z)
        with tg.no_grad():          # no gradient needed: it computes as NumPy does
            np.testing.assert_array_equal(op(z).numpy(), Z * 2.0)
        np.testing.assert_array_equal(op(z.detach()).numpy(), Z * 2.0)
        # a real input whose result is complex is refused too (the kernel promotes)
        promotes = _engine.Op("_test_cx_promotes", "tests", {"cpu": lambda a: a * 1j},
                              lambda g, ans, x: (g,), None, 1, False, (), None, False, True,
                              [], "", None, False, supports_complex=False)
        _engine.install_op(promotes)
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(TypeError, match="_test_cx_promotes: the op has no complex "
                                            "gradient rule"):
            promotes(x)
    finally:
        _engine.uninstall_op("_test_cx_refused")
        if "_test_cx_promotes" in _engine.ops_table():
            _engine.uninstall_op("_test_cx_promotes")


@pytest.mark.needs_torch
def test_an_op_with_complex_rules_records_and_a_real_input_gets_the_real_part():
    torch = _torch()
    # x real + z complex: add's rule returns the complex g for both; x keeps Re(g)
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    z = tg.tensor(Z, requires_grad=True)
    y = x + z
    assert y.dtype == np.complex128 and y.requires_grad
    g = np.array([1 + 1j, -2j, 0.5])
    y.backward(gradient=g)
    xt = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    zt = torch.tensor(Z, requires_grad=True)
    (xt + zt).backward(torch.tensor(g))
    assert x.grad.dtype == np.float64 and z.grad.dtype == np.complex128
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy())
    np.testing.assert_allclose(z.grad.numpy(), zt.grad.numpy())


def test_a_complex_input_given_a_real_gradient_gets_it_as_complex():
    # real(z): the rule's gradient for z is real g as complex; also a rule that returns a
    # real gradient for a complex input is cast by the engine (no warning)
    z = tg.tensor(Z, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.real(z + 0.0).backward(gradient=np.ones(3))
    assert z.grad.dtype == np.complex128
    np.testing.assert_array_equal(z.grad.numpy(), np.ones(3, complex))
    from tapegrad import _engine
    op = _register("_test_cx_realgrad", lambda g, ans, x: (tg.real(g) * 2.0,), complex=True)
    try:
        z = tg.tensor(Z, requires_grad=True)
        op(z).backward(gradient=np.array([1 + 1j, 1j, 2.0]))
        assert z.grad.dtype == np.complex128
        np.testing.assert_array_equal(z.grad.numpy(), [2, 0, 4])
    finally:
        _engine.uninstall_op("_test_cx_realgrad")


@pytest.mark.needs_torch
def test_astype_between_real_and_complex_differentiates_as_pytorch():
    torch = _torch()
    x = tg.tensor([1.0, -2.0], requires_grad=True)
    z = tg.tensor(Z[:2], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # the engine's projection does not warn
        y = x.astype(np.complex128) + z
        y.backward(gradient=np.array([2 - 3j, 1j]))
    xt = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    zt = torch.tensor(Z[:2], requires_grad=True)
    (xt.to(torch.complex128) + zt).backward(torch.tensor([2 - 3j, 1j]))
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy())
    np.testing.assert_allclose(z.grad.numpy(), zt.grad.numpy())
    # second order through the cast: grad of grad stays consistent
    x = tg.tensor([1.0, -2.0], requires_grad=True)
    tg.real(x.astype(np.complex64).astype(np.complex128)).backward(
        gradient=np.ones(2), create_graph=True)
    gx = x.grad
    np.testing.assert_array_equal(gx.numpy(), [1.0, 1.0])


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_leaf_gradients_keep_the_dtype(dtype):
    z = tg.tensor(Z.astype(dtype), requires_grad=True)
    (z + z).backward(gradient=np.ones(3, dtype))
    assert z.grad.dtype == dtype


def test_forward_mode_refuses_a_complex_tangent_through_an_op_without_complex_rules():
    from tapegrad import _engine
    op = _register("_test_cx_fwd", lambda g, ans, x: (g * 2.0,), complex=False,
                   jvp=lambda t, ans, x: t[0] * 2.0)
    try:
        z = tg.tensor(Z)
        with pytest.raises(TypeError, match="_test_cx_fwd: the op has no complex gradient rule"):
            _jvp(op, z, tg.tensor(np.ones(3, complex)))
    finally:
        _engine.uninstall_op("_test_cx_fwd")


def test_forward_mode_through_complex_ops_and_a_real_primal_keeps_a_real_tangent():
    z = tg.tensor(Z)
    t = tg.tensor(np.array([1j, 1.0, 2 - 1j]))
    out, tan = _jvp(lambda a: tg.real(a + a), z, t)
    np.testing.assert_array_equal(out.numpy(), 2 * Z.real)
    assert tan.dtype == np.float64
    np.testing.assert_array_equal(tan.numpy(), 2 * np.real(t.numpy()))
    x = tg.tensor([1.0, 2.0, 3.0])
    out, tan = _jvp(lambda a: a + z, x, tg.tensor([1.0, 0.0, -1.0]))
    assert out.dtype == np.complex128
    np.testing.assert_array_equal(tan.numpy(), [1, 0, -1])


def test_a_tg_function_may_take_and_return_complex_tensors():
    class Twice(tg.Function):
        @staticmethod
        def forward(ctx, z):
            return tg.tensor(z.numpy() * 2.0)

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    z = tg.tensor(Z, requires_grad=True)
    y = Twice.apply(z)
    assert y.requires_grad and y.dtype == np.complex128
    tg.real(y).backward(gradient=np.ones(3))
    np.testing.assert_array_equal(z.grad.numpy(), np.full(3, 2 + 0j))


def test_casts_between_real_and_complex_pass_complex_finite_differences():
    x = tg.tensor([1.0, -2.0, 0.5], requires_grad=True)
    assert tg.gradcheck(lambda x: x.astype(np.complex128) * (1 + 2j), x)
    z = tg.tensor(Z, requires_grad=True)
    assert tg.gradcheck(lambda z: tg.real(z) * 3.0, z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)   # NumPy's, on purpose
        assert tg.gradcheck(lambda z: z.astype(np.float64) * 3.0, z)

