import numpy as np
import pytest
import tapegrad as tg


class Scale(tg.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x + x if factor == 2 else tg.tensor(x.numpy() * factor)

    @staticmethod
    def backward(ctx, g):
        return tg.astype(g, g.dtype) + g if ctx.factor == 2 else None, None


class SplitTwo(tg.Function):
    """Two outputs: (x + 1, x + 2)."""

    @staticmethod
    def forward(ctx, x):
        return x + 1.0, x + 2.0

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 + g2


class CubeFn(tg.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return tg.cube(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return tg.times(g, tg.times(tg.times(x, x), 3.0))


def test_function_with_non_tensor_argument():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = Scale.apply(x, 2)
    assert y.grad_fn.name == "Scale"
    y.backward(tg.ones(2))
    assert x.grad.tolist() == [2.0, 2.0]


def test_function_multiple_outputs_fill_missing_grads_with_zeros():
    x = tg.tensor([1.0], requires_grad=True)
    a, b = SplitTwo.apply(x)
    assert a.output_nr == 0 and b.output_nr == 1
    (a + b).backward()
    assert x.grad.item() == 2.0
    x.grad = None
    a, b = SplitTwo.apply(x)
    b.backward()                   # a gets no gradient: passed as zeros
    assert x.grad.item() == 1.0


def test_function_forward_runs_without_recording():
    x = tg.tensor([1.0], requires_grad=True)
    a, _ = SplitTwo.apply(x)
    assert a.grad_fn.name == "SplitTwo"


def test_function_saved_tensor_modified_in_place_raises(times):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    h = x + 0.0
    y = CubeFn.apply(h)
    h.add_(1.0)
    with pytest.raises(RuntimeError, match="in-place"):
        y.backward(tg.ones(2))


def test_function_backward_twice_needs_retain_graph(times):
    x = tg.tensor([2.0], requires_grad=True)
    y = CubeFn.apply(x)
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()


def test_function_is_differentiable_twice(times):
    x = tg.tensor([2.0], requires_grad=True)
    y = CubeFn.apply(x)
    y.backward(create_graph=True)
    g = x.grad
    assert g.item() == pytest.approx(12.0)
    x.grad = None
    g.backward()
    assert x.grad.item() == pytest.approx(12.0)   # d(3x^2)/dx = 6x


def test_function_gradcheck(times):
    x = tg.tensor(np.random.default_rng(0).standard_normal(4), requires_grad=True)
    assert tg.gradcheck(CubeFn.apply, x)


def test_function_without_grad_inputs_builds_no_graph():
    y = SplitTwo.apply(tg.tensor([1.0]))
    assert not y[0].requires_grad


class TimesW(tg.Function):
    @staticmethod
    def forward(ctx, x, w=None):
        return x + w

    @staticmethod
    def backward(ctx, g):
        return g, g


def test_function_tensor_by_keyword_that_requires_grad_raises():
    # Its gradient would be silently dropped (and the output would not require grad).
    x = tg.tensor([1.0])
    w = tg.tensor([2.0], requires_grad=True)
    with pytest.raises(TypeError, match="TimesW.apply.*'w'.*positional"):
        TimesW.apply(x, w=w)
    with tg.no_grad():
        assert TimesW.apply(x, w=w).tolist() == [3.0]
    assert TimesW.apply(x, w=tg.tensor([2.0])).tolist() == [3.0]     # no grad: fine


class Identity(tg.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def test_function_returning_its_input_shares_its_version_counter():
    # PyTorch treats a returned input as a view of it: in-place on it must not rewrite a
    # leaf that requires grad silently, nor leave the leaf's version unchanged.
    x = tg.tensor([1.0], requires_grad=True)
    y = Identity.apply(x)
    assert y is not x and y.requires_grad
    with pytest.raises(RuntimeError, match="in-place"):
        y += 1.0
    assert x.tolist() == [1.0]
    z = tg.tensor([1.0], requires_grad=True) + 0.0   # a non-leaf input
    y = Identity.apply(z)
    saved = z._version
    with tg.no_grad():
        y.add_(1.0)
    assert z._version != saved and z.tolist() == [2.0]


class ToComplex(tg.Function):
    @staticmethod
    def forward(ctx, x):
        return tg.tensor(x.numpy() * 1j)

    @staticmethod
    def backward(ctx, g):
        return g * -1j          # conj(d(ix)/dx) * g; the engine keeps the real part for x


def test_function_with_a_complex_output_differentiates_with_the_real_part_for_a_real_input():
    torch = pytest.importorskip("torch")
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = ToComplex.apply(x)
    assert y.dtype == np.complex128 and y.requires_grad
    g = np.array([1j, 2 - 1j])
    y.backward(gradient=g)
    xt = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    (xt * 1j).backward(torch.tensor(g))
    assert x.grad.dtype == np.float64
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy())
    assert ToComplex.apply(tg.tensor([1.0])).dtype == np.complex128
