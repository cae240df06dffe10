"""The losses of tapegrad-nn beyond cross_entropy / mse_loss /
binary_cross_entropy_with_logits, with ``torch.nn.functional``'s names and arguments.

Each is a composition of tapegrad ops (so first and second derivatives come from the ops
it is made of), registered as ``tg.<name>`` and reachable as ``tg.nn.functional.<name>``
-- except ``kl_div``, which is ``tg.nn.functional.kl_div`` only: ``tg.kl_div`` is
scipy.special's elementwise function (tapegrad-scipy).

Conventions (decisions, also in docs/nn.md):

- The class axis of ``nll_loss`` is the LAST one, as ``tg.cross_entropy``'s (so
  ``nll_loss(log_softmax(x), t) == cross_entropy(x, t)``); PyTorch's is axis 1. For
  (N, C) inputs the two agree.
- ``reduction``: 'mean', 'sum' or 'none' (``kl_div`` also 'batchmean').
- Hinge-like terms ``max(0, z)`` pass the gradient at z == 0, as PyTorch's
  ``clamp_min`` does.

>>> import tapegrad as tg
>>> tg.l1_loss(tg.tensor([1., 2.]), tg.tensor([0., 4.])).item()
1.5
>>> round(tg.huber_loss(tg.tensor([0.5, 3.0]), tg.tensor([0., 0.])).item(), 4)
1.3125
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import tapegrad as tg
from tapegrad import _batching
from tapegrad._batching import check_values

from .functional import (_check_labels, _check_reduction, _coefficients, _is_label,
                         _label_coefficients, _reduce_tensor, _shape_of)

# tg.<name> and tg.nn.functional.<name> (kl_div: tg.nn.functional only).
NAMES = ("nll_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
         "cosine_similarity", "cosine_embedding_loss", "margin_ranking_loss",
         "hinge_embedding_loss", "pairwise_distance", "triplet_margin_loss",
         "poisson_nll_loss", "gaussian_nll_loss")


def _t(v, like=None):
    if isinstance(v, tg.Tensor):
        return v
    if like is not None:
        return tg.asarray(v, device=like.device)
    return tg.asarray(v)


def _number(v, op, arg, positive=False):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{op}: {arg} must be a real number, got {v!r}")
    if positive and not v > 0:
        raise ValueError(f"{op}: {arg} must be positive, got {v!r}")
    return float(v)


def _reduction(reduction, op, extra=()):
    if reduction not in ("mean", "sum", "none") + tuple(extra):
        choices = ", ".join(repr(r) for r in ("mean", "sum", "none") + tuple(extra))
        raise ValueError(f"{op}: reduction must be one of {choices}, got {reduction!r}")


def _same_shape(a, b, op, names=("input", "target")):
    if a.shape != b.shape:
        raise ValueError(f"{op}: {names[0]} of shape {a.shape} and {names[1]} of shape "
                         f"{b.shape} must have the same shape (broadcasting them would "
                         f"silently compute a different loss)")


def _pair(input, target, op, reduction):
    _reduction(reduction, op)
    x = _t(input)
    t = _t(target, x)
    _same_shape(x, t, op)
    return x, t


def _hinge(z):
    """max(z, 0) with the gradient passed at z == 0 (PyTorch's clamp_min)."""
    return tg.where(z >= 0, z, 0.0)


# ---------------------------------------------------------------------------------------
# Classification
# ---------------------------------------------------------------------------------------

def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood ``-input[..., target]`` of integer class labels under
    log-probabilities `input` (class axis LAST, as tg.cross_entropy; labels of shape
    ``input.shape[:-1]``), as ``F.nll_loss``: `weight` (C class weights) scales each row
    by its label's weight, rows labelled `ignore_index` count 0, and 'mean' divides by
    the sum of the kept rows' weights (PyTorch's weighted mean; nan if all are ignored).

    >>> import tapegrad as tg
    >>> lp = tg.log_softmax(tg.tensor([[2., 0.], [0., 1.]]))
    >>> round(tg.nll_loss(lp, tg.tensor([0, 1])).item(), 6)
    0.220095
    """
    _check_reduction(reduction)
    x = _t(input)
    if x.ndim == 0:
        raise ValueError("nll_loss: input must have at least one dimension, the class "
                         "axis (last)")
    if not _is_label(target):
        raise TypeError(f"nll_loss: target must hold integer class labels, got "
                        f"{getattr(target, 'dtype', type(target).__name__)}")
    if _shape_of(target) != x.shape[:-1]:
        raise ValueError(f"nll_loss: labels must have the input's shape without the class "
                         f"axis (last): input {x.shape} needs labels of shape "
                         f"{x.shape[:-1]}, got {_shape_of(target)}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, numbers.Integral):
        raise TypeError(f"nll_loss: ignore_index must be an integer, got {ignore_index!r}")
    if _batching.is_batched(target):
        # labels with one value per example (tg.vmap): checked per example, the
        # coefficients built with tensor ops
        check_values(lambda t: _check_labels(t, x.shape[-1], ignore_index), target)
        a, denom = _label_coefficients(x, target, weight, ignore_index, 0.0, "nll_loss")
    else:
        a, denom = _coefficients(x.shape, x.dtype, np.asarray(target), True, weight,
                                 ignore_index, 0.0, "nll_loss")
    loss = -tg.sum(x * a, -1)
    if reduction == "mean":
        # NOTE: every row ignored: nan (0 / 0), silently, with PyTorch's gradient 0 (the
        # nan is a constant; a division by 0 would give 0 * inf = nan gradients)
        if isinstance(denom, tg.Tensor):
            empty = denom == 0
            return tg.where(empty, np.nan, tg.sum(loss) / tg.where(empty, 1.0, denom))
        return tg.sum(loss) / denom if denom else tg.sum(loss) * 0.0 + np.nan
    return _reduce_tensor(loss, reduction)


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """``-w (t log(x) + (1 - t) log(1 - x))`` on probabilities `input` in [0, 1] (values
    outside raise ValueError), with each log clamped at -100 as PyTorch (so x = 0 or 1 is
    finite), as ``F.binary_cross_entropy``. `weight` broadcasts to the input's shape;
    target is differentiable. Prefer ``binary_cross_entropy_with_logits`` (stable)."""
    x, t = _pair(input, target, "binary_cross_entropy", reduction)
    if x.device.name == "cpu":
        # (check_values: per example inside tg.vmap, and on every tg.compile replay)
        check_values(_check_probabilities, x)
    loss = -(t * _clamped_log(x) + (1.0 - t) * _clamped_log(1.0 - x))
    if weight is not None:
        w = _t(weight, x)
        try:
            np.broadcast_shapes(w.shape, x.shape)
        except ValueError:
            raise ValueError(f"binary_cross_entropy: weight of shape {w.shape} does not "
                             f"broadcast to the input's shape {x.shape}") from None
        # The weight is a constant factor: it takes the input's dtype (no promotion of a
        # float32 loss by a float64 weight array).
        loss = loss * (w if w.dtype == x.dtype else w.astype(x.dtype))
    return _reduce_tensor(loss, reduction)


def _check_probabilities(xa):
    if xa.size and not ((xa >= 0) & (xa <= 1)).all():
        raise ValueError("binary_cross_entropy: every element of input must be a "
                         "probability in [0, 1]")


def _clamped_log(p):
    """max(log(p), -100), with p == 0 giving -100 and no nan gradient (safe input)."""
    pos = p > 0
    return tg.where(pos, tg.maximum(tg.log(tg.where(pos, p, 1.0)), -100.0), -100.0)


def kl_div(input, target, reduction="mean", log_target=False):
    """Kullback-Leibler divergence terms ``target * (log(target) - input)`` for
    log-probabilities `input` (``exp(target) * (target - input)`` with
    ``log_target=True``), as ``F.kl_div``; 0 where target == 0. reduction: 'mean' (over
    every element, PyTorch's default), 'batchmean' (sum / input.shape[0], the true KL
    divergence per sample), 'sum' or 'none'.

    NOTE: ``tg.kl_div`` is scipy.special.kl_div (tapegrad-scipy); this is
    ``tg.nn.functional.kl_div`` only."""
    _reduction(reduction, "kl_div", ("batchmean",))
    x = _t(input)
    t = _t(target, x)
    _same_shape(x, t, "kl_div")
    if log_target:
        loss = tg.exp(t) * (t - x)
    else:
        pos = t > 0
        loss = tg.where(pos, t * (tg.log(tg.where(pos, t, 1.0)) - x), 0.0)
    if reduction == "batchmean":
        return tg.sum(loss) / (x.shape[0] if x.ndim else 1)
    return _reduce_tensor(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8,
                     reduction="mean"):
    """Poisson negative log-likelihood, as ``F.poisson_nll_loss``: ``exp(input) - target
    * input`` (``log_input=True``) or ``input - target * log(input + eps)``; ``full``
    adds Stirling's term ``t log t - t + log(2 pi t) / 2`` where target > 1."""
    x, t = _pair(input, target, "poisson_nll_loss", reduction)
    eps = _number(eps, "poisson_nll_loss", "eps")
    if log_input:
        loss = tg.exp(x) - t * x
    else:
        loss = x - t * tg.log(x + eps)
    if full:
        big = t > 1
        ts = tg.where(big, t, 2.0)
        loss = loss + tg.where(big, ts * tg.log(ts) - ts + 0.5 * tg.log(2 * math.pi * ts),
                               0.0)
    return _reduce_tensor(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Gaussian negative log-likelihood ``(log(var) + (input - target)^2 / var) / 2``
    (``+ log(2 pi) / 2`` with ``full``), as ``F.gaussian_nll_loss``. `var` has the
    input's shape, or that shape without its last axis, or a last axis of 1; negative
    variances raise ValueError. As PyTorch, var is clamped to >= eps in the forward
    value only (the gradient flows to var as if unclamped)."""
    x, t = _pair(input, target, "gaussian_nll_loss", reduction)
    v = _t(var, x)
    eps = _number(eps, "gaussian_nll_loss", "eps")
    if v.shape != x.shape:
        if x.ndim and v.shape == x.shape[:-1]:
            v = tg.reshape(v, v.shape + (1,))
        elif not (x.ndim and v.shape == x.shape[:-1] + (1,)):
            raise ValueError(f"gaussian_nll_loss: var of shape {v.shape} does not fit "
                             f"input of shape {x.shape} (it needs {x.shape}, "
                             f"{x.shape[:-1]} or {x.shape[:-1] + (1,)})")
    if v.device.name == "cpu":
        check_values(_check_variance, v)     # (per example inside tg.vmap)
    with tg.no_grad():
        lift = tg.maximum(v, eps) - v
    v = v + lift.detach()
    loss = 0.5 * (tg.log(v) + tg.square(x - t) / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce_tensor(loss, reduction)


def _check_variance(va):
    if (va < 0).any():
        raise ValueError("gaussian_nll_loss: var has negative entries")


# ---------------------------------------------------------------------------------------
# Regression
# ---------------------------------------------------------------------------------------

def l1_loss(input, target, reduction="mean"):
    """``|input - target|``, as ``F.l1_loss`` (derivative 0 where they are equal)."""
    x, t = _pair(input, target, "l1_loss", reduction)
    return _reduce_tensor(tg.abs(x - t), reduction)


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """``0.5 d^2 / beta`` where ``|d| < beta``, ``|d| - beta / 2`` elsewhere (d = input -
    target), as ``F.smooth_l1_loss``; beta == 0 is l1_loss."""
    x, t = _pair(input, target, "smooth_l1_loss", reduction)
    beta = _number(beta, "smooth_l1_loss", "beta")
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    d = x - t
    if beta == 0:
        return _reduce_tensor(tg.abs(d), reduction)
    a = tg.abs(d)
    return _reduce_tensor(tg.where(a < beta, 0.5 * d * d / beta, a - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """``0.5 d^2`` where ``|d| < delta``, ``delta (|d| - delta / 2)`` elsewhere, as
    ``F.huber_loss`` (delta > 0)."""
    x, t = _pair(input, target, "huber_loss", reduction)
    delta = _number(delta, "huber_loss", "delta", positive=True)
    d = x - t
    a = tg.abs(d)
    return _reduce_tensor(tg.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta)),
                          reduction)


# ---------------------------------------------------------------------------------------
# Similarities and embeddings
# ---------------------------------------------------------------------------------------

def _safe_norm(x, axis, eps):
    """max(||x||_2 over axis, eps), without a nan gradient at 0 (safe input)."""
    s = tg.sum(x * x, axis)
    big = s > eps * eps
    return tg.where(big, tg.sqrt(tg.where(big, s, 1.0)), eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``sum(x1 * x2, dim) / (max(||x1||, eps) max(||x2||, eps))`` with x1 and x2
    broadcast together, as ``F.cosine_similarity``."""
    a, b = _t(x1), _t(x2)
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"cosine_similarity: x1 of shape {a.shape} and x2 of shape "
                         f"{b.shape} do not broadcast") from None
    if not -len(shape) <= dim < max(len(shape), 1):
        raise np.exceptions.AxisError(f"cosine_similarity: dim {dim} is out of range for "
                                      f"inputs of shape {shape}")
    eps = _number(eps, "cosine_similarity", "eps")
    a, b = tg.broadcast_to(a, shape), tg.broadcast_to(b, shape)
    return tg.sum(a * b, dim) / (_safe_norm(a, dim, eps) * _safe_norm(b, dim, eps))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction="mean"):
    """``1 - cos(x1, x2)`` where target is 1, ``max(0, cos(x1, x2) - margin)`` where it is
    -1 (cos over the last axis), as ``F.cosine_embedding_loss`` (PyTorch adds 1e-12 to
    each squared norm; so does this)."""
    _reduction(reduction, "cosine_embedding_loss")
    a, b = _t(input1), _t(input2, _t(input1))
    _same_shape(a, b, "cosine_embedding_loss", ("input1", "input2"))
    if a.ndim not in (1, 2):
        raise ValueError(f"cosine_embedding_loss: inputs must be 1-D or 2-D, got shape "
                         f"{a.shape}")
    y = _t(target, a)
    if y.shape != a.shape[:-1]:
        raise ValueError(f"cosine_embedding_loss: target must have shape {a.shape[:-1]} "
                         f"for inputs of shape {a.shape}, got {y.shape}")
    margin = _number(margin, "cosine_embedding_loss", "margin")
    cos = tg.sum(a * b, -1) / tg.sqrt((tg.sum(a * a, -1) + 1e-12) * (tg.sum(b * b, -1) + 1e-12))
    loss = tg.where(y == 1, 1.0 - cos, 0.0) + tg.where(y == -1, _hinge(cos - margin), 0.0)
    return _reduce_tensor(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction="mean"):
    """``max(0, -target (input1 - input2) + margin)``, as ``F.margin_ranking_loss``
    (target of 1 or -1; all three the same shape)."""
    _reduction(reduction, "margin_ranking_loss")
    a = _t(input1)
    b, y = _t(input2, a), _t(target, a)
    _same_shape(a, b, "margin_ranking_loss", ("input1", "input2"))
    _same_shape(a, y, "margin_ranking_loss", ("input1", "target"))
    margin = _number(margin, "margin_ranking_loss", "margin")
    return _reduce_tensor(_hinge(-y * (a - b) + margin), reduction)


