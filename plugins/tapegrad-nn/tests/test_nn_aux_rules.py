"""The normalisation and softmax-family ops reuse forward intermediates in a plain
backward (register_op(aux=)) and recompute them when the rule is recorded.

Each gradient is checked both ways -- a plain backward (aux arrays reused) and
create_graph=True (recomputed) -- against slow NumPy references or finite differences,
and, where torch is installed, against PyTorch (first and second order, float64 and
float32, affine on/off, eps, running statistics with momentum, eval mode).
"""

import numpy as np
import pytest
import tapegrad as tg
from tapegrad._engine import run_backward
from tapegrad_nn import normalization

F = tg.nn.functional


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


def close(a, b, tol=1e-9):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _torch():
    return pytest.importorskip("torch")


def grad(y, xs, g, create_graph=False):
    """tg.grad's core (tapegrad-higher is not a dependency of tapegrad-nn)."""
    return run_backward((y,), (g,), True, create_graph, tuple(xs), True)


def grads_both_ways(f, arrays, gout):
    """(output, grads of a plain backward, grads with create_graph=True)."""
    out = []
    for create_graph in (False, True):
        xs = [tg.tensor(a, requires_grad=True) for a in arrays]
        y = f(*xs)
        gs = grad(y, xs, tg.tensor(gout), create_graph)
        out.append([g.detach().numpy() for g in gs])
    return y.detach().numpy(), out[0], out[1]


# ---------------------------------------------------------------------------------------
# The rule really takes the aux path in a plain backward (and only there)
# ---------------------------------------------------------------------------------------

def test_a_plain_layer_norm_backward_computes_the_moments_once(monkeypatch):
    calls = []
    moments = normalization._moments
    monkeypatch.setattr(normalization, "_moments",
                        lambda *a: calls.append(1) or moments(*a))
    x = tg.tensor(rand(4, 6), requires_grad=True)
    F.layer_norm(x, (6,)).backward(tg.tensor(rand(4, 6, seed=1)))
    assert len(calls) == 1                       # the forward's; the rule reuses r
    calls.clear()
    y = F.layer_norm(x, (6,))
    grad(y, [x], tg.tensor(rand(4, 6, seed=1)), True)
    assert len(calls) == 2                       # recorded: recomputed from x


def test_a_plain_log_softmax_backward_reuses_the_forwards_softmax(monkeypatch):
    calls = []
    x = tg.tensor(rand(3, 5), requires_grad=True)
    y = F.log_softmax(x, -1)
    exp = tg.exp
    monkeypatch.setattr(tg, "exp", lambda *a, **k: calls.append(1) or exp(*a, **k))
    y.backward(tg.tensor(rand(3, 5, seed=1)))
    assert calls == []


# ---------------------------------------------------------------------------------------
# Both ways against references (no torch)
# ---------------------------------------------------------------------------------------

def ref_standardize(x, axis, eps):
    m = x.mean(axis=axis, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=axis, keepdims=True) + eps)


def numeric_vjp(f, x, gout, eps=1e-6):
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        out[i] = ((f(xp) - f(xm)) * gout).sum() / (2 * eps)
    return out


@pytest.mark.parametrize("shape,axis", [((3, 4, 5), (2,)), ((3, 4, 5), (1, 2)),
                                        ((4, 3, 2, 2), (0, 2, 3)), ((5, 3), (0,)),
                                        ((2, 3, 4), (0, 1))])
def test_standardize_gradient_both_ways_equals_finite_differences(shape, axis):
    x, gout = rand(*shape), rand(*shape, seed=1)
    y, plain, recorded = grads_both_ways(lambda x: tg._standardize(x, axis, 1e-3), [x], gout)
    close(y, ref_standardize(x, axis, 1e-3))
    want = numeric_vjp(lambda a: ref_standardize(a, axis, 1e-3), x, gout)
    close(plain[0], want, 1e-6)
    close(recorded[0], want, 1e-6)


