"""Embedding, channel dropout, MultiheadAttention and the Transformer encoder layers, with
torch.nn's class names, constructor arguments, parameter names and shapes (a PyTorch
state_dict converted to arrays loads with ``load_state_dict``) and default initialisation.

>>> import tapegrad as tg
>>> mha = tg.nn.MultiheadAttention(8, 2, batch_first=True)
>>> out, w = mha(tg.ones((3, 5, 8)), tg.ones((3, 4, 8)), tg.ones((3, 4, 8)))
>>> out.shape, w.shape
((3, 5, 8), (3, 5, 4))
"""

from __future__ import annotations

import copy
import math
import numbers

import numpy as np
import tapegrad as tg

from . import attention as A
from . import functional as F
from .nn import Dropout, Linear, Module, ModuleList, Parameter, _layer_dtype
from .nn_normalization import LayerNorm

__all__ = ["Embedding", "Dropout1d", "Dropout2d", "MultiheadAttention",
           "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder"]


def _positive_int(v, what, layer):
    if isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer)) or v <= 0:
        raise ValueError(f"{layer}: {what} must be a positive integer, got {v!r}")
    return int(v)


_float_dtype = _layer_dtype      # None: tg.get_default_dtype()


def _xavier_uniform(shape, dtype, device):
    fan_out, fan_in = shape[0], math.prod(shape[1:])
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return tg.random.uniform(-bound, bound, shape, dtype=dtype, device=device)


class Embedding(Module):
    """A lookup table: ``weight`` (num_embeddings, embedding_dim), initialised N(0, 1)
    with the ``padding_idx`` row zeroed (PyTorch's init); ``forward(input)`` is
    ``F.embedding`` (the padding row gets no gradient; ``max_norm`` renormalises the looked
    up rows in place). ``_weight`` gives the initial table; ``_freeze=True`` makes it
    non-trainable (as ``Embedding.from_pretrained``).

    >>> import tapegrad as tg
    >>> emb = tg.nn.Embedding(10, 3, padding_idx=0)
    >>> emb(tg.tensor([[0, 4]])).shape, emb.weight[0].tolist()
    ((1, 2, 3), [0.0, 0.0, 0.0])
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, *, dtype=None, device=None):
        super().__init__()
        self.num_embeddings = _positive_int(num_embeddings, "num_embeddings", "Embedding")
        self.embedding_dim = _positive_int(embedding_dim, "embedding_dim", "Embedding")
        self.padding_idx = A._pad_index(padding_idx, self.num_embeddings, "Embedding")
        self.max_norm, self.norm_type = max_norm, float(norm_type)
        self.scale_grad_by_freq = bool(scale_grad_by_freq)
        if sparse:
            raise NotImplementedError("Embedding: sparse=True is not supported")
        self.sparse = False
        dtype = _float_dtype(dtype, "Embedding")
        shape = (self.num_embeddings, self.embedding_dim)
        if _weight is None:
            self.weight = Parameter(tg.zeros(shape, dtype, device))
            self.reset_parameters()
        else:
            w = tg.asarray(_weight)
            if w.shape != shape:
                raise ValueError(f"Embedding: _weight must have shape {shape}, got {w.shape}")
            self.weight = Parameter(tg.tensor(np.array(w.cpu().numpy()), device=device))
        if _freeze:
            self.weight.requires_grad = False

    def reset_parameters(self):
        """Draw the table again from N(0, 1), the padding row zeroed."""
        with tg.no_grad():
            self.weight[...] = tg.random.randn(*self.weight.shape, dtype=self.weight.dtype,
                                               device=self.weight.device)
            if self.padding_idx is not None:
                self.weight[self.padding_idx] = 0.0

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding holding (a copy of) the 2-D `embeddings`."""
        e = tg.asarray(embeddings)
        if e.ndim != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D, got shape "
                             f"{e.shape}")
        return cls(e.shape[0], e.shape[1], padding_idx, max_norm, norm_type,
                   scale_grad_by_freq, sparse, _weight=e, _freeze=freeze, dtype=e.dtype,
                   device=e.device)

    def forward(self, input):
        return A.embedding(input, self.weight, self.padding_idx, self.max_norm,
                           self.norm_type, self.scale_grad_by_freq)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        return s


