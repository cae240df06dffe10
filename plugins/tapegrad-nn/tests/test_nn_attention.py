"""embedding, one_hot, dropout1d/2d, masked_fill, scaled_dot_product_attention and the
Embedding / MultiheadAttention / TransformerEncoderLayer modules: values against NumPy
formulas, the gradient conventions (padding_idx, scale_grad_by_freq), dropout statistics,
bad input; ``needs_torch`` tests compare with PyTorch."""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad_nn.attention as A

F = tg.nn.functional
RNG = np.random.default_rng(0)


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- embedding -------------------------------------------------------------------------

def test_embedding_picks_rows_and_repeated_indices_accumulate_gradient():
    w0 = RNG.standard_normal((5, 3))
    idx = np.array([[4, 1, 4], [0, 4, 1]])
    w = tg.tensor(w0, requires_grad=True)
    out = F.embedding(tg.tensor(idx), w)
    np.testing.assert_array_equal(out.numpy(), w0[idx])
    g = RNG.standard_normal(out.shape)
    out.backward(tg.tensor(g))
    want = np.zeros_like(w0)
    np.add.at(want, idx, g)
    np.testing.assert_allclose(w.grad.numpy(), want)
    assert want[4].any() and not want[2].any()


def test_embedding_padding_row_gets_no_gradient_and_scale_grad_by_freq_divides_by_count():
    w0 = RNG.standard_normal((4, 2))
    idx = np.array([1, 3, 1, 1, 0])
    w = tg.tensor(w0, requires_grad=True)
    F.embedding(tg.tensor(idx), w, padding_idx=-3).sum().backward()    # -3 is row 1
    np.testing.assert_allclose(w.grad.numpy(), [[1, 1], [0, 0], [0, 0], [1, 1]])
    w.grad = None
    out = F.embedding(tg.tensor(idx), w, scale_grad_by_freq=True)
    np.testing.assert_array_equal(out.numpy(), w0[idx])
    (out * 2.0).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [[2, 2], [2, 2], [0, 0], [2, 2]])  # 3 * 2/3


def test_embedding_max_norm_renormalises_referenced_rows_in_place():
    w0 = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    w = tg.tensor(w0.copy())
    out = F.embedding(tg.tensor([0, 1]), w, max_norm=1.0)
    want = w0.copy()
    want[0] *= 1.0 / (5.0 + 1e-7)
    np.testing.assert_allclose(w.numpy(), want)            # row 2 not referenced: kept
    np.testing.assert_allclose(out.numpy(), want[[0, 1]])
    w1 = tg.tensor(w0.copy())
    F.embedding(tg.tensor([2]), w1, max_norm=2.0, norm_type=1.0)
    np.testing.assert_allclose(w1.numpy()[2], w0[2] * 2.0 / (14.0 + 1e-7))


def test_embedding_bad_input():
    w = tg.zeros((3, 2))
    with pytest.raises(TypeError, match="embedding: indices must be an integer"):
        F.embedding(tg.tensor([0.0]), w)
    with pytest.raises(IndexError, match=r"embedding: index 3 is out of range for weight "
                                         r"of shape \(3, 2\)"):
        F.embedding(tg.tensor([0, 3]), w)
    with pytest.raises(IndexError, match="index -1"):
        F.embedding(tg.tensor([-1]), w)
    with pytest.raises(ValueError, match=r"embedding: weight must be 2-D.*\(6,\)"):
        F.embedding(tg.tensor([0]), tg.zeros(6))
    with pytest.raises(ValueError, match="padding_idx must be an integer in"):
        F.embedding(tg.tensor([0]), w, padding_idx=3)


def test_embedding_module_init_and_state_dict():
    tg.manual_seed(0)
    emb = tg.nn.Embedding(50, 4, padding_idx=2)
    w = emb.weight.numpy()
    np.testing.assert_array_equal(w[2], 0.0)
    rest = np.delete(w, 2, axis=0)
    assert abs(rest.mean()) < 0.3 and 0.7 < rest.std() < 1.3           # N(0, 1)
    table = RNG.standard_normal((50, 4))
    emb.load_state_dict({"weight": table})
    np.testing.assert_array_equal(emb(tg.tensor([[7, 2]])).numpy(), table[[[7, 2]]])
    pre = tg.nn.Embedding.from_pretrained(tg.tensor(table))
    assert not pre.weight.requires_grad
    with pytest.raises(ValueError, match=r"Embedding: _weight must have shape \(3, 4\)"):
        tg.nn.Embedding(3, 4, _weight=np.zeros((4, 3)))