def test_the_channel_path_handles_non_contiguous_inputs_and_long_rows():
    # (N, C, L) with L > 4096 takes the pairwise sums; a transposed input is copied.
    x = rand(2, 3, 4100)
    gout = rand(2, 3, 4100, seed=1)
    y, plain, recorded = grads_both_ways(lambda x: tg._standardize(x, (0, 2), 1e-5), [x], gout)
    close(y, ref_standardize(x, (0, 2), 1e-5), 1e-9)
    xt = rand(4, 5, 3).transpose(0, 2, 1)                             # non-contiguous
    gt = rand(4, 3, 5, seed=2)
    y, plain, recorded = grads_both_ways(lambda x: tg._standardize(x, (0, 2), 1e-3), [xt], gt)
    close(y, ref_standardize(xt, (0, 2), 1e-3))
    want = numeric_vjp(lambda a: ref_standardize(a, (0, 2), 1e-3), xt, gt)
    close(plain[0], want, 1e-6)
    close(recorded[0], want, 1e-6)


def test_batch_moments_equal_numpys_mean_and_unbiased_var():
    x = rand(4, 3, 5)
    for axis, ddof in (((0, 2), 1), ((0, 2), 0), ((0,), 1), ((1, 2), 1)):
        got = tg._batch_moments(tg.tensor(x), axis, ddof).numpy()
        close(got[0], x.mean(axis=axis), 1e-12)
        close(got[1], x.var(axis=axis, ddof=ddof), 1e-12)


def ref_log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("axis", [-1, 0, (0, 1), None])
def test_softmax_family_gradients_both_ways_equal_finite_differences(axis):
    x, gout = rand(3, 4), rand(3, 4, seed=1)
    for f, ref in ((lambda x: F.log_softmax(x, axis), lambda a: ref_log_softmax(a, axis)),
                   (lambda x: F.softmax(x, axis), lambda a: np.exp(ref_log_softmax(a, axis)))):
        y, plain, recorded = grads_both_ways(f, [x], gout)
        close(y, ref(x), 1e-12)
        want = numeric_vjp(ref, x, gout)
        close(plain[0], want, 1e-6)
        close(recorded[0], want, 1e-6)


def test_cross_entropy_gradient_both_ways_equals_finite_differences():
    x, labels = rand(5, 4), np.array([0, 3, 1, 1, 2])
    probs = np.abs(rand(5, 4, seed=2))
    probs /= probs.sum(-1, keepdims=True)
    for target, kw in ((labels, {}), (labels, {"label_smoothing": 0.2}),
                       (labels, {"weight": np.array([1.0, 2.0, 0.5, 1.5])}),
                       (probs, {}), (labels, {"reduction": "none"})):
        gout = rand(5, seed=3) if kw.get("reduction") == "none" else np.array(0.7)

        def ref(a, target=target, kw=kw):
            ls = ref_log_softmax(a)
            if target.dtype.kind == "f":
                return -(target * ls).sum(-1).mean()
            c = a.shape[-1]
            eps = kw.get("label_smoothing", 0.0)
            w = kw.get("weight", np.ones(c))
            soft = (1 - eps) * np.eye(c)[target] + eps / c
            per = -(soft * w * ls).sum(-1)
            if kw.get("reduction") == "none":
                return per
            return per.sum() / w[target].sum()

        y, plain, recorded = grads_both_ways(
            lambda x: F.cross_entropy(x, target, **kw), [x], gout)
        close(y, ref(x), 1e-12)
        want = numeric_vjp(ref, x, gout)
        close(plain[0], want, 1e-6)
        close(recorded[0], want, 1e-6)


# ---------------------------------------------------------------------------------------
# Against PyTorch
# ---------------------------------------------------------------------------------------

def _torch_grads(torch, f, arrays, gout, dtype=None):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    y = f(*ts)
    gs = torch.autograd.grad(y, ts, grad_outputs=torch.tensor(gout))
    return y.detach().numpy(), [g.numpy() for g in gs]


def _compare_both_ways(torch, ours, theirs, arrays, gout, tol=1e-9):
    y, plain, recorded = grads_both_ways(ours, arrays, gout)
    ty, tgr = _torch_grads(torch, theirs, arrays, gout)
    close(y, ty, tol)
    for a, b, c in zip(plain, recorded, tgr):
        close(a, c, tol)
        close(b, c, tol)


