"""Embeddings, masks and attention (torch.nn.functional's names and argument order):
``embedding``, ``one_hot``, ``dropout1d``/``dropout2d``, ``masked_fill`` and
``scaled_dot_product_attention``.

Each is composed of tapegrad ops (take, where, matmul, softmax), so its gradient is the
composition's, differentiable again and device-agnostic; the functions registered below
(``embedding``, ``masked_fill``, ``scaled_dot_product_attention``) are gradchecked by the
contract kit through their samples.

Mask conventions (PyTorch's, and they differ between the two APIs):
``scaled_dot_product_attention``'s boolean ``attn_mask`` is True where a query MAY attend;
``MultiheadAttention``'s boolean ``attn_mask``/``key_padding_mask`` are True where it may
NOT. A float mask is added to the scores in both.

>>> import tapegrad as tg
>>> import tapegrad_nn.functional as F
>>> F.one_hot(tg.tensor([0, 2]), 3).tolist()
[[1, 0, 0], [0, 0, 1]]
>>> F.masked_fill(tg.tensor([1., 2., 3.]), tg.tensor([True, False, True]), 0.0).tolist()
[0.0, 2.0, 0.0]
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import tapegrad as tg
from tapegrad._batching import check_values
from tapegrad._compile import run_eagerly

__all__ = ["embedding", "one_hot", "dropout1d", "dropout2d", "masked_fill",
           "scaled_dot_product_attention"]


# ---------------------------------------------------------------------------------------
# embedding, one_hot
# ---------------------------------------------------------------------------------------

def _int_indices(x, op):
    x = tg.asarray(x)
    if x.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be an integer tensor, got {x.dtype}")
    return x


def _pad_index(padding_idx, n, op="embedding"):
    if padding_idx is None:
        return None
    integral = isinstance(padding_idx, (numbers.Integral, np.integer))
    if isinstance(padding_idx, bool) or not integral or not -n <= padding_idx < n:
        raise ValueError(f"{op}: padding_idx must be an integer in [-{n}, {n}) "
                         f"(num_embeddings={n}), got {padding_idx!r}")
    return int(padding_idx) % n


def _renorm_(weight, idx, max_norm, norm_type):
    """PyTorch's embedding_renorm_: the rows of `weight` that `idx` references whose
    `norm_type`-norm exceeds `max_norm` are scaled IN PLACE to norm max_norm (with its
    1e-7 guard), under no_grad."""
    rows = np.unique(np.asarray(idx.cpu().numpy()).ravel())
    with tg.no_grad():
        sub = weight[rows]
        norms = tg.sum(tg.abs(sub) ** norm_type, axis=1, keepdims=True) ** (1.0 / norm_type)
        scale = tg.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(weight.dtype)
        weight[rows] = sub * scale


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` (num_embeddings, embedding_dim) picked by the integer `input`:
    the result has shape ``input.shape + (embedding_dim,)``, as torch's F.embedding. The
    gradient scatters into the picked rows (repeated indices accumulate); as PyTorch's
    conventions (not the derivative), the row `padding_idx` gets none and
    ``scale_grad_by_freq=True`` divides each position's gradient by how often its index
    occurs in `input`.

    ``max_norm``: before the lookup, the
    referenced rows whose `norm_type`-norm exceeds it are rescaled to norm max_norm IN
    PLACE in `weight` (as PyTorch; not recorded, like torch's no_grad renorm).
    ``sparse=True`` (sparse gradients) is not supported.

    >>> import tapegrad as tg
    >>> import tapegrad_nn.functional as F
    >>> w = tg.tensor([[0., 1.], [2., 3.], [4., 5.]], requires_grad=True)
    >>> F.embedding(tg.tensor([2, 0, 2]), w).tolist()
    [[4.0, 5.0], [0.0, 1.0], [4.0, 5.0]]
    >>> F.embedding(tg.tensor([2, 0, 2]), w, padding_idx=0).sum().backward()
    >>> w.grad.tolist()
    [[0.0, 0.0], [0.0, 0.0], [2.0, 2.0]]
    """
    idx = _int_indices(input, "embedding")
    weight = tg.asarray(weight)
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), "
                         f"got shape {weight.shape}")
    if sparse:
        raise NotImplementedError("embedding: sparse=True (sparse gradients) is not "
                                  "supported; use sparse=False")
    n = weight.shape[0]
    pad = _pad_index(padding_idx, n)
    # NOTE: a compile_check (not a plain check), so that a tg.compile replay checks each
    # call's indices too: np.take would silently wrap a negative one.
    # (check_values: compile_check's check, per example inside tg.vmap)
    check_values(lambda ids: _check_rows(ids, weight.shape), idx)
    if max_norm is not None or scale_grad_by_freq:
        # NOTE: both read the indices' values on the host (which rows to renormalise, how
        # often each occurs): a replay would reuse the recording's.
        run_eagerly("embedding: max_norm and scale_grad_by_freq read the indices' values")
    if max_norm is not None:
        _renorm_(weight, idx, float(max_norm), float(norm_type))
    out = tg.take(weight, idx, axis=0)
    if pad is None and not scale_grad_by_freq:
        return out
    # NOTE: the gradient is rescaled per position with out.detach() + (out - out.detach())
    # * c: the value is out exactly, the gradient is c * g (c = 0 at padding positions,
    # 1/count with scale_grad_by_freq), and it stays differentiable.
    if scale_grad_by_freq:
        ids = np.asarray(idx.cpu().numpy())
        _, inverse, counts = np.unique(ids.ravel(), return_inverse=True, return_counts=True)
        c = tg.tensor((1.0 / counts[inverse]).reshape(ids.shape).astype(weight.dtype),
                      device=weight.device)
        if pad is not None:
            c = tg.where(idx == pad, 0.0, c).astype(weight.dtype)
    else:
        c = tg.where(idx == pad, 0.0, 1.0).astype(weight.dtype)     # tensor ops: traceable
    c = tg.reshape(c, c.shape + (1,))
    frozen = out.detach()
    return frozen + (out - frozen) * c