class Dropout1d(Dropout):
    """``F.dropout1d`` in training mode (whole channels of (N, C, L)), identity in eval.
    ``inplace`` is accepted and ignored (the result is computed out of place)."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__(A._check_p(p, type(self).__name__))

    def forward(self, x):
        return A.dropout1d(x, self.p, self.training)


class Dropout2d(Dropout1d):
    """``F.dropout2d`` in training mode (whole channels of (N, C, H, W)), identity in
    eval."""

    def forward(self, x):
        return A.dropout2d(x, self.p, self.training)


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention: ``in_proj_weight`` (3E, E) (xavier uniform),
    ``in_proj_bias`` (3E,) (zeros), ``out_proj`` a Linear(E, E) (bias zeros).
    ``forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` returns ``(output,
    weights)``: output (L, N, E) ((N, L, E) with batch_first, (L, E) unbatched), weights
    (N, L, S) averaged over heads, (N, num_heads, L, S) with average_attn_weights=False,
    None with need_weights=False.

    Masks are torch's: a boolean attn_mask ((L, S) or (N * num_heads, L, S)) and
    key_padding_mask ((N, S)) are True where attention is NOT allowed; float masks are
    added to the scores. ``is_causal`` is, as torch, only a hint that attn_mask is the
    causal mask (attn_mask is required with it). A query with every key masked gives NaN,
    as torch's MultiheadAttention. kdim/vdim other than embed_dim, add_bias_kv and
    add_zero_attn are not supported (an error).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, *,
                 dtype=None, device=None):
        super().__init__()
        name = "MultiheadAttention"
        self.embed_dim = _positive_int(embed_dim, "embed_dim", name)
        self.num_heads = _positive_int(num_heads, "num_heads", name)
        if self.embed_dim % self.num_heads:
            raise ValueError(f"{name}: embed_dim ({embed_dim}) must be divisible by "
                             f"num_heads ({num_heads})")
        if (kdim not in (None, embed_dim)) or (vdim not in (None, embed_dim)):
            raise NotImplementedError(f"{name}: kdim/vdim different from embed_dim "
                                      f"(separate q/k/v projections) are not supported")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError(f"{name}: add_bias_kv and add_zero_attn are not "
                                      f"supported")
        self.kdim = self.vdim = self.embed_dim
        self.dropout = A._check_p(dropout, name, "dropout")
        self.batch_first = bool(batch_first)
        self.head_dim = self.embed_dim // self.num_heads
        dtype = _float_dtype(dtype, name)
        E = self.embed_dim
        self.in_proj_weight = Parameter(_xavier_uniform((3 * E, E), dtype, device))
        if bias:
            self.in_proj_bias = Parameter(tg.zeros((3 * E,), dtype, device))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(E, E, bias=bias, dtype=dtype, device=device)
        if bias:
            with tg.no_grad():
                self.out_proj.bias[...] = 0.0

    def _check(self, t, what):
        if t.ndim not in (2, 3) or t.shape[-1] != self.embed_dim:
            raise ValueError(f"MultiheadAttention(embed_dim={self.embed_dim}): {what} must "
                             f"be (L, N, E), (N, L, E) with batch_first, or (L, E) with "
                             f"E={self.embed_dim}, got shape {t.shape}")
        if t.dtype != self.in_proj_weight.dtype:
            raise TypeError(f"MultiheadAttention: {what} is {t.dtype} but the layer's "
                            f"parameters are {self.in_proj_weight.dtype}")

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        q, k, v = tg.asarray(query), tg.asarray(key), tg.asarray(value)
        for t, what in ((q, "query"), (k, "key"), (v, "value")):
            self._check(t, what)
        if not q.ndim == k.ndim == v.ndim:
            raise ValueError(f"MultiheadAttention: query, key and value must all be batched "
                             f"or all unbatched, got shapes {q.shape}, {k.shape}, {v.shape}")
        if is_causal and attn_mask is None:
            raise ValueError("MultiheadAttention: is_causal=True is a hint that attn_mask "
                             "is the causal mask; pass attn_mask too (as torch)")
        unbatched = q.ndim == 2
        # NOTE: the heads are computed batch-first, (N, T, E): each projection's rows are
        # then contiguous (one 2-D GEMM without a copy, see functional._rows_matmul) and
        # each head's (T, D) matrix has a row stride of E, not N * E (the batched
        # products' per-head GEMMs read close rows). Seq-first inputs are transposed once.
        if unbatched:
            q, k, v = q[None], k[None], v[None]              # (1, T, E)
        elif not self.batch_first:
            q, k, v = (t.transpose((1, 0, 2)) for t in (q, k, v))
        if k.shape[:2] != v.shape[:2] or k.shape[0] != q.shape[0]:
            raise ValueError(f"MultiheadAttention: key {tuple(key.shape)} and value "
                             f"{tuple(value.shape)} must have one (S, N) and the batch of "
                             f"query {tuple(query.shape)}")
        N, L, E = q.shape
        S, H, D = k.shape[1], self.num_heads, self.head_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        # NOTE: three (N*T, E) @ (E, E) GEMMs cost what one (N*T, E) @ (E, 3E) GEMM does,
        # and their gradients need no split of a packed (N, T, 3E) result (whose slices'
        # gradients would each be a zero-filled (N, T, 3E) buffer). In self-attention
        # the same tensor feeds all three.
        sources = (q, q, q) if query is key and key is value else (q, k, v)
        proj = [F.linear(t, w[i * E:(i + 1) * E], None if b is None else b[i * E:(i + 1) * E])
                for i, t in enumerate(sources)]
        # (N, T, E) -> (N, H, T, D)
        qh, kh, vh = (p.reshape((N, p.shape[1], H, D)).transpose((0, 2, 1, 3)) for p in proj)
        mask = self._merged_mask(attn_mask, key_padding_mask, N, L, S, q.dtype, unbatched)
        p = self.dropout if self.training else 0.0
        out, weights = A._attend(qh, kh, vh, mask, p, 1.0 / math.sqrt(D), False, True,
                                 "MultiheadAttention")
        out = self.out_proj(out.transpose((0, 2, 1, 3)).reshape((N, L, E)))
        if unbatched:
            out = out[0]
        elif not self.batch_first:
            out = out.transpose((1, 0, 2))
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = tg.mean(weights, axis=1)
        if unbatched:
            weights = weights[0]
        return out, weights

    def _merged_mask(self, attn_mask, key_padding_mask, N, L, S, dtype, unbatched):
        """One additive float mask broadcastable to (N, H, L, S), or None."""
        name = "MultiheadAttention"

        def additive(m, what):
            m = tg.asarray(m)
            if m.dtype == np.bool_:
                return tg.where(m, -np.inf, 0.0).astype(dtype)
            if m.dtype.kind != "f":
                raise TypeError(f"{name}: {what} must be bool or floating point, got "
                                f"{m.dtype}")
            return m.astype(dtype)

        mask = None
        if attn_mask is not None:
            m = additive(attn_mask, "attn_mask")
            if m.shape == (L, S):
                mask = m
            elif m.shape == (N * self.num_heads, L, S):
                mask = m.reshape((N, self.num_heads, L, S))
            else:
                raise ValueError(f"{name}: attn_mask must be (L, S) = {(L, S)} or "
                                 f"(N * num_heads, L, S) = {(N * self.num_heads, L, S)}, "
                                 f"got {m.shape}")
        if key_padding_mask is not None:
            m = additive(key_padding_mask, "key_padding_mask")
            want = (S,) if unbatched else (N, S)
            if m.shape != want:
                raise ValueError(f"{name}: key_padding_mask must be (N, S) = {want}"
                                 f"{' (S,) unbatched' if unbatched else ''}, got {m.shape}")
            m = m.reshape((N, 1, 1, S))
            mask = m if mask is None else mask + m
        return mask

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, " \
               f"dropout={self.dropout}, batch_first={self.batch_first}"


# NOTE: looked up at call time (tg.relu does not exist while plugins are loading).
_ACTIVATIONS = {"relu": lambda x: tg.relu(x), "gelu": lambda x: F.gelu(x)}


def _activation(activation, layer):
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError(f"{layer}: activation should be relu/gelu, not {activation!r}")
        return _ACTIVATIONS[activation]
    if callable(activation):
        return activation
    raise TypeError(f"{layer}: activation must be 'relu', 'gelu' or a callable, got "
                    f"{activation!r}")


def _clones(layer, n, owner):
    if not isinstance(layer, Module):
        raise TypeError(f"{owner}: the layer must be a Module, got {type(layer).__name__}")
    return ModuleList([copy.deepcopy(layer) for _ in range(_positive_int(n, "num_layers",
                                                                         owner))])


def _check_width(layer, t, what):
    """The error names the layer and its d_model (MultiheadAttention's or LayerNorm's own
    error, raised further in, would name only the sub-layer)."""
    d_model = layer.linear1.in_features
    if t.ndim not in (2, 3) or t.shape[-1] != d_model:
        raise ValueError(f"{type(layer).__name__}(d_model={d_model}, "
                         f"nhead={layer.self_attn.num_heads}): {what} must be (S, N, {d_model}), "
                         f"(N, S, {d_model}) with batch_first, or (S, {d_model}), got shape "
                         f"{t.shape}")


class TransformerEncoderLayer(Module):
    """torch.nn.TransformerEncoderLayer: self-attention (``self_attn``, a
    MultiheadAttention) and a feed-forward block (``linear1`` -> activation -> dropout ->
    ``linear2``), each with a residual connection and a LayerNorm (``norm1``, ``norm2``),
    post-norm by default, pre-norm with ``norm_first=True``. Dropouts ``dropout``,
    ``dropout1``, ``dropout2`` as torch. ``activation``: "relu", "gelu" or a callable.
    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, *,
                 dtype=None, device=None):
        super().__init__()
        kw = {"dtype": dtype, "device": device}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = _activation(activation, "TransformerEncoderLayer")

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = tg.asarray(src)
        _check_width(self, x, "src")
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """A stack of `num_layers` deep copies of `encoder_layer` (``layers``, a ModuleList),
    then the optional `norm`, as torch.nn.TransformerEncoder. ``forward(src, mask=None,
    src_key_padding_mask=None, is_causal=None)``. (``enable_nested_tensor`` and
    ``mask_check`` are accepted and ignored: they are PyTorch fast-path switches.)"""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers, "TransformerEncoder")
        self.num_layers = len(self.layers)
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