# --- one_hot ---------------------------------------------------------------------------

def test_one_hot_values_and_dtype():
    out = F.one_hot(tg.tensor([[2, 0], [1, 2]]))
    assert out.dtype == np.int64 and out.shape == (2, 2, 3) and not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), np.eye(3, dtype=np.int64)[[[2, 0], [1, 2]]])
    assert F.one_hot(tg.tensor([1]), num_classes=4).tolist() == [[0, 1, 0, 0]]
    with pytest.raises(IndexError, match=r"one_hot: class values must be in \[0, 2\)"):
        F.one_hot(tg.tensor([2]), 2)
    with pytest.raises(TypeError, match="one_hot: indices must be an integer"):
        F.one_hot(tg.tensor([1.0]))


# --- channel dropout -------------------------------------------------------------------

def test_dropout2d_zeroes_whole_channels_with_probability_p():
    tg.manual_seed(1)
    x = tg.ones((200, 50, 3, 3))
    out = F.dropout2d(x, p=0.3).numpy()
    per_channel = out.reshape(200, 50, 9)
    assert np.all(per_channel.min(axis=2) == per_channel.max(axis=2))   # whole channels
    assert set(np.unique(out)) <= {0.0, 1.0 / 0.7}
    assert abs((per_channel[..., 0] == 0).mean() - 0.3) < 0.02            # 10,000 channels
    assert abs(out.mean() - 1.0) < 0.03
    np.testing.assert_array_equal(F.dropout2d(x, 0.3, training=False).numpy(), x.numpy())
    tg.manual_seed(1)
    np.testing.assert_array_equal(F.dropout2d(x, p=0.3).numpy(), out)   # reproducible


def test_dropout1d_gradient_and_modules():
    tg.manual_seed(2)
    x = tg.tensor(RNG.standard_normal((4, 6, 5)), requires_grad=True)
    out = F.dropout1d(x, p=0.5)
    out.sum().backward()
    kept = out.numpy()[..., 0] != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept[..., None], 2.0, 0.0)
                               * np.ones((1, 1, 5)))
    assert F.dropout1d(tg.ones((6, 5)), 0.5).shape == (6, 5)           # unbatched (C, L)
    m = tg.nn.Dropout2d(0.5).eval()
    assert m(tg.ones((1, 2, 2, 2))).tolist() == tg.ones((1, 2, 2, 2)).tolist()
    with pytest.warns(UserWarning, match="dropout2d: received a 3-D input"):
        F.dropout2d(tg.ones((2, 3, 4)))
    with pytest.raises(ValueError, match=r"dropout1d: expected a 2-D or 3-D input.*\(2, 3, 4, 5\)"):
        F.dropout1d(tg.ones((2, 3, 4, 5)))
    with pytest.raises(ValueError, match="dropout2d: p must be a probability"):
        F.dropout2d(tg.ones((1, 2, 2, 2)), p=1.5)
    with pytest.raises(ValueError, match="Dropout2d: p must be a probability"):
        tg.nn.Dropout2d(-0.1)


# --- masked_fill -----------------------------------------------------------------------

def test_masked_fill_values_gradient_and_method():
    x0 = RNG.standard_normal((3, 4)).astype(np.float32)
    mask = np.array([True, False, False, True])
    x = tg.tensor(x0, requires_grad=True)
    out = x.masked_fill(tg.tensor(mask), -np.inf)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.numpy(), np.where(mask, -np.inf, x0))
    F.masked_fill(x, tg.tensor(mask), 0.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(~mask, (3, 4)))
    with pytest.raises(TypeError, match="masked_fill: mask must be a bool tensor"):
        x.masked_fill(tg.tensor([1, 0, 0, 1]), 0.0)
    with pytest.raises(ValueError, match=r"masked_fill: mask of shape \(5,\) does not "
                                         r"broadcast to the input's shape \(3, 4\)"):
        x.masked_fill(tg.tensor(np.ones(5, bool)), 0.0)


# --- scaled_dot_product_attention ------------------------------------------------------