def _check_rows(ids, shape):
    if ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= shape[0]:
            raise IndexError(f"embedding: index {lo if lo < 0 else hi} is out of range for "
                             f"weight of shape {shape} (indices must be in [0, {shape[0]}))")


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding of the integer `tensor`: shape ``tensor.shape +
    (num_classes,)``; ``num_classes=-1`` uses ``max(tensor) + 1`` (as torch's
    F.one_hot). Not differentiable.

    >>> import tapegrad as tg
    >>> import tapegrad_nn.functional as F
    >>> F.one_hot(tg.tensor([1, 0]), num_classes=3).tolist()
    [[0, 1, 0], [1, 0, 0]]
    """
    t = _int_indices(tensor, "one_hot")
    integral = isinstance(num_classes, (numbers.Integral, np.integer))
    if isinstance(num_classes, bool) or not integral:
        raise TypeError(f"one_hot: num_classes must be an integer, got {num_classes!r}")
    if num_classes == -1:
        # NOTE: the result's shape depends on the values: a replay could not follow it.
        run_eagerly("one_hot: num_classes=-1 takes the class count from the values")
        if t.size == 0:
            raise ValueError("one_hot: can not infer num_classes (-1) from an empty tensor")
        num_classes = int(tg.max(t).item()) + 1
    if num_classes < 0:
        raise ValueError(f"one_hot: num_classes must be -1 or >= 0, got {num_classes}")
    check_values(lambda ids: _check_classes(ids, num_classes), t)
    classes = tg.arange(num_classes, device=t.device)
    return (tg.reshape(t, t.shape + (1,)) == classes).astype(np.int64)


def _check_classes(ids, num_classes):
    if ids.size and (ids.min() < 0 or ids.max() >= num_classes):
        raise IndexError(f"one_hot: class values must be in [0, {num_classes}), got "
                         f"min {ids.min()} and max {ids.max()}")


# ---------------------------------------------------------------------------------------
# Channel dropout
# ---------------------------------------------------------------------------------------

def _check_p(p, op, name="p"):
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: {name} must be a probability in [0, 1], got {p!r}")
    return float(p)


def _channel_dropout(x, p, training, batched_ndim, op):
    _check_p(p, op)
    x = tg.asarray(x)
    if x.ndim not in (batched_ndim - 1, batched_ndim):
        raise ValueError(f"{op}: expected a {batched_ndim - 1}-D or {batched_ndim}-D input "
                         f"(channels first), got shape {x.shape}")
    if not training or p == 0.0:
        return x
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: input must be floating point, got {x.dtype}")
    if p == 1.0:
        return x * 0.0
    lead = 2 if x.ndim == batched_ndim else 1          # (N, C) or (C,)
    shape = x.shape[:lead] + (1,) * (x.ndim - lead)
    keep = tg.random.rand(*shape, dtype=x.dtype, device=x.device) >= p
    return x * tg.where(keep, 1.0 / (1.0 - p), 0.0).astype(x.dtype)


def _out_of_place(name, inplace):
    # NOTE: refused, not ignored: a port whose F.dropout2d(x, inplace=True) result is
    # unused would otherwise silently train without dropout.
    if inplace:
        raise ValueError(f"{name}: inplace=True is not supported (tapegrad computes out of "
                         f"place); write x = F.{name}(x, p, training)")


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels: each (n, c) channel of an (N, C, L) (or unbatched (C, L))
    input is zeroed with probability `p`, the others scaled by 1/(1-p); identity when not
    `training` (torch's F.dropout1d). The mask comes from ``tg.random.rand``."""
    _out_of_place("dropout1d", inplace)
    return _channel_dropout(input, p, training, 3, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, H, W) (or unbatched (C, H, W)... see below) input
    with probability `p`, scaling the rest by 1/(1-p); identity when not `training`.

    NOTE: as torch's F.dropout2d, a 3-D input is taken as (N, C, L) (channel-wise 1-D
    dropout) with a warning, not as an unbatched (C, H, W)."""
    _out_of_place("dropout2d", inplace)
    x = tg.asarray(input)
    if x.ndim == 3:
        warnings.warn("dropout2d: received a 3-D input; as PyTorch, it is treated as (N, C, "
                      "L) (use dropout1d for that, or add a batch axis)", UserWarning,
                      stacklevel=2)
        return _channel_dropout(x, p, training, 3, "dropout2d")
    return _channel_dropout(x, p, training, 4, "dropout2d")


# ---------------------------------------------------------------------------------------
# masked_fill
# ---------------------------------------------------------------------------------------

def masked_fill(input, mask, value):
    """`input` with `value` written where the boolean `mask` (broadcast to input's shape)
    is True, as torch's ``Tensor.masked_fill``; the result keeps input's shape and dtype.
    The gradient passes to `input` where mask is False (and to a tensor `value`, summed,
    where it is True).

    >>> import tapegrad as tg
    >>> x = tg.tensor([[1., 2.], [3., 4.]])
    >>> x.masked_fill(tg.tensor([True, False]), -1.0).tolist()
    [[-1.0, 2.0], [-1.0, 4.0]]
    """
    x = tg.asarray(input)
    m = tg.asarray(mask)
    if m.dtype != np.bool_:
        raise TypeError(f"masked_fill: mask must be a bool tensor, got {m.dtype}")
    try:
        ok = np.broadcast_shapes(m.shape, x.shape) == x.shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"masked_fill: mask of shape {m.shape} does not broadcast to the "
                         f"input's shape {x.shape}")
    if isinstance(value, tg.Tensor):
        if value.ndim != 0:
            raise ValueError(f"masked_fill: value must be a scalar or 0-d tensor, got "
                             f"shape {value.shape}")
        value = value.astype(x.dtype)
    out = tg.where(m, value, x)
    return out if out.dtype == x.dtype else out.astype(x.dtype)


# ---------------------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------------------

def _mT(t):
    axes = list(range(t.ndim))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return t.transpose(tuple(axes))


def _masked_scores(scores, mask, op):
    """scores with a boolean (True = keep) or additive float mask applied."""
    if mask is None:
        return scores
    mask = tg.asarray(mask)
    try:
        np.broadcast_shapes(mask.shape, scores.shape)
    except ValueError:
        raise ValueError(f"{op}: attn_mask of shape {mask.shape} does not broadcast to the "
                         f"attention scores' shape {scores.shape} (..., L, S)") from None
    if mask.dtype == np.bool_:
        return tg.where(mask, scores, -np.inf).astype(scores.dtype)
    if mask.dtype.kind != "f":
        raise TypeError(f"{op}: attn_mask must be bool or floating point, got {mask.dtype}")
    return scores + mask.astype(scores.dtype)


def _attention_weights(scores, safe):
    """softmax over the last axis. ``safe``: a row whose scores are all -inf gets weights
    0 (and no NaN in the gradient), as torch 2.x's scaled_dot_product_attention; otherwise
    such a row is NaN (as torch's MultiheadAttention)."""
    if not safe:
        return tg.softmax(scores, axis=-1)
    # NOTE: the row is replaced BEFORE the softmax (a NaN made there would reach the
    # gradient through softmax's rule even if the weights were zeroed afterwards).
    dead = tg.max(scores.detach(), axis=-1, keepdims=True) == -np.inf
    w = tg.softmax(tg.where(dead, 0.0, scores).astype(scores.dtype), axis=-1)
    return tg.where(dead, 0.0, w).astype(scores.dtype)


def _attend(query, key, value, mask, dropout_p, scale, safe, training, op):
    """(output, weights) of softmax(q k^T * scale + mask) v, dropout on the weights."""
    # NOTE: the scale multiplies the smaller of query (..., L, E) and the scores
    # (..., L, S): one elementwise pass (and one in backward) over fewer elements.
    if query.shape[-1] <= key.shape[-2]:
        scores = (query * scale) @ _mT(key)
    else:
        scores = (query @ _mT(key)) * scale
    w = _attention_weights(_masked_scores(scores, mask, op), safe)
    if dropout_p > 0.0 and training:
        from .functional import dropout
        w = dropout(w, dropout_p, True)
    return w @ value, w


_CAUSAL_MASKS = {}      # (L, S, device name) -> the boolean (L, S) tensor


def _causal_mask(L, S, device):
    """The top-left lower-triangular (L, S) boolean mask, built once per (L, S, device)
    and cached: a training loop calls attention with the same sizes every step. The
    cached tensor is a constant (no grad) that nothing writes to."""
    key = (L, S, str(device))
    mask = _CAUSAL_MASKS.get(key)
    if mask is None:
        if len(_CAUSAL_MASKS) >= 64:                 # bounded: sizes that vary a lot
            _CAUSAL_MASKS.clear()
        mask = _CAUSAL_MASKS[key] = tg.tensor(np.tril(np.ones((L, S), dtype=bool)),
                                              device=device)
    return mask


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value, as torch's
    F.scaled_dot_product_attention: query (..., L, E), key (..., S, E), value (..., S, Ev)
    with broadcast leading axes; result (..., L, Ev). ``scale`` defaults to 1/sqrt(E).
    Boolean masks are True where attention is allowed, float masks are added to the
    scores; a query row with every key masked gives zeros (torch 2.13's behaviour).

    ``attn_mask``: boolean (True = the query may attend to that key) or a float mask
    added to the scores, broadcast to (..., L, S). ``is_causal``: the top-left lower
    triangle of an (L, S) mask (query i attends to keys 0..i); not together with
    attn_mask. ``dropout_p``: dropout on the attention weights (``tg.random``), as torch
    (always applied when > 0: pass 0.0 in evaluation). A query row with every key masked
    gives zeros (and zero gradients), as torch 2.13 does. The softmax subtracts the row
    maximum (no overflow). ``enable_gqa`` is not supported.

    >>> import tapegrad as tg
    >>> import tapegrad_nn.functional as F
    >>> q = k = v = tg.ones((1, 2, 4))
    >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
    (1, 2, 4)
    """
    op = "scaled_dot_product_attention"
    q, k, v = tg.asarray(query), tg.asarray(key), tg.asarray(value)
    if enable_gqa:
        raise NotImplementedError(f"{op}: enable_gqa=True is not supported")
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.ndim < 2:
            raise ValueError(f"{op}: {name} must have at least 2 axes (..., L, E), got "
                             f"shape {t.shape}")
        if t.dtype.kind != "f":
            raise TypeError(f"{op}: {name} must be floating point, got {t.dtype}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"{op}: query, key and value must have one dtype, got {q.dtype}, "
                        f"{k.dtype} and {v.dtype}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{op}: expected query (..., L, E), key (..., S, E) and value "
                         f"(..., S, Ev), got {q.shape}, {k.shape} and {v.shape}")
    try:
        np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(f"{op}: the leading (batch) axes of query {q.shape}, key {k.shape} "
                         f"and value {v.shape} do not broadcast") from None
    _check_p(dropout_p, op, "dropout_p")
    if is_causal:
        if attn_mask is not None:
            raise ValueError(f"{op}: pass either attn_mask or is_causal=True, not both")
        attn_mask = _causal_mask(q.shape[-2], k.shape[-2], q.device)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return _attend(q, k, v, attn_mask, float(dropout_p), scale, True, True, op)[0]


# ---------------------------------------------------------------------------------------
# Registration (the kit gradchecks the samples)
# ---------------------------------------------------------------------------------------

def _r(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape)


def _sdpa_samples():
    q, k, v = _r(1, 2, 3, 4), _r(2, 2, 5, 4), _r(3, 2, 5, 3)
    bool_mask = np.random.default_rng(4).random((3, 5)) > 0.4
    bool_mask[:, 0] = True                       # no fully masked row (finite differences)
    return [tg.Sample(q, k, v), tg.Sample(q, k, v, attn_mask=bool_mask),
            tg.Sample(q, k, v, attn_mask=0.5 * _r(5, 2, 3, 5)),
            tg.Sample(_r(6, 4, 3), _r(7, 4, 3), _r(8, 4, 2), is_causal=True),
            tg.Sample(_r(9, 3, 2), _r(10, 2, 4, 2), _r(11, 1, 4, 3), scale=0.7)]


def register(registry):
    """Register the composed functions of this module (called from functional.register)."""
    fn = registry.register_function
    # NOTE: padding_idx and scale_grad_by_freq change the gradient on purpose (it is no
    # longer the derivative), so finite differences cannot check them: their samples are
    # not here; tests/test_nn_attention.py checks them against their definition.
    fn("embedding", embedding, method=False, samples=[
        (np.array([[0, 2, 2], [1, 3, 0]]), _r(12, 4, 3)),
        (np.array([1, 1, 3, 0]), _r(13, 4, 2))])
    fn("masked_fill", masked_fill, method=True, samples=[
        (_r(15, 3, 4), np.random.default_rng(16).random((3, 4)) > 0.5, 2.5),
        (_r(17, 2, 3, 4), np.array([True, False, False, True]), -1.0)])
    fn("scaled_dot_product_attention", scaled_dot_product_attention, method=False,
       samples=_sdpa_samples())