class TransformerDecoderLayer(Module):
    """torch.nn.TransformerDecoderLayer: self-attention (``self_attn``), attention over
    the encoder's output (``multihead_attn``) and the feed-forward block (``linear1``,
    ``linear2``), each with a residual connection and a LayerNorm (``norm1..3``) and
    dropout (``dropout1..3``, ``dropout`` inside the feed-forward block); post-norm by
    default, pre-norm with ``norm_first=True``. ``forward(tgt, memory, tgt_mask=None,
    memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    tgt_is_causal=False, memory_is_causal=False)``.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, *,
                 dtype=None, device=None):
        super().__init__()
        kw = {"dtype": dtype, "device": device}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1, self.dropout2, self.dropout3 = (Dropout(dropout) for _ in range(3))
        self.activation = _activation(activation, "TransformerDecoderLayer")

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x, mem = tg.asarray(tgt), tg.asarray(memory)
        _check_width(self, x, "tgt")
        _check_width(self, mem, "memory")
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), mem, memory_mask, memory_key_padding_mask,
                                    memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, mem, memory_mask, memory_key_padding_mask,
                                           memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """A stack of `num_layers` deep copies of `decoder_layer` (``layers``), then the
    optional `norm`, as torch.nn.TransformerDecoder. ``forward(tgt, memory, tgt_mask=None,
    memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    tgt_is_causal=None, memory_is_causal=False)``."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers, "TransformerDecoder")
        self.num_layers = len(self.layers)
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)