def _sdpa_numpy(q, k, v, add=None, scale=None):
    s = q @ np.swapaxes(k, -1, -2) * (scale or 1 / np.sqrt(q.shape[-1]))
    if add is not None:
        s = s + add
    return _softmax(s) @ v


def test_sdpa_matches_the_formula_for_each_mask_kind():
    q, k, v = (RNG.standard_normal(s) for s in ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5)))
    T = tg.tensor
    np.testing.assert_allclose(F.scaled_dot_product_attention(T(q), T(k), T(v)).numpy(),
                               _sdpa_numpy(q, k, v), rtol=1e-12)
    keep = RNG.random((4, 6)) > 0.5
    keep[:, 0] = True
    np.testing.assert_allclose(
        F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(keep)).numpy(),
        _sdpa_numpy(q, k, v, np.where(keep, 0.0, -np.inf)), rtol=1e-12)
    add = RNG.standard_normal((3, 4, 6))
    np.testing.assert_allclose(
        F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(add), scale=0.3).numpy(),
        _sdpa_numpy(q, k, v, add, 0.3), rtol=1e-12)
    causal = np.where(np.tril(np.ones((4, 6), bool)), 0.0, -np.inf)
    np.testing.assert_allclose(
        F.scaled_dot_product_attention(T(q), T(k), T(v), is_causal=True).numpy(),
        _sdpa_numpy(q, k, v, causal), rtol=1e-12)


def test_sdpa_is_stable_and_a_fully_masked_row_gives_zeros():
    q = tg.tensor(np.array([[[1000.0, 0.0], [1.0, 1.0]]]), requires_grad=True)
    v = tg.tensor(np.array([[[1.0, 2.0], [3.0, 4.0]]]))
    keep = tg.tensor(np.array([[True, True], [False, False]]))
    out = F.scaled_dot_product_attention(q, q, v, attn_mask=keep)
    assert np.isfinite(out.numpy()).all()
    np.testing.assert_array_equal(out.numpy()[0, 1], [0.0, 0.0])
    out.sum().backward()
    assert np.isfinite(q.grad.numpy()).all()
    fl = F.scaled_dot_product_attention(q, q, v, attn_mask=tg.tensor(
        np.array([[0.0, 0.0], [-np.inf, -np.inf]])))
    np.testing.assert_array_equal(fl.numpy()[0, 1], [0.0, 0.0])


def test_sdpa_dropout_on_the_weights_keeps_the_mean():
    tg.manual_seed(5)
    q = tg.zeros((400, 1, 50, 4))                     # uniform weights 1/50
    v = tg.ones((400, 1, 50, 1))
    out = F.scaled_dot_product_attention(q, q, v, dropout_p=0.25).numpy()
    # each output is (kept keys) / 50 / 0.75: mean 1, variance 0.25 / 0.75 / 50
    assert abs(out.mean() - 1.0) < 0.01
    assert abs(out.var() - 0.25 / 0.75 / 50) < 0.001


def test_multihead_attention_fully_masked_query_is_nan_as_torch():
    mha = tg.nn.MultiheadAttention(4, 2, batch_first=True)
    x = tg.tensor(RNG.standard_normal((2, 3, 4)))
    kpm = tg.tensor(np.array([[True] * 3, [False, True, False]]))
    out, w = mha(x, x, x, key_padding_mask=kpm)
    assert np.isnan(out.numpy()[0]).all() and np.isfinite(out.numpy()[1]).all()
    np.testing.assert_array_equal(w.numpy()[1][:, 1], 0.0)


def test_sdpa_bad_input():
    q = tg.zeros((2, 3, 4))
    with pytest.raises(ValueError, match="scaled_dot_product_attention: pass either "
                                         "attn_mask or is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=tg.ones((3, 3)), is_causal=True)
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention: expected query "
                                         r"\(\.\.\., L, E\).*\(2, 3, 5\)"):
        F.scaled_dot_product_attention(q, tg.zeros((2, 3, 5)), q)
    with pytest.raises(ValueError, match=r"attn_mask of shape \(4, 4\) does not broadcast"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=tg.ones((4, 4)))
    with pytest.raises(TypeError, match="query, key and value must have one dtype"):
        F.scaled_dot_product_attention(q, q, q.astype(np.float32))


# --- MultiheadAttention / TransformerEncoderLayer (no torch) ----------------------------

