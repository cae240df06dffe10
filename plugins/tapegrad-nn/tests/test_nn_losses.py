"""The losses of tapegrad_nn.losses and cross_entropy's weight / ignore_index /
label_smoothing: values against NumPy formulas, gradients (finite differences), errors;
``needs_torch`` tests compare each function and argument combination with
torch.nn.functional (forward, gradient, second order)."""

import math

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tgt

F = tg.nn.functional
RNG = np.random.default_rng(7)
X = RNG.standard_normal((6, 4)) * 2
LABELS = np.array([0, 3, 1, -100, 2, 3])
W = np.array([0.5, 1.0, 2.0, 0.25])


def _lsm(x):
    z = x - x.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _nll_ref(lp, y, w=None, ignore=-100, eps=0.0, reduction="mean"):
    n, c = lp.shape
    w = np.ones(c) if w is None else w
    keep = y != ignore
    ys = np.where(keep, y, 0)
    nll = -w[ys] * lp[np.arange(n), ys] * keep
    smooth = -(lp * w).sum(-1) * keep
    rows = (1 - eps) * nll + eps / c * smooth
    if reduction == "mean":
        return rows.sum() / (w[ys] * keep).sum()
    return rows.sum() if reduction == "sum" else rows


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weight", [None, W])
def test_nll_loss_matches_weighted_mean(reduction, weight):
    lp = _lsm(X)
    got = F.nll_loss(tg.tensor(lp), LABELS, weight=weight, reduction=reduction)
    np.testing.assert_allclose(got.numpy(), _nll_ref(lp, LABELS, weight, reduction=reduction),
                               rtol=1e-12)
    assert F.nll_loss is tg.nll_loss


@pytest.mark.parametrize("eps", [0.0, 0.2])
@pytest.mark.parametrize("weight", [None, W])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_weight_ignore_index_label_smoothing(eps, weight, reduction):
    got = tg.cross_entropy(tg.tensor(X), LABELS, weight=weight, ignore_index=-100,
                           label_smoothing=eps, reduction=reduction)
    np.testing.assert_allclose(got.numpy(), _nll_ref(_lsm(X), LABELS, weight, -100, eps,
                                                     reduction), rtol=1e-12)
    x = tg.tensor(X, requires_grad=True)
    assert tgt.gradcheck(lambda v: tg.cross_entropy(v, LABELS, weight=weight,
                                                    label_smoothing=eps, reduction=reduction), x)
    assert tgt.gradgradcheck(lambda v: tg.cross_entropy(v, LABELS, weight=weight,
                                                        label_smoothing=eps), x)


def test_cross_entropy_equals_nll_of_log_softmax_and_keeps_its_fused_path():
    y = np.array([0, 3, 1, 0, 2, 3])
    a = tg.cross_entropy(tg.tensor(X), y, ignore_index=1, weight=W)
    b = tg.nll_loss(tg.log_softmax(tg.tensor(X)), y, ignore_index=1, weight=W)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-13)
    x = tg.tensor(X, requires_grad=True)
    tg.cross_entropy(x, y).backward()
    np.testing.assert_allclose(x.grad.numpy(), (np.exp(_lsm(X)) - np.eye(4)[y]) / 6, rtol=1e-12)


def test_cross_entropy_probabilities_with_weight_and_smoothing():
    p = np.exp(_lsm(RNG.standard_normal((6, 4))))
    got = tg.cross_entropy(tg.tensor(X), p, weight=W, label_smoothing=0.3)
    ref = -(W * (0.7 * p + 0.3 / 4) * _lsm(X)).sum(-1).mean()
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12)
    t = tg.tensor(p, requires_grad=True)
    assert tgt.gradcheck(lambda v: tg.cross_entropy(tg.tensor(X), v, weight=W,
                                                    label_smoothing=0.3), t)


def test_all_ignored_mean_is_nan_as_torch():
    out = tg.nll_loss(tg.tensor(_lsm(X[:2])), np.array([-100, -100]))
    assert np.isnan(out.item())
    assert np.isnan(tg.cross_entropy(tg.tensor(X[:2]), np.array([-100, -100])).item())