@pytest.mark.needs_torch
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("eps", [1e-5, 0.1])
def test_norms_equal_torch_both_ways_affine_on_and_off(affine, eps):
    torch = _torch()
    tF = torch.nn.functional
    x, g4 = rand(3, 4, 5, 2) * 3 + 1, rand(3, 4, 5, 2, seed=9)
    w, b = rand(4, seed=1) + 1, rand(4, seed=2)
    lw, lb = rand(5, 2, seed=3) + 1, rand(5, 2, seed=4)
    cases = [
        (lambda x, w, b: F.layer_norm(x, (5, 2), w, b, eps),
         lambda x, w, b: tF.layer_norm(x, (5, 2), w, b, eps), [x, lw, lb]),
        (lambda x, w: F.rms_norm(x, (5, 2), w, eps),
         lambda x, w: tF.rms_norm(x, (5, 2), w, eps), [x, lw]),
        (lambda x, w, b: F.group_norm(x, 2, w, b, eps),
         lambda x, w, b: tF.group_norm(x, 2, w, b, eps), [x, w, b]),
        (lambda x, w, b: F.batch_norm(x, None, None, w, b, True, 0.1, eps),
         lambda x, w, b: tF.batch_norm(x, None, None, w, b, True, 0.1, eps), [x, w, b]),
        (lambda x, w, b: F.instance_norm(x, None, None, w, b, eps=eps),
         lambda x, w, b: tF.instance_norm(x, None, None, w, b, eps=eps), [x, w, b]),
    ]
    for ours, theirs, arrays in cases:
        if not affine:
            n = 1
            _compare_both_ways(torch, lambda x, o=ours, a=arrays: o(x, *[None] * (len(a) - 1)),
                               lambda x, t=theirs, a=arrays: t(x, *[None] * (len(a) - 1)),
                               arrays[:n], g4)
        else:
            _compare_both_ways(torch, ours, theirs, arrays, g4)


@pytest.mark.needs_torch
@pytest.mark.parametrize("momentum", [0.1, 0.7])
def test_batch_norm_running_stats_and_eval_equal_torch(momentum):
    torch = _torch()
    tF = torch.nn.functional
    rm, rv = rand(3, seed=5), np.abs(rand(3, seed=6)) + 0.5
    trm, trv = torch.tensor(rm.copy()), torch.tensor(rv.copy())
    w, b = rand(3, seed=1), rand(3, seed=2)
    for step in range(3):
        x = rand(4, 3, 2, 3, seed=step) * (step + 1) + step
        g = rand(4, 3, 2, 3, seed=10 + step)
        _compare_both_ways(
            torch, lambda x, w, b: F.batch_norm(x, rm, rv, w, b, True, momentum, 1e-5),
            lambda x, w, b: tF.batch_norm(x, trm, trv, w, b, True, momentum, 1e-5),
            [x, w, b], g)
        # grads_both_ways ran our forward twice (two updates): run torch's once more
        tF.batch_norm(torch.tensor(x), trm, trv, None, None, True, momentum, 1e-5)
        close(rm, trm.numpy(), 1e-12)
        close(rv, trv.numpy(), 1e-12)           # the unbiased batch variance
    x = rand(5, 3, 4, seed=20)
    _compare_both_ways(torch, lambda x, w, b: F.batch_norm(x, rm, rv, w, b, False),
                       lambda x, w, b: tF.batch_norm(x, trm, trv, w, b, False),
                       [x, w, b], rand(5, 3, 4, seed=21))
    _compare_both_ways(torch, lambda x: F.batch_norm(x, rm, rv, None, None, False, eps=0.1),
                       lambda x: tF.batch_norm(x, trm, trv, None, None, False, eps=0.1),
                       [x], rand(5, 3, 4, seed=22))


@pytest.mark.needs_torch
def test_batch_norm_module_momentum_none_is_torchs_cumulative_average():
    torch = _torch()
    ours = tg.nn.BatchNorm2d(3, momentum=None)
    theirs = torch.nn.BatchNorm2d(3, momentum=None).double()
    for step in range(4):
        x = rand(4, 3, 2, 2, seed=step) * (step + 1)
        ours(tg.tensor(x))
        theirs(torch.tensor(x))
    close(ours.running_mean.numpy(), theirs.running_mean.numpy(), 1e-12)
    close(ours.running_var.numpy(), theirs.running_var.numpy(), 1e-12)
    ours.eval()
    theirs.eval()
    x = rand(2, 3, 2, 2, seed=9)
    close(ours(tg.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), 1e-12)