def test_multihead_attention_matches_numpy_heads():
    E, H, L, S, N = 6, 2, 4, 5, 3
    mha = tg.nn.MultiheadAttention(E, H, batch_first=True)
    assert mha.in_proj_weight.shape == (3 * E, E) and not mha.in_proj_bias.numpy().any()
    with tg.no_grad():
        mha.in_proj_bias[...] = tg.tensor(RNG.standard_normal(3 * E))
    W, b = mha.in_proj_weight.numpy(), mha.in_proj_bias.numpy()
    Wo, bo = mha.out_proj.weight.numpy(), mha.out_proj.bias.numpy()
    q, k = RNG.standard_normal((N, L, E)), RNG.standard_normal((N, S, E))
    kpm = np.zeros((N, S), bool)
    kpm[0, -2:] = True
    out, w = mha(tg.tensor(q), tg.tensor(k), tg.tensor(k), key_padding_mask=tg.tensor(kpm))
    D = E // H
    heads, weights = [], []
    for h in range(H):
        sl = slice(h * D, (h + 1) * D)
        qh = q @ W[:E][sl].T + b[:E][sl]
        kh = k @ W[E:2 * E][sl].T + b[E:2 * E][sl]
        vh = k @ W[2 * E:][sl].T + b[2 * E:][sl]
        a = _softmax(qh @ kh.transpose(0, 2, 1) / np.sqrt(D)
                     + np.where(kpm, -np.inf, 0.0)[:, None, :])
        heads.append(a @ vh)
        weights.append(a)
    want = np.concatenate(heads, axis=-1) @ Wo.T + bo
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.numpy(), np.mean(weights, axis=0), rtol=1e-10)
    assert mha(tg.tensor(q), tg.tensor(k), tg.tensor(k), need_weights=False)[1] is None
    _, per_head = mha(tg.tensor(q[0]), tg.tensor(k[0]), tg.tensor(k[0]),
                      key_padding_mask=tg.tensor(kpm[0]), average_attn_weights=False)
    np.testing.assert_allclose(per_head.numpy(), np.stack(weights, 1)[0], rtol=1e-10)


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_self_attention_with_causal_mask_matches_numpy_and_gradchecks(batch_first):
    # One tensor as query, key and value (the projections share it), seq-first or
    # batch-first input, a boolean causal attn_mask (True = masked, torch's MHA).
    E, H, L, N = 4, 2, 3, 2
    mha = tg.nn.MultiheadAttention(E, H, batch_first=batch_first)
    with tg.no_grad():
        mha.in_proj_bias[...] = tg.tensor(RNG.standard_normal(3 * E))
    W, b = mha.in_proj_weight.numpy(), mha.in_proj_bias.numpy()
    Wo, bo = mha.out_proj.weight.numpy(), mha.out_proj.bias.numpy()
    x = RNG.standard_normal((N, L, E))                    # batch-first for the reference
    causal = np.triu(np.ones((L, L), dtype=bool), 1)
    D = E // H
    heads = []
    for h in range(H):
        sl = slice(h * D, (h + 1) * D)
        qh, kh, vh = (x @ W[j * E:(j + 1) * E][sl].T + b[j * E:(j + 1) * E][sl]
                      for j in range(3))
        a = _softmax(qh @ kh.transpose(0, 2, 1) / np.sqrt(D) + np.where(causal, -np.inf, 0))
        heads.append(a @ vh)
    want = np.concatenate(heads, axis=-1) @ Wo.T + bo
    xin = x if batch_first else x.transpose(1, 0, 2)
    out, _ = mha(*(tg.tensor(xin),) * 3, attn_mask=tg.tensor(causal), need_weights=False)
    got = out.numpy() if batch_first else out.numpy().transpose(1, 0, 2)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    t = tg.tensor(xin, requires_grad=True)
    assert tg.gradcheck(lambda v: mha(v, v, v, attn_mask=tg.tensor(causal))[0], (t,))


def test_causal_mask_is_built_once_per_size_and_device():
    first = A._causal_mask(3, 4, tg.device("cpu"))
    assert A._causal_mask(3, 4, tg.device("cpu")) is first
    np.testing.assert_array_equal(first.numpy(), np.tril(np.ones((3, 4), dtype=bool)))
    assert A._causal_mask(4, 3, tg.device("cpu")).shape == (4, 3)
    q = tg.tensor(RNG.standard_normal((2, 3, 2)))
    k = tg.tensor(RNG.standard_normal((2, 4, 2)))
    np.testing.assert_allclose(
        F.scaled_dot_product_attention(q, k, k, is_causal=True).numpy(),
        F.scaled_dot_product_attention(q, k, k, attn_mask=tg.tensor(first.numpy())).numpy())