def test_default_ignore_index_ignores_label_minus_100_as_torch():
    kept = tg.cross_entropy(tg.tensor(X[[0, 1, 2, 4, 5]]), LABELS[[0, 1, 2, 4, 5]])
    np.testing.assert_allclose(tg.cross_entropy(tg.tensor(X), LABELS).numpy(), kept.numpy(),
                               rtol=1e-13)


def _sig(x):
    return 1 / (1 + np.exp(-x))


A, B = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 3))
P = RNG.uniform(0.05, 0.95, (5, 3))
T = RNG.uniform(0.0, 1.0, (5, 3))
Y = np.array([1.0, -1.0, 1.0, -1.0, -1.0])


def _huber(d, delta):
    return np.where(np.abs(d) < delta, 0.5 * d * d, delta * (np.abs(d) - 0.5 * delta))


def _cos(a, b, axis=-1):
    return (a * b).sum(axis) / (np.linalg.norm(a, axis=axis) * np.linalg.norm(b, axis=axis))


NUMPY = [
    ("l1", lambda: tg.l1_loss(A, B), np.abs(A - B).mean()),
    ("smooth_l1", lambda: tg.smooth_l1_loss(A, B, beta=0.5, reduction="sum"),
     (_huber(A - B, 0.5) / 0.5).sum()),
    ("huber", lambda: tg.huber_loss(A, B, delta=0.7, reduction="none"), _huber(A - B, 0.7)),
    ("bce", lambda: tg.binary_cross_entropy(P, T, weight=W[:3]),
     (-(T * np.log(P) + (1 - T) * np.log(1 - P)) * W[:3]).mean()),
    ("bce_clamped", lambda: tg.binary_cross_entropy(np.array([0.0, 1.0]), np.array([1.0, 0.0]),
                                                    reduction="none"), [100.0, 100.0]),
    ("kl", lambda: F.kl_div(np.log(P), T, reduction="batchmean"),
     (T * (np.log(T) - np.log(P))).sum() / 5),
    ("kl_log", lambda: F.kl_div(np.log(P), np.log(T), reduction="sum", log_target=True),
     (T * (np.log(T) - np.log(P))).sum()),
    ("kl_zero", lambda: F.kl_div(np.log(P[0]), np.array([0.0, 0.5, 0.5]), reduction="none"),
     [0.0, 0.5 * (np.log(0.5) - np.log(P[0, 1])), 0.5 * (np.log(0.5) - np.log(P[0, 2]))]),
    ("poisson", lambda: tg.poisson_nll_loss(A, 3 * T), (np.exp(A) - 3 * T * A).mean()),
    ("poisson_full", lambda: tg.poisson_nll_loss(P, 3 * T, log_input=False, full=True,
                                                 reduction="none"),
     P - 3 * T * np.log(P + 1e-8) + np.where(3 * T > 1, 3 * T * np.log(3 * T) - 3 * T
                                            + 0.5 * np.log(2 * np.pi * 3 * T), 0)),
    ("gaussian", lambda: tg.gaussian_nll_loss(A, B, P, full=True),
     (0.5 * (np.log(P) + (A - B) ** 2 / P) + 0.5 * np.log(2 * np.pi)).mean()),
    ("gaussian_clamp", lambda: tg.gaussian_nll_loss(A, B, np.zeros(5), reduction="none"),
     0.5 * (np.log(1e-6) + (A - B) ** 2 / 1e-6)),
    ("cosine_similarity", lambda: tg.cosine_similarity(A, B), _cos(A, B, 1)),
    ("cosine_similarity0", lambda: tg.cosine_similarity(A, B, dim=0), _cos(A, B, 0)),
    ("cosine_embedding", lambda: tg.cosine_embedding_loss(A, B, Y, margin=0.1, reduction="none"),
     np.where(Y == 1, 1 - _cos(A, B), np.maximum(0, _cos(A, B) - 0.1))),
    ("margin_ranking", lambda: tg.margin_ranking_loss(A[:, 0], B[:, 0], Y, margin=0.2),
     np.maximum(0, -Y * (A[:, 0] - B[:, 0]) + 0.2).mean()),
    ("hinge_embedding", lambda: tg.hinge_embedding_loss(A[:, 0], Y, margin=0.5, reduction="sum"),
     np.where(Y == 1, A[:, 0], np.maximum(0, 0.5 - A[:, 0])).sum()),
    ("triplet", lambda: tg.triplet_margin_loss(A, B, P, margin=1.5, reduction="none"),
     np.maximum(0, 1.5 + np.linalg.norm(A - B + 1e-6, axis=1)
                - np.linalg.norm(A - P + 1e-6, axis=1))),
    ("triplet_swap_p1", lambda: tg.triplet_margin_loss(A, B, P, p=1, swap=True),
     np.maximum(0, 1.0 + np.abs(A - B + 1e-6).sum(1)
                - np.minimum(np.abs(A - P + 1e-6).sum(1), np.abs(B - P + 1e-6).sum(1))).mean()),
]