@pytest.mark.needs_torch
def test_float32_w7_and_w8_shapes_stay_float32_and_close_to_torch():
    torch = _torch()
    tF = torch.nn.functional
    f32 = np.float32
    x, gx = rand(16, 8, 32).astype(f32), rand(16, 8, 32, seed=1).astype(f32)
    w, b = (rand(32, seed=2) + 1).astype(f32), rand(32, seed=3).astype(f32)
    xb, gb = rand(16, 8, 4, 4).astype(f32), rand(16, 8, 4, 4, seed=4).astype(f32)
    wb, bb = (rand(8, seed=5) + 1).astype(f32), rand(8, seed=6).astype(f32)
    rm, rv = np.zeros(8, f32), np.ones(8, f32)
    trm, trv = torch.zeros(8), torch.ones(8)
    cases = [
        (lambda x, w, b: F.layer_norm(x, (32,), w, b),
         lambda x, w, b: tF.layer_norm(x, (32,), w, b), [x, w, b], gx),
        (lambda x, w, b: F.batch_norm(x, rm, rv, w, b, True),
         lambda x, w, b: tF.batch_norm(x, trm, trv, w, b, True), [xb, wb, bb], gb),
        (lambda x: F.softmax(x, -1), lambda x: tF.softmax(x, -1), [x], gx),
        (lambda x: F.log_softmax(x, -1), lambda x: tF.log_softmax(x, -1), [x], gx),
    ]
    for ours, theirs, arrays, g in cases:
        xs = [tg.tensor(a, requires_grad=True) for a in arrays]
        y = ours(*xs)
        y.backward(tg.tensor(g))
        ty, tgr = _torch_grads(torch, theirs, arrays, g)
        assert y.dtype == np.float32 and all(t.grad.dtype == np.float32 for t in xs)
        close(y.numpy(), ty, 2e-5)
        for t, want in zip(xs, tgr):
            np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-4, atol=1e-4)
    close(rm, trm.numpy(), 1e-6)
    close(rv, trv.numpy(), 1e-6)
    labels = np.random.default_rng(7).integers(0, 32, 16 * 8)
    xs = tg.tensor(x.reshape(-1, 32), requires_grad=True)
    F.cross_entropy(xs, labels).backward()
    xt = torch.tensor(x.reshape(-1, 32), requires_grad=True)
    tF.cross_entropy(xt, torch.tensor(labels)).backward()
    assert xs.grad.dtype == np.float32
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.needs_torch
@pytest.mark.parametrize("which", ["softmax", "log_softmax", "cross_entropy", "instance_norm",
                                   "batch_norm_eval"])
def test_second_derivatives_equal_torch(which):
    torch = _torch()
    x, gout, v = rand(3, 4, 5), rand(3, 4, 5, seed=3), rand(3, 4, 5, seed=4)
    labels = np.arange(12).reshape(3, 4) % 5
    rm, rv = rand(4, seed=5), np.abs(rand(4, seed=6)) + 0.5
    calls = {
        "softmax": lambda m, x, lib: m.softmax(x, 1),
        "log_softmax": lambda m, x, lib: m.log_softmax(x, -1),
        # the class axis: tapegrad's is the last, torch's axis 1
        "cross_entropy": lambda m, x, lib: m.cross_entropy(
            x if lib == "tg" else x.permute(0, 2, 1),
            labels if lib == "tg" else torch.tensor(labels), reduction="none",
            label_smoothing=0.1),
        "instance_norm": lambda m, x, lib: m.instance_norm(x, eps=1e-3),
        "batch_norm_eval": lambda m, x, lib: m.batch_norm(
            x, rm if lib == "tg" else torch.tensor(rm), rv if lib == "tg" else torch.tensor(rv),
            None, None, False),
    }
    f = calls[which]
    xt = tg.tensor(x, requires_grad=True)
    y = f(F, xt, "tg")
    g = gout[..., 0] if y.ndim == 2 else gout
    (gx,) = grad(y, [xt], tg.tensor(g), True)
    # batch_norm in eval is affine in x: its gradient does not depend on x at all
    hx = grad(gx, [xt], tg.tensor(v))[0] if gx.requires_grad else np.zeros_like(x)
    xs = torch.tensor(x, requires_grad=True)
    ty = f(torch.nn.functional, xs, "torch")
    (tgx,) = torch.autograd.grad(ty, xs, grad_outputs=torch.tensor(g), create_graph=True)
    (thx,) = torch.autograd.grad(tgx, xs, grad_outputs=torch.tensor(v), allow_unused=True)
    close(gx.detach().numpy(), tgx.detach().numpy(), 1e-9)
    close(np.asarray(hx), np.zeros_like(x) if thx is None else thx.numpy(), 1e-8)