def test_multihead_attention_and_encoder_errors():
    mha = tg.nn.MultiheadAttention(4, 2)
    with pytest.raises(ValueError, match=r"MultiheadAttention\(embed_dim=4\): query must "
                                         r"be .*got shape \(3, 2, 5\)"):
        mha(tg.zeros((3, 2, 5)), tg.zeros((3, 2, 4)), tg.zeros((3, 2, 4)))
    with pytest.raises(ValueError, match=r"attn_mask must be \(L, S\) = \(3, 3\)"):
        x = tg.zeros((3, 2, 4))
        mha(x, x, x, attn_mask=tg.zeros((2, 2)))
    with pytest.raises(TypeError, match="query is float32 but the layer's parameters are "
                                        "float64"):
        x = tg.zeros((3, 2, 4), np.float32)
        mha(x, x, x)
    with pytest.raises(ValueError, match=r"embed_dim \(5\) must be divisible by num_heads"):
        tg.nn.MultiheadAttention(5, 2)
    with pytest.raises(ValueError, match="activation should be relu/gelu"):
        tg.nn.TransformerEncoderLayer(4, 2, activation="tanh")


def test_transformer_encoder_stacks_copies_and_post_norm_output_is_normalised():
    layer = tg.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    enc = tg.nn.TransformerEncoder(layer, 3)
    assert len(enc.layers) == 3 and enc.layers[0] is not enc.layers[1]
    assert len(list(enc.parameters())) == 3 * len(list(layer.parameters()))
    x = tg.tensor(RNG.standard_normal((5, 2, 8)), requires_grad=True)
    y = enc(x)
    np.testing.assert_allclose(y.numpy().mean(axis=-1), 0.0, atol=1e-12)   # norm2 last
    y.sum().backward()
    assert x.grad.shape == x.shape


def test_multihead_attention_gradients_pass_finite_differences_and_float32_is_kept():
    tg.manual_seed(4)
    mha = tg.nn.MultiheadAttention(4, 2)
    q = tg.tensor(RNG.standard_normal((3, 2, 4)), requires_grad=True)
    k = tg.tensor(RNG.standard_normal((5, 2, 4)), requires_grad=True)
    causal = tg.tensor(np.triu(np.ones((3, 5), bool), 1))
    assert tg.gradcheck(lambda q, k: mha(q, k, k, attn_mask=causal)[0], (q, k))
    assert tg.gradgradcheck(lambda q: mha(q, k, k)[0], (q,))
    m32 = tg.nn.TransformerDecoderLayer(4, 2, 8, dtype=np.float32).eval()
    x = tg.ones((3, 2, 4), np.float32)
    assert m32(x, tg.ones((5, 2, 4), np.float32)).dtype == np.float32
    assert F.scaled_dot_product_attention(x, x, x).dtype == np.float32


# --- against PyTorch -------------------------------------------------------------------

@pytest.mark.needs_torch
def test_sdpa_matches_torch_for_each_mask_kind():
    import torch
    q, k, v = (RNG.standard_normal(s) for s in ((2, 4, 8), (2, 6, 8), (2, 6, 3)))
    keep = RNG.random((4, 6)) > 0.5
    keep[2] = False                                       # a fully masked row
    add = RNG.standard_normal((4, 6))
    for kw in ({}, {"attn_mask": keep}, {"attn_mask": add}, {"is_causal": True},
               {"scale": 0.2}):
        tq = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
        tkw = {n: torch.tensor(a) if isinstance(a, np.ndarray) else a for n, a in kw.items()}
        to = torch.nn.functional.scaled_dot_product_attention(*tq, **tkw)
        to.square().sum().backward()
        gq = [tg.tensor(a, requires_grad=True) for a in (q, k, v)]
        go = F.scaled_dot_product_attention(*gq, **kw)
        go.square().sum().backward()
        np.testing.assert_allclose(go.numpy(), to.detach().numpy(), rtol=1e-10, atol=1e-12)
        for a, b in zip(gq, tq):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)