def hinge_embedding_loss(input, target, margin=1.0, reduction="mean"):
    """``input`` where target is 1, ``max(0, margin - input)`` where it is -1, as
    ``F.hinge_embedding_loss``."""
    x, y = _pair(input, target, "hinge_embedding_loss", reduction)
    margin = _number(margin, "hinge_embedding_loss", "margin")
    loss = tg.where(y != -1, x, 0.0) + tg.where(y != 1, _hinge(margin - x), 0.0)
    return _reduce_tensor(loss, reduction)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` over the last axis, as ``F.pairwise_distance``."""
    a, b = _t(x1), _t(x2)
    p = _number(p, "pairwise_distance", "p", positive=True)
    d = tg.abs(a - b + eps)
    if p == 2.0:
        out = tg.sqrt(tg.sum(d * d, -1, keepdims=keepdim))
    else:
        out = tg.sum(d ** p, -1, keepdims=keepdim) ** (1.0 / p)
    return out


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6,
                        swap=False, reduction="mean"):
    """``max(0, margin + d(a, p) - d(a, n))`` with d the pairwise p-norm distance over the
    last axis (``swap=True``: d(a, n) replaced by min(d(a, n), d(p, n))), as
    ``F.triplet_margin_loss``."""
    _reduction(reduction, "triplet_margin_loss")
    a = _t(anchor)
    pos, neg = _t(positive, a), _t(negative, a)
    _same_shape(a, pos, "triplet_margin_loss", ("anchor", "positive"))
    _same_shape(a, neg, "triplet_margin_loss", ("anchor", "negative"))
    if a.ndim not in (1, 2):
        raise ValueError(f"triplet_margin_loss: inputs must be 1-D or 2-D, got shape "
                         f"{a.shape}")
    margin = _number(margin, "triplet_margin_loss", "margin")
    d_ap = pairwise_distance(a, pos, p, eps)
    d_an = pairwise_distance(a, neg, p, eps)
    if swap:
        d_pn = pairwise_distance(pos, neg, p, eps)
        d_an = tg.where(d_pn < d_an, d_pn, d_an)
    return _reduce_tensor(_hinge(margin + d_ap - d_an), reduction)


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def _r(*shape, seed=0, scale=1.0):
    return scale * np.random.default_rng(seed + 13 * len(shape) + sum(shape)).standard_normal(shape)


def _away(v, points, gap=0.05):
    """v with entries within `gap` of any of `points` moved away (finite differences)."""
    for k in points:
        v = np.where(np.abs(v - k) < gap, k + 2 * gap * np.sign(v - k + 1e-12), v)
    return v


def _log_probs(*shape, seed=0):
    x = _r(*shape, seed=seed, scale=2.0)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _signs(*shape, seed=0):
    return np.where(np.random.default_rng(seed + 5).uniform(size=shape) < 0.5, -1.0, 1.0)


def register(registry):
    """Register the losses with `registry` (called from functional.register)."""
    fn = registry.register_function
    W3 = np.array([0.2, 1.0, 3.0])
    fn("nll_loss", nll_loss, method=False, differentiable=(0,), not_implemented=(2,), samples=[
        tg.Sample(_log_probs(4, 3), np.array([0, 2, 1, 1])),
        tg.Sample(_log_probs(4, 3), np.array([0, 2, 1, 1]), W3),
        tg.Sample(_log_probs(5, 3), np.array([0, -100, 1, 2, 2]), weight=W3, reduction="sum"),
        tg.Sample(_log_probs(5, 3), np.array([0, 1, 1, 2, 2]), ignore_index=1,
                  reduction="none"),
        tg.Sample(_log_probs(2, 3, 4), np.array([[0, 3, 1], [2, 2, 0]])),
        tg.Sample(_log_probs(4), np.array(3))])
    diff = [tg.Sample(_r(3, 4), _away(_r(3, 4, seed=1), ()) + 0.0)]
    fn("l1_loss", l1_loss, method=False, samples=[
        tg.Sample(_r(3, 4), _r(3, 4) + _away(_r(3, 4, seed=1), (0.0,))),
        tg.Sample(_r(5), _r(5) + _away(_r(5, seed=2), (0.0,)), reduction="sum"),
        tg.Sample(_r(2, 3), _r(2, 3) + _away(_r(2, 3, seed=3), (0.0,)), reduction="none")])
    off = _away(_r(3, 4, seed=1, scale=2.0), (0.0, 1.0, -1.0, 0.5, -0.5))
    fn("smooth_l1_loss", smooth_l1_loss, method=False, samples=[
        tg.Sample(_r(3, 4), _r(3, 4) + off),
        tg.Sample(_r(3, 4), _r(3, 4) + off, "sum", 0.5),
        tg.Sample(_r(3, 4), _r(3, 4) + off, reduction="none", beta=0.0)])
    fn("huber_loss", huber_loss, method=False, samples=[
        tg.Sample(_r(3, 4), _r(3, 4) + off),
        tg.Sample(_r(3, 4), _r(3, 4) + off, "sum", 0.5),
        tg.Sample(_r(3, 4), _r(3, 4) + off, reduction="none", delta=2.0)])
    prob = np.random.default_rng(3).uniform(0.05, 0.95, (3, 4))
    tgt = np.random.default_rng(4).uniform(0, 1, (3, 4))
    fn("binary_cross_entropy", binary_cross_entropy, method=False, samples=[
        tg.Sample(prob, tgt), tg.Sample(prob, tgt, np.array([0.5, 1.0, 2.0, 1.5])),
        tg.Sample(prob, tgt, reduction="none"), tg.Sample(prob, tgt, weight=prob, reduction="sum")])
    fn("poisson_nll_loss", poisson_nll_loss, method=False, samples=[
        tg.Sample(_r(3, 4), np.random.default_rng(5).uniform(0, 4, (3, 4))),
        tg.Sample(prob, np.random.default_rng(5).uniform(0, 4, (3, 4)), False),
        tg.Sample(_r(3, 4), _away(np.random.default_rng(6).uniform(0, 4, (3, 4)), (1.0,)),
                  full=True, reduction="sum"),
        tg.Sample(prob, tgt, log_input=False, eps=0.1, reduction="none")])
    var = np.random.default_rng(7).uniform(0.2, 2.0, (3, 4))
    fn("gaussian_nll_loss", gaussian_nll_loss, method=False, samples=[
        tg.Sample(_r(3, 4), _r(3, 4, seed=1), var),
        tg.Sample(_r(3, 4), _r(3, 4, seed=1), var[:, 0], full=True, reduction="sum"),
        tg.Sample(_r(3, 4), _r(3, 4, seed=1), var[:, :1], reduction="none")])
    fn("cosine_similarity", cosine_similarity, method=False, samples=[
        tg.Sample(_r(3, 4), _r(3, 4, seed=1)), tg.Sample(_r(3, 4), _r(3, 4, seed=1), 0),
        tg.Sample(_r(2, 3, 4), _r(3, 4, seed=1), dim=-1), tg.Sample(_r(4), _r(4, seed=2), 0)])
    y = _signs(5)
    fn("cosine_embedding_loss", cosine_embedding_loss, method=False, samples=[
        tg.Sample(_r(5, 3), _r(5, 3, seed=1), y),
        tg.Sample(_r(5, 3), _r(5, 3, seed=1), y, margin=-0.8, reduction="sum"),
        tg.Sample(_r(5, 3), _r(5, 3, seed=1), y, 0.1, "none")])
    a, b = _r(6), _r(6, seed=1)
    y = _signs(6)
    fn("margin_ranking_loss", margin_ranking_loss, method=False, samples=[
        tg.Sample(a, a + _away(b, (0.0, 0.5, -0.5)), y),
        tg.Sample(a, a + _away(b, (0.0, 0.5, -0.5)), y, margin=0.5, reduction="none")])
    fn("hinge_embedding_loss", hinge_embedding_loss, method=False, samples=[
        tg.Sample(_away(_r(3, 4), (1.0, 0.5)), _signs(3, 4)),
        tg.Sample(_away(_r(3, 4), (1.0, 0.5)), _signs(3, 4), margin=0.5, reduction="sum")])
    fn("pairwise_distance", pairwise_distance, method=False, samples=[
        tg.Sample(_r(3, 4), _r(3, 4, seed=1)), tg.Sample(_r(3, 4), _r(3, 4, seed=1), 3.0),
        tg.Sample(_r(3, 4), _r(4, seed=1), keepdim=True)])
    anc, pos, neg = _r(5, 3), _r(5, 3, seed=1), _r(5, 3, seed=2)
    fn("triplet_margin_loss", triplet_margin_loss, method=False, samples=[
        tg.Sample(anc, pos, neg, margin=2.0), tg.Sample(anc, pos, neg, 3.0, p=1.5),
        tg.Sample(anc, pos, neg, margin=2.5, swap=True, reduction="none")])
