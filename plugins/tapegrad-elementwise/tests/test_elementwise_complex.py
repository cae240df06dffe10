"""Complex numbers through the elementwise ops (issue 18): gradients of a few complex
programs against complex finite differences (tg.gradcheck) and PyTorch's (needs_torch),
the contract kit over every complex=True op, every other
differentiable elementwise op refusing complex values that need a gradient, and the new
ops (real, imag, conj, angle, abs, complex, real_if_close, iscomplexobj) against NumPy."""

import warnings

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_elementwise
from tapegrad._engine import ops_table
from tapegrad.testing import check_op, grad_of, vmap_call



def _torch():
    return pytest.importorskip("torch")

RNG = np.random.default_rng(7)
Z = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))
W = RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))
X = RNG.uniform(0.5, 2.0, (3, 4))


def _pair(*arrays):
    """(tapegrad leaves, torch leaves) of the same values, all requiring grad."""
    torch = _torch()
    return ([tg.tensor(a, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


# Each program is written once, with the module (tg or torch) as a parameter.
PROGRAMS = {
    "abs2": lambda m, z, w, x: (m.abs(z) ** 2),
    "product": lambda m, z, w, x: m.real(z * m.conj(w) * x) + m.imag(z * w),
    "holomorphic chain": lambda m, z, w, x: m.abs(m.exp(m.sin(z) / (w + 3.0)) * m.log(z)),
    "angle and sqrt": lambda m, z, w, x: (m.angle(m.sqrt(z)) * x) + m.real(m.tanh(w)),
    "complex from reals": lambda m, z, w, x: m.abs(m.complex(x, x * x) * z - w),
    "power and division": lambda m, z, w, x: m.real((z ** 2.5) / (m.square(w) + 1j))
                                             + m.imag(m.reciprocal(z) ** w),
    "inverse trig": lambda m, z, w, x: m.abs(m.arcsin(z * 0.3) + m.arctan(w) * m.arccosh(z + 2)),
    "sigmoid and expm1": lambda m, z, w, x: m.real(m.sigmoid(z) * m.expm1(w * 0.5)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_complex_gradients_pass_complex_finite_differences(name):
    f = PROGRAMS[name]
    zs = [tg.tensor(a[:2, :3], requires_grad=True) for a in (Z, W, X)]
    assert tg.gradcheck(lambda z, w, x: f(tg, z, w, x), zs)
    assert tg.gradgradcheck(lambda z, w, x: f(tg, z, w, x), zs)


@pytest.mark.needs_torch
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_complex_gradients_equal_pytorchs(name):
    torch = _torch()
    f = PROGRAMS[name]
    (z, w, x), (zt, wt, xt) = _pair(Z, W, X)
    f(tg, z, w, x).backward(gradient=np.ones(Z.shape))
    out = f(torch, zt, wt, xt)
    out.backward(torch.ones_like(out))
    for got, want in ((z, zt), (w, wt), (x, xt)):
        if want.grad is None:           # an input the program does not use
            assert got.grad is None
            continue
        assert got.grad.dtype == got.dtype
        np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.needs_torch
def test_second_order_gradients_equal_pytorchs():
    torch = _torch()
    (z, w), (zt, wt) = _pair(Z, W)
    (gz,) = tg.grad((tg.abs(tg.exp(z) * w) ** 2).sum(), [z], create_graph=True)
    (gzt,) = torch.autograd.grad((torch.abs(torch.exp(zt) * wt) ** 2).sum(), [zt],
                                 create_graph=True)
    np.testing.assert_allclose(gz.numpy(), gzt.detach().numpy(), rtol=1e-10)
    tg.real(gz * tg.conj(w)).sum().backward()
    torch.real(gzt * torch.conj(wt)).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), zt.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-10)


def test_gradient_descent_on_a_complex_parameter_decreases_a_real_loss():
    # the convention's point: z - lr * z.grad descends L (here |z - c|^2, minimum at c)
    c = np.array([1 - 2j, 0.5j])
    z = tg.tensor(np.zeros(2, complex), requires_grad=True)
    for _ in range(50):
        loss = tg.abs(z - c) ** 2        # one term per element
        z.grad = None
        loss.backward(gradient=np.ones(2))
        with tg.no_grad():
            z -= 0.1 * z.grad
    np.testing.assert_allclose(z.numpy(), c, atol=1e-4)


_COMPLEX_OPS = sorted(n for n, op in ops_table().items() if op.supports_complex)


def test_the_complex_ops_are_the_ones_documented():
    assert set(_COMPLEX_OPS) >= {"real", "imag", "conj", "angle", "abs", "complex", "multiply",
                                 "divide", "subtract", "exp", "log", "sqrt", "power", "where"}
    assert set(_COMPLEX_OPS) >= tapegrad_elementwise.ufuncs.HOLOMORPHIC


@pytest.mark.parametrize("name", _COMPLEX_OPS)
def test_the_contract_kit_checks_every_complex_op_on_complex_samples(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checks = check_op(name).checks
    assert "complex128 gradient vs finite differences (real and imaginary parts)" in checks
    assert "complex64 preserved" in checks


def _call_on_complex(op, z):
    """op called with complex z (requiring grad) at every tensor position."""
    nin = 3 if op.name == "where" else (op.nin if op.nin > 0 else 1)
    args = [z] * nin
    if op.name == "where":
        args[0] = tg.tensor(np.ones(Z.shape, bool))
    if op.name.endswith("_backward"):
        args = [z, z]
    return op(*args)


@pytest.mark.parametrize("name", sorted(tapegrad_elementwise.OPS))
def test_every_elementwise_op_is_complex_or_refuses_complex_values_that_need_a_gradient(name):
    op = ops_table()[name]
    z = tg.tensor(Z, requires_grad=True)
    if op.supports_complex or op.vjp is None:
        return          # checked by the kit above / not differentiable (bool results)
    try:
        _call_on_complex(op, z)
    except TypeError as exc:
        # the engine's refusal, or NumPy's own (no complex loop: floor, arctan2, ...)
        assert name in str(exc) or "not supported" in str(exc), str(exc)
        return
    raise AssertionError(f"{name} took a complex input that requires grad without being "
                         f"complex=True")


@pytest.mark.parametrize("name", ["maximum", "minimum", "clip", "fmax", "fmin", "relu"])
def test_ordering_ops_compute_as_numpy_and_only_relu_refuses_a_gradient(name):
    # NumPy's ordering ufuncs have complex loops (lexicographic order) and their gradient
    # is a selection, complex-correct as it is (helper cx18); relu is an nn activation
    # with no NumPy complex analog, refused as PyTorch refuses it
    op = ops_table()[name]
    kwargs = {"a_min": -0.5, "a_max": 0.5} if name == "clip" else {}
    args = [Z, W][:op.nin] if op.nin == 2 else [Z]
    with tg.no_grad():
        got = op(*[tg.tensor(a) for a in args], **kwargs).numpy()
    want = getattr(np, "clip" if name == "clip" else name, None)
    want = np.maximum(Z, 0) if name == "relu" else want(*args, **kwargs)
    np.testing.assert_array_equal(got, want)
    inputs = [tg.tensor(a, requires_grad=True) for a in args]
    if name == "relu":
        with pytest.raises(TypeError, match="relu: the op has no complex gradient rule"):
            op(*inputs, **kwargs)
        return
    out = op(*inputs, **kwargs)
    out.backward(tg.tensor(W * 1j))          # (tg.grad is tapegrad-higher's, not a dep here)
    grads = [x.grad for x in inputs]
    # the reference: the selection NumPy's lexicographic order makes, routing g as is
    if name == "clip":
        inside = (Z >= -0.5) & (Z <= 0.5)
        expected = [np.where(inside, W * 1j, 0)]
    else:
        pick_x = (want == Z)
        expected = [np.where(pick_x, W * 1j, 0), np.where(pick_x, 0, W * 1j)]
    for g, e in zip(grads, expected):
        np.testing.assert_array_equal(g.numpy(), e)


def test_comparisons_on_complex_compute_as_numpy():
    # NumPy orders complex values lexicographically; no gradient flows through a bool
    a, b = tg.tensor(Z), tg.tensor(W)
    for name in ("less", "greater_equal", "equal"):
        np.testing.assert_array_equal(ops_table()[name](a, b).numpy(),
                                      getattr(np, name)(Z, W))


def test_the_new_ops_equal_numpy():
    z = tg.tensor(Z)
    np.testing.assert_array_equal(tg.real(z).numpy(), np.real(Z))
    np.testing.assert_array_equal(tg.imag(z).numpy(), np.imag(Z))
    np.testing.assert_array_equal(z.real.numpy(), Z.real)
    np.testing.assert_array_equal(z.imag.numpy(), Z.imag)
    np.testing.assert_array_equal(tg.conj(z).numpy(), np.conj(Z))
    np.testing.assert_array_equal(z.conj().numpy(), Z.conj())
    np.testing.assert_array_equal(tg.conjugate(z).numpy(), np.conjugate(Z))
    np.testing.assert_array_equal(tg.angle(z).numpy(), np.angle(Z))
    np.testing.assert_array_equal(tg.angle(z, deg=True).numpy(), np.angle(Z, deg=True))
    np.testing.assert_array_equal(tg.abs(z).numpy(), np.abs(Z))
    assert tg.abs(z).dtype == np.float64 and tg.abs(tg.tensor(Z.astype(np.complex64))).dtype \
        == np.float32
    x = tg.tensor(X)
    np.testing.assert_array_equal(tg.imag(x).numpy(), np.zeros_like(X))
    np.testing.assert_array_equal(tg.real(x).numpy(), X)
    c = tg.complex(x, x * 2)
    assert c.dtype == np.complex128
    np.testing.assert_array_equal(c.numpy(), X + 2j * X)
    assert tg.complex(tg.tensor(X.astype(np.float32)), tg.tensor(X.astype(np.float32))).dtype \
        == np.complex64
    close = Z.real + 1e-15j
    np.testing.assert_array_equal(tg.real_if_close(tg.tensor(close)).numpy(),
                                  np.real_if_close(close))
    assert tg.real_if_close(tg.tensor(close)).dtype == np.real_if_close(close).dtype
    assert tg.real_if_close(z).dtype == np.complex128
    assert tg.iscomplexobj(z) and not tg.iscomplexobj(x) and tg.iscomplexobj(Z)


def test_complex_refuses_parts_of_different_or_integer_dtypes_as_torch():
    with pytest.raises(TypeError, match="complex: expected real and imag to be both float32 "
                                        "or both float64"):
        tg.complex(tg.tensor(X), tg.tensor(X.astype(np.float32)))
    with pytest.raises(TypeError, match="both float32 or both float64"):
        tg.complex(tg.tensor(np.arange(3)), tg.tensor(np.arange(3)))


@pytest.mark.needs_torch
def test_abs_and_angle_gradients_at_zero_are_zero_as_pytorch():
    torch = _torch()
    z = tg.tensor(np.array([0j, 1 + 1j]), requires_grad=True)
    (tg.abs(z) + tg.angle(z)).sum().backward()
    zt = torch.tensor(np.array([0j, 1 + 1j]), requires_grad=True)
    (torch.abs(zt) + torch.angle(zt)).sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), zt.grad.numpy())
    assert np.isfinite(z.grad.numpy()).all()


@pytest.mark.needs_torch
def test_a_real_input_meeting_complex_values_gets_a_real_gradient():
    torch = _torch()
    (x,), (xt,) = _pair(X)
    tg.abs(x * tg.tensor(Z) + 1j).sum().backward()
    torch.abs(xt * torch.tensor(Z) + 1j).sum().backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


def test_forward_mode_through_complex_ops_matches_finite_differences():
    from tapegrad import _forward
    t = RNG.standard_normal(Z.shape) + 1j * RNG.standard_normal(Z.shape)

    def f(a):
        return tg.exp(a) * tg.conj(a) + tg.abs(a)

    level = _forward.enter_level()
    try:
        d = _forward.detached_dual(tg.tensor(Z))
        _forward.set_tangent(d, level, tg.tensor(t))
        tangent = _forward.tangent_of(f(d), level).numpy()
    finally:
        _forward.exit_level(level)
    eps = 1e-6
    with tg.no_grad():
        fd = (f(tg.tensor(Z + eps * t)).numpy() - f(tg.tensor(Z - eps * t)).numpy()) / (2 * eps)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-8)


def test_vmap_of_a_complex_function_equals_a_loop():
    f = lambda a: tg.abs(tg.exp(a) * tg.conj(a))      # noqa: E731
    got = vmap_call(f)(tg.tensor(Z)).numpy()
    want = np.stack([f(tg.tensor(row)).numpy() for row in Z])
    np.testing.assert_array_equal(got, want)


def test_compile_of_a_complex_step_replays_bit_identically():
    def step(z, w):
        loss = tg.abs(tg.exp(z) * w) ** 2
        g = grad_of(loss, z, tg.tensor(np.ones(Z.shape)))
        return loss, g

    fast = tg.compile(step)
    for k in range(3):
        z = tg.tensor(Z + k, requires_grad=True)
        w = tg.tensor(W)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # a CompileWarning if it runs eagerly
            got = fast(z, w)
        want = step(tg.tensor(Z + k, requires_grad=True), w)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_complex_sign_is_z_over_abs_z_with_pytorchs_sgn_gradient():
    # sign(z) = z/|z| moves only along the unit circle: its gradient for
    # L = Re sum(conj(w) sign(z)), by central differences on the real and imaginary parts
    z0 = np.array([0.3 + 0.4j, -1.5 + 0.2j, 0.7 - 2.1j])
    w = np.array([1.0 - 0.5j, 0.25j, -2.0 + 1.0j])

    def loss(z):
        return float(np.real(np.sum(np.conj(w) * np.sign(z))))
    eps = 1e-7
    want = np.array([(loss(z0 + eps * e) - loss(z0 - eps * e)) / (2 * eps)
                     + 1j * (loss(z0 + 1j * eps * e) - loss(z0 - 1j * eps * e)) / (2 * eps)
                     for e in np.eye(3)])
    z = tg.tensor(z0, requires_grad=True)
    s = tg.sign(z)
    np.testing.assert_array_equal(s.numpy(), np.sign(z0))
    s.backward(tg.tensor(w))
    np.testing.assert_allclose(z.grad.numpy(), want, rtol=1e-6)
    # the closed form, and 0 at 0 (PyTorch's sgn)
    u = z0 / np.abs(z0)
    np.testing.assert_allclose(z.grad.numpy(), 1j * u * np.imag(np.conj(u) * w) / np.abs(z0),
                               rtol=1e-13)
    z = tg.tensor(np.array([0j, 1 + 1j]), requires_grad=True)
    tg.sign(z).backward(tg.tensor(np.array([1 + 1j, 0j])))
    np.testing.assert_array_equal(z.grad.numpy(), np.zeros(2, complex))


@pytest.mark.needs_torch
def test_complex_sign_matches_torch_sgn():
    torch = _torch()
    z0 = np.array([0.3 + 0.4j, -1.5 + 0.2j, 0.0j, 0.7 - 2.1j])
    w = np.array([1.0 - 0.5j, 0.25j, 3.0 + 1.0j, -2.0 + 1.0j])
    z = tg.tensor(z0, requires_grad=True)
    tg.sign(z).backward(tg.tensor(w))
    t = torch.tensor(z0, requires_grad=True)
    torch.sgn(t).backward(torch.tensor(w))
    np.testing.assert_allclose(z.grad.numpy(), t.grad.numpy(), rtol=1e-13, atol=1e-15)


def test_rint_and_round_of_complex_round_each_part_with_a_zero_gradient():
    z0 = np.array([0.3 + 1.6j, -1.5 + 0.24j, 2.71 - 2.1j])
    z = tg.tensor(z0, requires_grad=True)
    r = tg.rint(z) + tg.round(z, 1)
    np.testing.assert_array_equal(r.numpy(), np.rint(z0) + np.round(z0, 1))
    r.backward(tg.tensor(np.ones(3, complex)))
    np.testing.assert_array_equal(z.grad.numpy(), np.zeros(3, complex))


def test_nan_to_num_of_complex_replaces_and_masks_each_part():
    z0 = np.array([complex(np.nan, 1.0), complex(2.0, np.inf), 1 - 1j, complex(-np.inf, np.nan)])
    g0 = np.array([1 + 2j, 3 - 1j, 0.5 + 0.25j, -1 + 1j])
    z = tg.tensor(z0, requires_grad=True)
    out = tg.nan_to_num(z, nan=-1.0, posinf=9.0, neginf=-9.0)
    np.testing.assert_array_equal(out.numpy(), np.nan_to_num(z0, nan=-1.0, posinf=9.0,
                                                             neginf=-9.0))
    out.backward(tg.tensor(g0))
    # each part of g passes where that part of z was finite
    want = np.array([2j, 3, 0.5 + 0.25j, 0])
    np.testing.assert_array_equal(z.grad.numpy(), want)