@pytest.mark.parametrize("name,call,expected", NUMPY, ids=[r[0] for r in NUMPY])
def test_values_match_numpy_formula(name, call, expected):
    np.testing.assert_allclose(np.asarray(call().numpy()), expected, rtol=1e-10, atol=1e-12)


def test_kl_div_is_functional_only_and_has_gradients():
    assert F.kl_div is not getattr(tg, "kl_div", None)
    x = tg.tensor(np.log(P), requires_grad=True)
    t = tg.tensor(T, requires_grad=True)
    for log_target in (False, True):
        for reduction in ("mean", "batchmean", "sum", "none"):
            assert tgt.gradcheck(lambda a, b: F.kl_div(a, b, reduction, log_target), (x, t))
    assert tgt.gradgradcheck(lambda a, b: F.kl_div(a, b, "sum"), (x, t))


def test_zero_vectors_and_probability_edges_give_finite_gradients():
    z = tg.tensor(np.zeros((2, 3)), requires_grad=True)
    tg.cosine_similarity(z, tg.tensor(B[:2])).sum().backward()
    assert np.isfinite(z.grad.numpy()).all()
    p = tg.tensor(np.array([0.0, 1.0, 0.5]), requires_grad=True)
    tg.binary_cross_entropy(p, np.array([0.0, 1.0, 1.0])).backward()
    assert np.isfinite(p.grad.numpy()).all()


def test_hinge_terms_pass_the_gradient_at_zero_as_clamp_min():
    x1 = tg.tensor(np.array([1.0]), requires_grad=True)
    tg.margin_ranking_loss(x1, np.array([0.5]), np.array([1.0]), margin=0.5).backward()
    assert x1.grad.tolist() == [-1.0]


