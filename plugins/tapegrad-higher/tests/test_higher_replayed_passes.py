"""Jacobians and Hessians with many passes record the first pass and replay it for the
rest (see Note: [passes replayed from one recording]). Replays must give exactly what
one eager pass per row gives, and fall back to eager passes where a replay could differ."""

import warnings

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_higher.functional as functional


@pytest.fixture
def eager_passes(monkeypatch):
    """Run a block with replay switched off (every pass eager), for reference results."""
    def run(fn, *args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(functional, "_REPLAY_FROM", 10 ** 9)
            return fn(*args, **kwargs)
    return run


def _as_arrays(result):
    if isinstance(result, tuple):
        return [a for r in result for a in _as_arrays(r)]
    return [result.numpy()]


def _same(a, b):
    for x, y in zip(_as_arrays(a), _as_arrays(b), strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert np.array_equal(x, y), np.abs(x - y).max()


rng = np.random.default_rng(3)
W = tg.tensor(rng.standard_normal((12, 12)) / 4)
V = tg.tensor(rng.standard_normal((12, 5)))


def mlp(x):
    return (tg.tanh(W @ x) ** 2).sum() + tg.sin(x).sum() * 0.5


def test_a_hessian_with_replayed_rows_equals_one_eager_pass_per_row(eager_passes, monkeypatch):
    compiled = []
    real_compile = tg.compile
    monkeypatch.setattr(tg, "compile", lambda fn, **kw: compiled.append(fn) or real_compile(fn, **kw))
    x = tg.tensor(rng.standard_normal(12))
    H = tg.hessian(mlp, x)
    assert len(compiled) == 1               # the 12 rows: one recorded, 11 replayed
    monkeypatch.setattr(tg, "compile", real_compile)
    _same(H, eager_passes(tg.hessian, mlp, x))
    # and it is the Hessian: symmetric, and the finite-difference Jacobian of the gradient
    assert np.allclose(H.numpy(), H.numpy().T, atol=1e-12)
    eps, x0 = 1e-6, x.numpy()
    numeric = np.empty((12, 12))
    for k in range(12):
        d = np.zeros(12)
        d[k] = eps
        gp = tg.tensor(x0 + d, requires_grad=True)
        gm = tg.tensor(x0 - d, requires_grad=True)
        mlp(gp).backward()
        mlp(gm).backward()
        numeric[:, k] = (gp.grad.numpy() - gm.grad.numpy()) / (2 * eps)
    assert np.allclose(H.numpy(), numeric, atol=1e-7)


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_jacobians_of_several_inputs_and_outputs_with_unused_inputs(strategy, eager_passes):
    x = tg.tensor(rng.standard_normal(12))
    y = tg.tensor(rng.standard_normal(5))
    unused = tg.tensor(rng.standard_normal(3))

    def f(x, y, unused):
        h = tg.tanh(x @ V) * y
        return h, tg.exp(x[:9]).reshape(3, 3)

    J = tg.jacobian(f, (x, y, unused), strategy=strategy)
    _same(J, eager_passes(tg.jacobian, f, (x, y, unused), strategy=strategy))
    assert not J[0][2].numpy().any() and J[1][2].shape == (3, 3, 3)
    assert np.array_equal(J[1][0].numpy()[0, 1], np.eye(12)[1] * np.exp(x.numpy()[1]))


def test_a_float32_hessian_is_float32_and_equal_to_eager(eager_passes):
    x = tg.tensor(rng.standard_normal(10).astype(np.float32))
    f = lambda z: (tg.tanh(z) * z).sum()  # noqa: E731
    H = tg.hessian(f, x)
    assert H.dtype == np.float32
    _same(H, eager_passes(tg.hessian, f, x))


class _SignDependentBackward(tg.Function):
    """A custom backward that branches on its gradient's values in Python: a replay would
    bake in the first pass's branch, so graphs with a tg.Function run every pass eagerly."""

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * 2.0 if float(g.numpy().sum()) >= 0 else g * 3.0


def test_a_graph_with_a_custom_function_runs_every_pass_eagerly(monkeypatch):
    x = tg.tensor(np.linspace(-1, 1, 10))
    # the last five outputs are negated, so their rows' seeds reach the custom backward
    # negated and take the other branch: d out_r / d x_r = 2 for r < 5, -3 after
    sign = tg.tensor(np.r_[np.ones(5), -np.ones(5)])
    f = lambda z: _SignDependentBackward.apply(z) * sign  # noqa: E731
    expected = np.diag(np.r_[np.full(5, 2.0), np.full(5, -3.0)])
    assert np.array_equal(tg.jacobian(f, x).numpy(), expected)
    # with this check bypassed, tg.compile's recorder refuses the Function's backward
    # too (replay_backward is False), so the passes still run eagerly and stay exact
    monkeypatch.setattr(functional, "_replayable", lambda roots: True)
    assert np.array_equal(tg.jacobian(f, x).numpy(), expected)


def test_a_tensor_hook_in_the_graph_is_run_on_every_pass_without_a_warning(eager_passes):
    calls = []
    x = tg.tensor(rng.standard_normal(12))

    def f(z):
        h = tg.tanh(z) * 2.0
        h.register_hook(lambda g: calls.append(1) or g * 10.0)
        return h

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        J = tg.jacobian(f, x)
    assert len(calls) == 12
    _same(J, eager_passes(tg.jacobian, f, x))
    assert np.allclose(np.diag(J.numpy()), 20.0 * (1 - np.tanh(x.numpy()) ** 2))


def test_a_hessian_inside_a_compiled_function_is_recorded_into_it(eager_passes):
    x = tg.tensor(rng.standard_normal(12))
    compiled = tg.compile(lambda z: tg.hessian(mlp, z))
    first, again = compiled(x), compiled(x + 1.0)
    _same(first, eager_passes(tg.hessian, mlp, x))
    _same(again, eager_passes(tg.hessian, mlp, x + 1.0))
    assert compiled.cache_info().hits == 1


def test_create_graph_hessians_are_still_differentiable():
    x = tg.tensor(rng.standard_normal(9), requires_grad=True)
    H = tg.hessian(lambda z: (z ** 3).sum(), x, create_graph=True)
    H.sum().backward()
    assert np.allclose(x.grad.numpy(), 6.0)