def _torch_grads_match(tmod, gmod, args_t, args_g):
    import torch
    out_t = tmod(*args_t)
    out_t = out_t[0] if isinstance(out_t, tuple) else out_t
    out_g = gmod(*args_g)
    out_g = out_g[0] if isinstance(out_g, tuple) else out_g
    np.testing.assert_allclose(out_g.numpy(), out_t.detach().numpy(), rtol=1e-9, atol=1e-12)
    out_t.square().sum().backward()
    out_g.square().sum().backward()
    for a, b in zip(args_g, args_t):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)
    tp = dict(tmod.named_parameters())
    for name, p in gmod.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=1e-9,
                                   atol=1e-12, err_msg=name)


@pytest.mark.needs_torch
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_loads_torch_state_dict_and_matches(batch_first):
    import torch
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2, dropout=0.2, batch_first=batch_first,
                                     dtype=torch.float64).eval()
    gm = tg.nn.MultiheadAttention(8, 2, dropout=0.2, batch_first=batch_first).eval()
    gm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    shape_q, shape_k = ((3, 4, 8), (3, 5, 8)) if batch_first else ((4, 3, 8), (5, 3, 8))
    q, k = RNG.standard_normal(shape_q), RNG.standard_normal(shape_k)
    kpm = np.zeros((3, 5), bool)
    kpm[1, :2] = True
    am = RNG.standard_normal((4, 5))
    tq, tk = torch.tensor(q, requires_grad=True), torch.tensor(k, requires_grad=True)
    gq, gk = tg.tensor(q, requires_grad=True), tg.tensor(k, requires_grad=True)
    _torch_grads_match(tm, gm, (tq, tk, tk, torch.tensor(kpm), True, torch.tensor(am)),
                       (gq, gk, gk, tg.tensor(kpm), True, tg.tensor(am)))
    tw = tm(tq, tk, tk, key_padding_mask=torch.tensor(kpm), average_attn_weights=False)[1]
    gw = gm(gq, gk, gk, key_padding_mask=tg.tensor(kpm), average_attn_weights=False)[1]
    np.testing.assert_allclose(gw.numpy(), tw.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.needs_torch
@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_layer_matches_torch(norm_first, activation):
    import torch
    torch.manual_seed(1)
    kw = dict(dim_feedforward=16, dropout=0.1, activation=activation, batch_first=True,
              norm_first=norm_first)
    tl = torch.nn.TransformerEncoderLayer(8, 2, dtype=torch.float64, **kw).eval()
    gl = tg.nn.TransformerEncoderLayer(8, 2, **kw).eval()
    gl.load_state_dict({k: v.detach().numpy() for k, v in tl.state_dict().items()})
    x = RNG.standard_normal((3, 5, 8))
    kpm = np.zeros((3, 5), bool)
    kpm[1, 3:] = True
    causal = np.triu(np.ones((5, 5), bool), 1)          # MHA convention: True = blocked
    _torch_grads_match(tl, gl, (torch.tensor(x, requires_grad=True), torch.tensor(causal),
                                torch.tensor(kpm)),
                       (tg.tensor(x, requires_grad=True), tg.tensor(causal), tg.tensor(kpm)))


@pytest.mark.needs_torch
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_decoder_layer_matches_torch(norm_first):
    import torch
    torch.manual_seed(2)
    kw = dict(dim_feedforward=12, dropout=0.1, activation="gelu", norm_first=norm_first)
    tl = torch.nn.TransformerDecoderLayer(8, 4, dtype=torch.float64, **kw).eval()
    gl = tg.nn.TransformerDecoderLayer(8, 4, **kw).eval()
    gl.load_state_dict({k: v.detach().numpy() for k, v in tl.state_dict().items()})
    x, mem = RNG.standard_normal((5, 2, 8)), RNG.standard_normal((6, 2, 8))
    causal = np.where(np.triu(np.ones((5, 5), bool), 1), -np.inf, 0.0)   # float mask
    mkpm = np.zeros((2, 6), bool)
    mkpm[0, 4:] = True
    _torch_grads_match(
        tl, gl, (torch.tensor(x, requires_grad=True), torch.tensor(mem, requires_grad=True),
                 torch.tensor(causal), None, None, torch.tensor(mkpm)),
        (tg.tensor(x, requires_grad=True), tg.tensor(mem, requires_grad=True),
         tg.tensor(causal), None, None, tg.tensor(mkpm)))


@pytest.mark.needs_torch
def test_transformer_encoder_with_final_norm_loads_torch_state_dict():
    import torch
    torch.manual_seed(3)
    tl = torch.nn.TransformerEncoderLayer(8, 2, 16, dtype=torch.float64)
    te = torch.nn.TransformerEncoder(tl, 2, norm=torch.nn.LayerNorm(8, dtype=torch.float64),
                                     enable_nested_tensor=False).eval()
    ge = tg.nn.TransformerEncoder(tg.nn.TransformerEncoderLayer(8, 2, 16), 2,
                                  norm=tg.nn.LayerNorm(8)).eval()
    ge.load_state_dict({k: v.detach().numpy() for k, v in te.state_dict().items()})
    x = RNG.standard_normal((4, 3, 8))
    _torch_grads_match(te, ge, (torch.tensor(x, requires_grad=True),),
                       (tg.tensor(x, requires_grad=True),))


# --- under tg.compile ------------------------------------------------------------------

def test_compiled_embedding_padding_gradient_and_index_check_follow_each_call():
    w0 = RNG.standard_normal((5, 3))
    w = tg.tensor(w0, requires_grad=True)

    @tg.compile
    def step(idx):
        return F.embedding(idx, w, padding_idx=0).sum()

    for ids in ([0, 1, 1], [2, 0, 4], [3, 3, 0]):
        w.grad = None
        step(tg.tensor(ids)).backward()
        want = np.zeros_like(w0)
        np.add.at(want, np.array(ids), 1.0)
        want[0] = 0.0
        np.testing.assert_array_equal(w.grad.numpy(), want)
    assert step.cache_info().hits == 2                               # replays, not eager
    with pytest.raises(IndexError, match="embedding: index -1 is out of range"):
        step(tg.tensor([1, -1, 2]))                                  # a replay checks too
    oh = tg.compile(lambda t: F.one_hot(t, 3))
    oh(tg.tensor([0, 1]))
    assert oh(tg.tensor([2, 2])).tolist() == [[0, 0, 1], [0, 0, 1]]
    with pytest.raises(IndexError, match="one_hot: class values must be in"):
        oh(tg.tensor([3, 0]))


def test_compiled_attention_and_mha_match_eager():
    tg.manual_seed(6)
    mha = tg.nn.MultiheadAttention(4, 2, batch_first=True)
    f = tg.compile(lambda x, kpm: mha(x, x, x, key_padding_mask=kpm)[0])
    for seed in range(3):
        rng = np.random.default_rng(seed)
        x = tg.tensor(rng.standard_normal((2, 3, 4)))
        kpm = tg.tensor(rng.random((2, 3)) > 0.7)
        kpm[:, 0] = False
        np.testing.assert_allclose(f(x, kpm).numpy(),
                                   mha(x, x, x, key_padding_mask=kpm)[0].numpy(), rtol=1e-12)
    assert f.cache_info().hits == 2


@pytest.mark.needs_torch
@pytest.mark.parametrize("kw", [{}, {"padding_idx": 2}, {"scale_grad_by_freq": True},
                                {"max_norm": 1.5, "padding_idx": 0}])
def test_embedding_matches_torch(kw):
    import torch
    torch.manual_seed(7)
    te = torch.nn.Embedding(6, 3, dtype=torch.float64, **kw)
    ge = tg.nn.Embedding(6, 3, **kw)
    ge.load_state_dict({k: v.detach().numpy().copy() for k, v in te.state_dict().items()})
    idx = np.array([[2, 5, 2], [0, 2, 1]])
    g = RNG.standard_normal((2, 3, 3))
    to = te(torch.tensor(idx))
    to.backward(torch.tensor(g))
    go = ge(tg.tensor(idx))
    go.backward(tg.tensor(g))
    np.testing.assert_allclose(go.numpy(), to.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ge.weight.numpy(), te.weight.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ge.weight.grad.numpy(), te.weight.grad.numpy(), rtol=1e-12)
    oh = torch.nn.functional.one_hot(torch.tensor(idx))
    np.testing.assert_array_equal(F.one_hot(tg.tensor(idx)).numpy(), oh.numpy())