@pytest.mark.parametrize("call,exc,match", [
    (lambda: tg.nll_loss(tg.tensor(_lsm(X)), LABELS[:5]), ValueError, "nll_loss.*labels"),
    (lambda: tg.nll_loss(tg.tensor(_lsm(X)), X[:, 0]), TypeError, "nll_loss.*integer"),
    (lambda: tg.nll_loss(tg.tensor(_lsm(X)), np.array([0, 1, 2, 3, 4, 0])), IndexError, "4"),
    (lambda: tg.nll_loss(tg.tensor(_lsm(X)), LABELS, weight=W[:3]), ValueError, "weight"),
    (lambda: tg.nll_loss(tg.tensor(_lsm(X)), LABELS, weight=tg.tensor(W, requires_grad=True)),
     NotImplementedError, "weight"),
    (lambda: tg.nll_loss(tg.tensor(_lsm(X)), LABELS, reduction="avg"), ValueError, "reduction"),
    (lambda: tg.cross_entropy(tg.tensor(X), LABELS, ignore_index=0), IndexError, "-100"),
    (lambda: tg.cross_entropy(tg.tensor(X), np.array([0, 1, 2, 3, -1, 0])), IndexError, "-1"),
    (lambda: tg.cross_entropy(tg.tensor(X), LABELS, label_smoothing=1.5), ValueError,
     "label_smoothing"),
    (lambda: tg.cross_entropy(tg.tensor(X), np.exp(_lsm(X)), ignore_index=2), ValueError,
     "ignore_index"),
    (lambda: tg.l1_loss(A, B[:, :2]), ValueError, "l1_loss.*same shape"),
    (lambda: tg.smooth_l1_loss(A, B, beta=-1.0), ValueError, "beta"),
    (lambda: tg.huber_loss(A, B, delta=0.0), ValueError, "delta"),
    (lambda: tg.binary_cross_entropy(A, T), ValueError, r"\[0, 1\]"),
    (lambda: tg.binary_cross_entropy(P, T, weight=np.ones(4)), ValueError, "weight"),
    (lambda: F.kl_div(A, B, reduction="batch"), ValueError, "batchmean"),
    (lambda: tg.gaussian_nll_loss(A, B, -P), ValueError, "negative"),
    (lambda: tg.gaussian_nll_loss(A, B, np.ones(3)), ValueError, "var"),
    (lambda: tg.cosine_similarity(A, B[:, :2]), ValueError, "broadcast"),
    (lambda: tg.cosine_similarity(A, B, dim=2), np.exceptions.AxisError, "dim"),
    (lambda: tg.cosine_embedding_loss(A, B, Y[:4]), ValueError, "target"),
    (lambda: tg.triplet_margin_loss(A, B, P[:4]), ValueError, "negative"),
    (lambda: tg.margin_ranking_loss(A[:, 0], B[:, 0], Y, margin="1"), TypeError, "margin"),
])
def test_bad_arguments_raise(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---------------------------------------------------------------------------------------
# Against PyTorch (deselected unless -m needs_torch)
# ---------------------------------------------------------------------------------------

def _torch_case(torch, fn, arrays, wrt):
    ts = [torch.tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
    out = fn(*ts)
    v = torch.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(out.shape))
    grads = torch.autograd.grad(out, [ts[i] for i in wrt], v, create_graph=True)
    total = sum(g.sum() for g in grads)
    if total.requires_grad:
        second = torch.autograd.grad(total, [ts[i] for i in wrt], allow_unused=True)
    else:                                  # piecewise linear: the second derivative is 0
        second = [None] * len(wrt)
    return ([out.detach().numpy()] + [g.detach().numpy(force=True) for g in grads]
            + [np.zeros(arrays[i].shape) if s is None else s.numpy(force=True)
               for i, s in zip(wrt, second)])


def _tg_case(fn, arrays, wrt):
    ts = [tg.tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
    out = fn(*ts)
    v = np.linspace(0.5, 1.5, out.size).reshape(out.shape)
    out.backward(tg.tensor(v), create_graph=True)
    grads = [ts[i].grad for i in wrt]
    for i in wrt:
        ts[i].grad = None
    total = sum(g.sum() for g in grads)
    second = [np.zeros(arrays[i].shape) for i in wrt]
    if total.requires_grad:
        total.backward()
        second = [np.zeros(arrays[i].shape) if ts[i].grad is None else ts[i].grad.numpy()
                  for i in wrt]
    return [out.numpy()] + [g.detach().numpy() for g in grads] + second


LP = _lsm(X)
PT = np.exp(_lsm(RNG.standard_normal((6, 4))))
Y3 = np.array([0, 3, 1, 2, 2, 3])
# name, tapegrad call, torch call (TF = torch.nn.functional, th = torch), arrays, wrt
TORCH = [
    *[(f"nll_{r}_{w is not None}_{ii}", (lambda r, w, ii: lambda x: tg.nll_loss(
        x, LABELS if ii == -100 else Y3, weight=w, ignore_index=ii, reduction=r))(r, w, ii),
       (lambda r, w, ii: lambda TF, th, x: TF.nll_loss(
           x, th.tensor(LABELS if ii == -100 else Y3), weight=None if w is None else th.tensor(w),
           ignore_index=ii, reduction=r))(r, w, ii), [LP], [0])
      for r in ("mean", "sum", "none") for w in (None, W) for ii in (-100, 2)],
    *[(f"ce_{r}_{w is not None}_{eps}", (lambda r, w, eps: lambda x: tg.cross_entropy(
        x, LABELS, weight=w, label_smoothing=eps, reduction=r))(r, w, eps),
       (lambda r, w, eps: lambda TF, th, x: TF.cross_entropy(
           x, th.tensor(LABELS), weight=None if w is None else th.tensor(w),
           label_smoothing=eps, reduction=r))(r, w, eps), [X], [0])
      for r in ("mean", "sum", "none") for w in (None, W) for eps in (0.0, 0.25)],
    *[(f"ce_probs_{r}_{w is not None}", (lambda r, w: lambda x, t: tg.cross_entropy(
        x, t, weight=w, label_smoothing=0.1, reduction=r))(r, w),
       (lambda r, w: lambda TF, th, x, t: TF.cross_entropy(
           x, t, weight=None if w is None else th.tensor(w), label_smoothing=0.1,
           reduction=r))(r, w), [X, PT], [0, 1])
      for r in ("mean", "none") for w in (None, W)],
    ("l1", lambda a, b: tg.l1_loss(a, b), lambda TF, th, a, b: TF.l1_loss(a, b), [A, B], [0, 1]),
    ("l1_sum", lambda a, b: tg.l1_loss(a, b, "sum"), lambda TF, th, a, b: TF.l1_loss(a, b, reduction="sum"),
     [A, B], [0, 1]),
    *[(f"smooth_l1_{beta}", (lambda beta: lambda a, b: tg.smooth_l1_loss(a, b, beta=beta))(beta),
       (lambda beta: lambda TF, th, a, b: TF.smooth_l1_loss(a, b, beta=beta))(beta), [A, B], [0, 1])
      for beta in (1.0, 0.3, 0.0)],
    *[(f"huber_{d}_{r}", (lambda d, r: lambda a, b: tg.huber_loss(a, b, r, d))(d, r),
       (lambda d, r: lambda TF, th, a, b: TF.huber_loss(a, b, reduction=r, delta=d))(d, r),
       [A, B], [0, 1]) for d in (1.0, 0.4) for r in ("mean", "none")],
    ("bce", lambda p, t: tg.binary_cross_entropy(p, t), lambda TF, th, p, t: TF.binary_cross_entropy(p, t),
     [P, T], [0, 1]),
    ("bce_w", lambda p, t: tg.binary_cross_entropy(p, t, W[:3], "sum"),
     lambda TF, th, p, t: TF.binary_cross_entropy(p, t, th.tensor(W[:3]), reduction="sum"), [P, T], [0]),
    *[(f"kl_{r}_{lt}", (lambda r, lt: lambda x, t: F.kl_div(x, t, r, lt))(r, lt),
       (lambda r, lt: lambda TF, th, x, t: TF.kl_div(x, t, reduction=r, log_target=lt))(r, lt),
       [np.log(P), np.log(T) if lt else T], [0, 1])
      for r in ("mean", "batchmean", "sum", "none") for lt in (False, True)],
    *[(f"poisson_{li}_{full}", (lambda li, full: lambda x, t: tg.poisson_nll_loss(x, t, li, full))(li, full),
       (lambda li, full: lambda TF, th, x, t: TF.poisson_nll_loss(x, t, li, full))(li, full),
       [A if li else P, 3 * T], [0, 1]) for li in (True, False) for full in (False, True)],
    *[(f"gaussian_{full}_{vs}", (lambda full, vs: lambda x, t, v: tg.gaussian_nll_loss(x, t, v, full))(full, vs),
       (lambda full, vs: lambda TF, th, x, t, v: TF.gaussian_nll_loss(x, t, v, full))(full, vs),
       [A, B, {"same": P, "drop": P[:, 0], "one": P[:, :1]}[vs]], [0, 1, 2])
      for full in (False, True) for vs in ("same", "drop", "one")],
    ("gaussian_eps", lambda x, t, v: tg.gaussian_nll_loss(x, t, v, eps=0.3, reduction="sum"),
     lambda TF, th, x, t, v: TF.gaussian_nll_loss(x, t, v, eps=0.3, reduction="sum"), [A, B, P], [0, 1, 2]),
    *[(f"cos_sim_{d}", (lambda d: lambda a, b: tg.cosine_similarity(a, b, d))(d),
       (lambda d: lambda TF, th, a, b: TF.cosine_similarity(a, b, d))(d), [A, B], [0, 1]) for d in (0, 1, -1)],
    ("cos_sim_bcast", lambda a, b: tg.cosine_similarity(a, b, -1),
     lambda TF, th, a, b: TF.cosine_similarity(a, b, -1), [A, B[0]], [0, 1]),
    *[(f"cos_emb_{m}_{r}", (lambda m, r: lambda a, b: tg.cosine_embedding_loss(a, b, Y, m, r))(m, r),
       (lambda m, r: lambda TF, th, a, b: TF.cosine_embedding_loss(a, b, th.tensor(Y), m, reduction=r))(m, r),
       [A, B], [0, 1]) for m in (0.0, -0.6) for r in ("mean", "none")],
    *[(f"margin_rank_{m}", (lambda m: lambda a, b: tg.margin_ranking_loss(a, b, Y, m))(m),
       (lambda m: lambda TF, th, a, b: TF.margin_ranking_loss(a, b, th.tensor(Y), m))(m),
       [A[:, 0], B[:, 0]], [0, 1]) for m in (0.0, 0.7)],
    *[(f"hinge_emb_{m}", (lambda m: lambda a: tg.hinge_embedding_loss(a, Y, m, "none"))(m),
       (lambda m: lambda TF, th, a: TF.hinge_embedding_loss(a, th.tensor(Y), m, reduction="none"))(m),
       [A[:, 0]], [0]) for m in (1.0, 0.3)],
    *[(f"pairwise_{p}", (lambda p: lambda a, b: tg.pairwise_distance(a, b, p))(p),
       (lambda p: lambda TF, th, a, b: TF.pairwise_distance(a, b, p))(p), [A, B], [0, 1])
      for p in (2.0, 1.0, 3.0)],
    *[(f"triplet_{m}_{p}_{s}", (lambda m, p, s: lambda a, b, c: tg.triplet_margin_loss(a, b, c, m, p, swap=s))(m, p, s),
       (lambda m, p, s: lambda TF, th, a, b, c: TF.triplet_margin_loss(a, b, c, m, p, swap=s))(m, p, s),
       [A, B, P], [0, 1, 2]) for m in (1.0, 3.0) for p in (2.0, 1.0) for s in (False, True)],
]


@pytest.mark.needs_torch
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides:UserWarning")   # torch's kl_div
@pytest.mark.parametrize("name,f,tf,arrays,wrt", TORCH, ids=[r[0] for r in TORCH])
def test_matches_torch_forward_grad_second_order(name, f, tf, arrays, wrt):
    torch = pytest.importorskip("torch")
    expected = _torch_case(torch, lambda *ts: tf(torch.nn.functional, torch, *ts), arrays, wrt)
    got = _tg_case(f, arrays, wrt)
    for k, (e, g) in enumerate(zip(expected, got)):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-11, err_msg=f"{name} item {k}")


# ---------------------------------------------------------------------------------------
# Loss modules
# ---------------------------------------------------------------------------------------

nn = tg.nn
MODULES = [
    (nn.NLLLoss(weight=W, ignore_index=2, reduction="sum"), (LP, Y3),
     lambda lp, y: tg.nll_loss(lp, y, W, 2, "sum")),
    (nn.CrossEntropyLoss(W, ignore_index=1, label_smoothing=0.2), (X, Y3),
     lambda x, y: tg.cross_entropy(x, y, weight=W, ignore_index=1, label_smoothing=0.2)),
    (nn.L1Loss(reduction="none"), (A, B), lambda a, b: tg.l1_loss(a, b, "none")),
    (nn.SmoothL1Loss(beta=0.5), (A, B), lambda a, b: tg.smooth_l1_loss(a, b, beta=0.5)),
    (nn.HuberLoss(delta=0.3, reduction="sum"), (A, B), lambda a, b: tg.huber_loss(a, b, "sum", 0.3)),
    (nn.BCELoss(W[:3]), (P, T), lambda p, t: tg.binary_cross_entropy(p, t, W[:3])),
    (nn.KLDivLoss(reduction="batchmean", log_target=True), (np.log(P), np.log(T)),
     lambda x, t: F.kl_div(x, t, "batchmean", True)),
    (nn.PoissonNLLLoss(log_input=False, full=True), (P, 3 * T),
     lambda x, t: tg.poisson_nll_loss(x, t, False, True)),
    (nn.GaussianNLLLoss(full=True, eps=0.1), (A, B, P),
     lambda x, t, v: tg.gaussian_nll_loss(x, t, v, True, 0.1)),
    (nn.CosineEmbeddingLoss(margin=-0.2), (A, B, Y), lambda a, b, y: tg.cosine_embedding_loss(a, b, y, -0.2)),
    (nn.MarginRankingLoss(0.3), (A[:, 0], B[:, 0], Y),
     lambda a, b, y: tg.margin_ranking_loss(a, b, y, 0.3)),
    (nn.HingeEmbeddingLoss(margin=0.4), (A[:, 0], Y), lambda a, y: tg.hinge_embedding_loss(a, y, 0.4)),
    (nn.TripletMarginLoss(margin=2.0, p=1.0, swap=True), (A, B, P),
     lambda a, b, c: tg.triplet_margin_loss(a, b, c, 2.0, 1.0, swap=True)),
    (nn.CosineSimilarity(dim=0), (A, B), lambda a, b: tg.cosine_similarity(a, b, 0)),
    (nn.PairwiseDistance(p=3.0, keepdim=True), (A, B), lambda a, b: tg.pairwise_distance(a, b, 3.0, keepdim=True)),
]


@pytest.mark.parametrize("module,args,f", MODULES, ids=[type(m).__name__ for m, _, _ in MODULES])
def test_loss_module_is_its_function(module, args, f):
    np.testing.assert_array_equal(module(*args).numpy(), f(*args).numpy())


@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
def test_class_weight_refuses_a_forward_mode_tangent(loss):
    x = tg.tensor(_lsm(X) if loss == "nll_loss" else X)
    labels = LABELS if loss == "nll_loss" else np.array([0, 3, 1, 1, 2, 3])
    with pytest.raises(NotImplementedError, match=f"{loss}: the derivative with respect to the "
                                                  f"class weight is not implemented .* weight "
                                                  f"carries a forward-mode tangent"):
        tgt.check_jvp(lambda w: getattr(tg, loss)(x, labels, weight=w), W, np.ones(4))


def test_loss_module_weight_is_a_buffer_and_legacy_arguments_are_refused():
    assert list(nn.CrossEntropyLoss(weight=W).state_dict()) == ["weight"]
    assert list(nn.NLLLoss().state_dict()) == []
    with pytest.raises(TypeError, match="size_average"):
        nn.L1Loss(size_average=True)
    with pytest.raises(TypeError, match="reduce"):
        nn.CrossEntropyLoss(reduce=False)
    with pytest.raises(ValueError, match="reduction"):
        nn.HuberLoss(reduction="avg")
    with pytest.raises(ValueError, match="reduction"):
        nn.KLDivLoss(reduction="batch")
    with pytest.raises(TypeError, match="HuberLoss"):
        nn.HuberLoss(beta=1.0)


@pytest.mark.needs_torch
def test_loss_module_defaults_match_torch():
    torch = pytest.importorskip("torch")
    for name in ("NLLLoss", "CrossEntropyLoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
                 "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss", "CosineEmbeddingLoss",
                 "MarginRankingLoss", "HingeEmbeddingLoss", "TripletMarginLoss"):
        ours, theirs = getattr(nn, name)(), getattr(torch.nn, name)()
        for attr in ("reduction", "ignore_index", "label_smoothing", "beta", "delta",
                     "log_target", "log_input", "full", "eps", "margin", "p", "swap"):
            if hasattr(theirs, attr):
                assert getattr(ours, attr) == getattr(theirs, attr), (name, attr)


def test_docstring_examples_run():
    from tapegrad.testing import run_doctests
    from tapegrad_nn import loss_modules, losses
    for module in (losses, loss_modules):
        result = run_doctests(module)
        assert result.attempted > 3 and result.failed == 0, module


@pytest.mark.parametrize("loss", [
    lambda x, t: tg.cross_entropy(x, t), lambda x, t: tg.nll_loss(tg.log_softmax(x), t),
    lambda x, t: tg.cross_entropy(x, t, weight=np.array([1.0, 2.0, 3.0]),
                                  label_smoothing=0.1)])
def test_every_row_ignored_is_nan_with_gradient_zero_as_pytorch(loss):
    # PyTorch: the 'mean' over no rows is 0 / 0 = nan; the gradient is 0 (not nan)
    x = tg.tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
    out = loss(x, tg.tensor([-100, -100]))
    assert np.isnan(out.item())
    out.backward()
    assert np.array_equal(x.grad.numpy(), np.zeros((2, 3)))
