"""Issue 15 audit, without torch: what the per-layer files left open.

- The Transformer layers (encoder and decoder, post- and pre-norm) against a reference
  written with plain tapegrad ops (matmul, exp, mean, sqrt, maximum): values and the
  gradients of the input and of every parameter; finite differences for the input.
- The nn functions that are not registered ops, so the contract kit does not see them
  (dropout, dropout1d/2d, bilinear, F.kl_div, one_hot): first and second derivatives by
  finite differences in float64, float32 kept.
- "Must show": a layer given a wrongly shaped input names itself, the expected and the
  received shape.
- Loss modules bind positional arguments in torch.nn's order; Adam's
  ``decoupled_weight_decay`` is AdamW's rule.
"""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.testing as tgt

F = tg.nn.functional
RNG = np.random.default_rng(1515)


# --- Transformer layers against plain tapegrad ops ------------------------------------------

def _layer_norm(x, norm):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / tg.sqrt(var + norm.eps) * norm.weight + norm.bias


def _linear(x, lin):
    return x @ lin.weight.T + lin.bias


def _attention(q_in, kv_in, mha, may_not_attend):
    """torch's MultiheadAttention, batch first (N, L, E): one head at a time."""
    E, H = mha.embed_dim, mha.num_heads
    D = E // H
    W, b = mha.in_proj_weight, mha.in_proj_bias
    heads = []
    for h in range(H):
        rows = slice(h * D, (h + 1) * D)
        q = q_in @ W[:E][rows].T + b[:E][rows]
        k = kv_in @ W[E:2 * E][rows].T + b[E:2 * E][rows]
        v = kv_in @ W[2 * E:][rows].T + b[2 * E:][rows]
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(D)
        if may_not_attend is not None:
            scores = scores + np.where(may_not_attend, -1e30, 0.0)
        e = tg.exp(scores - scores.detach().max(axis=-1, keepdims=True))
        heads.append((e / e.sum(axis=-1, keepdims=True)) @ v)
    return _linear(tg.concatenate(heads, axis=-1), mha.out_proj)


def _feed_forward(x, layer, activation):
    return _linear(activation(_linear(x, layer.linear1)), layer.linear2)


def _encoder_reference(layer, x, mask, activation):
    sa = lambda z: _attention(z, z, layer.self_attn, mask)            # noqa: E731
    ff = lambda z: _feed_forward(z, layer, activation)                # noqa: E731
    if layer.norm_first:
        x = x + sa(_layer_norm(x, layer.norm1))
        return x + ff(_layer_norm(x, layer.norm2))
    x = _layer_norm(x + sa(x), layer.norm1)
    return _layer_norm(x + ff(x), layer.norm2)


def _decoder_reference(layer, x, memory, mask, activation):
    sa = lambda z: _attention(z, z, layer.self_attn, mask)            # noqa: E731
    ca = lambda z: _attention(z, memory, layer.multihead_attn, None)  # noqa: E731
    ff = lambda z: _feed_forward(z, layer, activation)                # noqa: E731
    if layer.norm_first:
        x = x + sa(_layer_norm(x, layer.norm1))
        x = x + ca(_layer_norm(x, layer.norm2))
        return x + ff(_layer_norm(x, layer.norm3))
    x = _layer_norm(x + sa(x), layer.norm1)
    x = _layer_norm(x + ca(x), layer.norm2)
    return _layer_norm(x + ff(x), layer.norm3)


def _randomise(layer):
    """Non-zero biases and non-trivial norms, so that every parameter matters."""
    with tg.no_grad():
        for _, p in layer.named_parameters():
            p[...] = tg.tensor(0.3 * RNG.standard_normal(p.shape))


def _grads(layer, inputs):
    got = {n: p.grad.numpy().copy() for n, p in layer.named_parameters()}
    got.update({f"input{i}": t.grad.numpy().copy() for i, t in enumerate(inputs)})
    layer.zero_grad()
    for t in inputs:
        t.grad = None
    return got


ACTIVATIONS = [("relu", lambda z: tg.maximum(z, 0.0)), (tg.tanh, tg.tanh)]


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("activation,plain", ACTIVATIONS, ids=["relu", "callable"])
def test_transformer_encoder_layer_equals_the_plain_op_reference(norm_first, batch_first,
                                                                  activation, plain):
    layer = tg.nn.TransformerEncoderLayer(6, 2, 10, dropout=0.0, activation=activation,
                                          batch_first=batch_first, norm_first=norm_first)
    _randomise(layer)
    x0 = RNG.standard_normal((3, 4, 6))                    # (N, S, E)
    causal = np.triu(np.ones((4, 4), bool), 1)             # True: may not attend
    x = tg.tensor(x0 if batch_first else x0.transpose(1, 0, 2), requires_grad=True)
    y = layer(x, src_mask=tg.tensor(causal))
    y_batch_first = y if batch_first else y.transpose(1, 0, 2)
    cot = RNG.standard_normal(y_batch_first.shape)
    (y_batch_first * tg.tensor(cot)).sum().backward()
    got = _grads(layer, [x])

    xr = tg.tensor(x0, requires_grad=True)
    want_y = _encoder_reference(layer, xr, causal, plain)
    np.testing.assert_allclose(y_batch_first.numpy(), want_y.numpy(), rtol=1e-10, atol=1e-12)
    (want_y * tg.tensor(cot)).sum().backward()
    want = _grads(layer, [xr])
    if not batch_first:
        want["input0"] = want["input0"].transpose(1, 0, 2)
    assert set(got) == set(want)
    for name in got:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-9, atol=1e-11, err_msg=name)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_decoder_layer_equals_the_plain_op_reference(norm_first):
    layer = tg.nn.TransformerDecoderLayer(6, 3, 8, dropout=0.0, batch_first=True,
                                          norm_first=norm_first)
    _randomise(layer)
    x0, m0 = RNG.standard_normal((2, 4, 6)), RNG.standard_normal((2, 5, 6))
    causal = np.triu(np.ones((4, 4), bool), 1)
    x, mem = tg.tensor(x0, requires_grad=True), tg.tensor(m0, requires_grad=True)
    y = layer(x, mem, tgt_mask=tg.tensor(causal))
    cot = tg.tensor(RNG.standard_normal(y.shape))
    (y * cot).sum().backward()
    got = _grads(layer, [x, mem])

    xr, mr = tg.tensor(x0, requires_grad=True), tg.tensor(m0, requires_grad=True)
    want_y = _decoder_reference(layer, xr, mr, causal, lambda z: tg.maximum(z, 0.0))
    np.testing.assert_allclose(y.numpy(), want_y.numpy(), rtol=1e-10, atol=1e-12)
    (want_y * cot).sum().backward()
    want = _grads(layer, [xr, mr])
    for name in got:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-9, atol=1e-11, err_msg=name)


def test_transformer_layers_pass_finite_differences_first_and_second_order():
    enc = tg.nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, activation="gelu")
    dec = tg.nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0, norm_first=True)
    _randomise(enc), _randomise(dec)
    x = tg.tensor(RNG.standard_normal((3, 2, 4)), requires_grad=True)
    m = tg.tensor(RNG.standard_normal((2, 2, 4)), requires_grad=True)
    assert tgt.gradcheck(lambda z: enc(z), (x,))
    assert tgt.gradcheck(lambda z, w: dec(z, w), (x, m))
    assert tgt.gradgradcheck(lambda z: enc(z), (x,))
    stack = tg.nn.TransformerEncoder(enc, 2, norm=tg.nn.LayerNorm(4))
    assert tgt.gradcheck(lambda z: stack(z), (x,))


def test_transformer_layers_keep_float32():
    enc = tg.nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, dtype=np.float32)
    x = tg.tensor(RNG.standard_normal((3, 2, 4)).astype(np.float32), requires_grad=True)
    y = enc(x)
    y.sum().backward()
    assert y.dtype == np.float32 and x.grad.dtype == np.float32
    assert all(p.grad.dtype == np.float32 for p in enc.parameters())


# --- nn functions the contract kit does not see (not registered ops) ----------------------

def _seeded(fn, seed=3):
    """fn with the random mask drawn afresh from one seed on every call, so that finite
    differences see one fixed mask."""
    def run(*args):
        tg.manual_seed(seed)
        return fn(*args)
    return run


@pytest.mark.parametrize("fn,shape,channel_axes", [
    (lambda x: F.dropout(x, 0.4), (4, 5), None),
    (lambda x: F.dropout1d(x, 0.4), (3, 4, 5), 2),
    (lambda x: F.dropout2d(x, 0.4), (3, 4, 2, 3), 2),
], ids=["dropout", "dropout1d", "dropout2d"])
def test_dropout_functions_gradient_is_the_scaled_mask_and_passes_finite_differences(
        fn, shape, channel_axes):
    f = _seeded(fn)
    x = tg.tensor(RNG.uniform(0.5, 1.5, shape), requires_grad=True)   # no zero entries
    y = f(x)
    kept = y.numpy() != 0
    if channel_axes is not None:              # whole channels are kept or dropped
        per_channel = kept.reshape(kept.shape[:channel_axes] + (-1,))
        assert (per_channel.all(-1) | ~per_channel.any(-1)).all()
    assert kept.any() and not kept.all()
    np.testing.assert_allclose(y.numpy(), np.where(kept, x.numpy() / 0.6, 0.0), rtol=1e-12)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.6, rtol=1e-12)
    x.grad = None
    assert tgt.gradcheck(f, (x,))
    assert tgt.gradgradcheck(lambda z: f(z) * f(z), (x,))
    x32 = tg.tensor(x.numpy().astype(np.float32), requires_grad=True)
    y32 = f(x32)
    y32.sum().backward()
    assert y32.dtype == np.float32 and x32.grad.dtype == np.float32


def test_dropout_functions_take_torchs_signature_and_refuse_inplace():
    for fn, x in ((F.dropout, tg.ones((2, 3))), (F.dropout1d, tg.ones((2, 3, 4))),
                  (F.dropout2d, tg.ones((2, 3, 4, 4)))):
        same = fn(input=x, p=0.5, training=False, inplace=False)     # eval: the identity
        np.testing.assert_array_equal(same.numpy(), x.numpy())
        with pytest.raises(ValueError, match=rf"{fn.__name__}: inplace=True is not supported"):
            fn(x, 0.5, True, True)


def test_bilinear_second_derivatives_and_float32():
    x1 = tg.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    x2 = tg.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    w = tg.tensor(RNG.standard_normal((5, 2, 4)), requires_grad=True)
    b = tg.tensor(RNG.standard_normal(5), requires_grad=True)
    want = np.einsum("ni,oij,nj->no", x1.numpy(), w.numpy(), x2.numpy()) + b.numpy()
    np.testing.assert_allclose(F.bilinear(x1, x2, w, b).numpy(), want, rtol=1e-12)
    assert tgt.gradgradcheck(lambda a, c, ww, bb: F.bilinear(a, c, ww, bb), (x1, x2, w, b))
    f32 = [tg.tensor(t.numpy().astype(np.float32), requires_grad=True) for t in (x1, x2, w, b)]
    y = F.bilinear(*f32)
    y.sum().backward()
    assert y.dtype == np.float32 and all(t.grad.dtype == np.float32 for t in f32)


def test_kl_div_loss_keeps_float32():
    x = tg.tensor(RNG.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    t = tg.tensor(RNG.uniform(0.1, 0.9, (3, 4)).astype(np.float32))
    for log_target in (False, True):
        y = F.kl_div(x, tg.log(t) if log_target else t, "batchmean", log_target)
        y.backward()
        assert y.dtype == np.float32 and x.grad.dtype == np.float32
        want = (t.numpy() * (np.log(t.numpy()) - x.numpy())).sum() / 3
        assert np.isclose(y.item(), want, rtol=1e-5)
        x.grad = None


def test_one_hot_equals_rows_of_the_identity_and_has_no_gradient():
    labels = np.array([[2, 0], [1, 3]])
    got = F.one_hot(tg.tensor(labels), 5)
    np.testing.assert_array_equal(got.numpy(), np.eye(5, dtype=np.int64)[labels])
    assert got.dtype == np.int64 and not got.requires_grad


# --- "Must show": shape errors name the layer, the expected and the received shapes -------

SHAPE_ERRORS = [
    (lambda: tg.nn.Conv2d(3, 16, 3), (2, 4, 8, 8),
     r"Conv2d\(3, 16, kernel_size=\(3, 3\)\): expected input with in_channels=3 but got "
     r"input of shape \(2, 4, 8, 8\) \(4 channels\)"),
    (lambda: tg.nn.Conv1d(3, 4, 3), (2, 5, 9), r"Conv1d\(3, 4.*in_channels=3.*\(2, 5, 9\)"),
    (lambda: tg.nn.Conv3d(2, 4, 3), (1, 3, 4, 4, 4), r"Conv3d\(2, 4.*in_channels=2.*3 channels"),
    (lambda: tg.nn.ConvTranspose2d(3, 4, 3), (2, 5, 9, 9),
     r"ConvTranspose2d\(3, 4.*in_channels=3.*\(2, 5, 9, 9\)"),
    (lambda: tg.nn.Linear(3, 2), (4, 5),
     r"^linear: x \(4, 5\) and weight \(2, 3\) do not fit: Linear\(in_features=3, "
     r"out_features=2, bias=True\) expects in_features=3 on the last axis of its input, "
     r"got 5$"),
    (lambda: tg.nn.Bilinear(3, 4, 2), [(2, 5), (2, 4)],
     r"Bilinear\(in1_features=3.*expected inputs \(\.\.\., 3\) and \(\.\.\., 4\), got "
     r"\(2, 5\) and \(2, 4\)"),
    (lambda: tg.nn.BatchNorm2d(16), (2, 8, 5, 5),
     r"BatchNorm2d\(16\): expected input with 16 channels \(axis 1\), got 8 channels in "
     r"shape \(2, 8, 5, 5\)"),
    (lambda: tg.nn.BatchNorm1d(3), (4, 5), r"BatchNorm1d\(3\).*3 channels.*\(4, 5\)"),
    (lambda: tg.nn.LayerNorm(4), (2, 5), r"LayerNorm\(\(4,\)\): expected input of shape "
                                         r"\(\*, 4\), got \(2, 5\)"),
    (lambda: tg.nn.RMSNorm(4), (2, 5), r"RMSNorm\(\(4,\)\).*\(\*, 4\), got \(2, 5\)"),
    (lambda: tg.nn.GroupNorm(2, 4), (2, 6, 3), r"GroupNorm\(2, 4\).*\(N, 4, \*\), got \(2, 6, 3\)"),
    (lambda: tg.nn.InstanceNorm1d(3), (2, 4, 5), r"InstanceNorm1d\(3\).*3 channels.*4 channels"),
    (lambda: tg.nn.PReLU(3), (2, 4, 5),
     r"PReLU\(num_parameters=3\): expected input with 3 channels \(axis 1\), got input of "
     r"shape \(2, 4, 5\)"),
    (lambda: tg.nn.LSTM(3, 4), (5, 2, 6),
     r"LSTM\(3, 4\): expected input with input_size=3 but got input of shape \(5, 2, 6\)"),
    (lambda: tg.nn.GRU(3, 4), (5, 2, 6), r"GRU\(3, 4\).*input_size=3.*\(5, 2, 6\)"),
    (lambda: tg.nn.RNNCell(3, 4), (2, 6), r"RNNCell\(3, 4\).*input_size=3.*\(2, 6\)"),
    (lambda: tg.nn.MultiheadAttention(8, 2), [(4, 2, 6)] * 3,
     r"MultiheadAttention\(embed_dim=8\): query must be .* got shape \(4, 2, 6\)"),
    (lambda: tg.nn.TransformerEncoderLayer(8, 2, 16), (4, 2, 6),
     r"TransformerEncoderLayer\(d_model=8, nhead=2\): src must be \(S, N, 8\).*got shape "
     r"\(4, 2, 6\)"),
    (lambda: tg.nn.TransformerDecoderLayer(8, 2, 16), [(4, 2, 8), (3, 2, 6)],
     r"TransformerDecoderLayer\(d_model=8, nhead=2\): memory must be .*got shape \(3, 2, 6\)"),
    (lambda: tg.nn.MaxPool2d(2), (2,), r"MaxPool2d\(kernel_size=2.*got input of shape \(2,\)"),
    (lambda: tg.nn.AdaptiveAvgPool2d(2), (2, 3),
     r"AdaptiveAvgPool2d\(output_size=2\).*got input of shape \(2, 3\)"),
    (lambda: tg.nn.PixelShuffle(2), (1, 3, 2, 2),
     r"PixelShuffle\(upscale_factor=2\).*divisible by .*4.*\(1, 3, 2, 2\)"),
    (lambda: tg.nn.Unflatten(1, (2, 3)), (2, 5),
     r"Unflatten: unflattened_size \(2, 3\) does not match dimension 1 \(size 5\)"),
    (lambda: tg.nn.Upsample(scale_factor=2, mode="bilinear"), (2, 3, 4),
     r"Upsample\(.*bilinear.*needs a 4-d input, got input of shape \(2, 3, 4\)"),
]


@pytest.mark.parametrize("make,shapes,message", SHAPE_ERRORS,
                         ids=[message.split("\\")[0] for _, _, message in SHAPE_ERRORS])
def test_a_wrongly_shaped_input_names_the_layer_and_both_shapes(make, shapes, message):
    layer = make()
    inputs = [tg.ones(s) for s in (shapes if isinstance(shapes, list) else [shapes])]
    with pytest.raises(ValueError, match=message):
        layer(*inputs)


def test_embedding_index_error_names_the_index_and_the_table():
    with pytest.raises(IndexError, match=r"index 7 is out of range for weight of shape "
                                         r"\(5, 3\) \(indices must be in \[0, 5\)\)"):
        tg.nn.Embedding(5, 3)(tg.tensor([[1, 7]]))


# --- constructor arguments bind as in torch.nn ------------------------------------------

A, B = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
P = RNG.uniform(0.1, 1.0, (3, 4))


def test_loss_modules_bind_positional_arguments_in_torchs_order():
    nn = tg.nn
    # torch.nn.HuberLoss(reduction='mean', delta=1.0): reduction comes first.
    huber = nn.HuberLoss("sum", 0.5)
    assert (huber.reduction, huber.delta) == ("sum", 0.5)
    np.testing.assert_allclose(huber(tg.tensor(A), tg.tensor(B)).numpy(),
                               tg.huber_loss(tg.tensor(A), tg.tensor(B), "sum", 0.5).numpy())
    # PoissonNLLLoss(log_input, full, size_average, eps, reduce, reduction)
    pois = nn.PoissonNLLLoss(False, True, None, 1e-3, None, "none")
    assert (pois.log_input, pois.full, pois.eps, pois.reduction) == (False, True, 1e-3, "none")
    # TripletMarginLoss(margin, p, eps, swap, size_average, reduce, reduction)
    trip = nn.TripletMarginLoss(0.5, 1.0, 1e-5, True, None, None, "sum")
    assert (trip.margin, trip.p, trip.eps, trip.swap, trip.reduction) == (0.5, 1.0, 1e-5,
                                                                            True, "sum")
    for cls in (nn.CosineEmbeddingLoss, nn.MarginRankingLoss, nn.HingeEmbeddingLoss):
        m = cls(0.25, None, None, "sum")                  # (margin, size_average, reduce,
        assert (m.margin, m.reduction) == (0.25, "sum")   #  reduction)
    assert nn.SmoothL1Loss(None, None, "sum", 0.3).beta == 0.3
    # A first positional that torch takes as the deprecated size_average is refused, not
    # read as beta (which would silently change the loss).
    with pytest.raises(TypeError, match="SmoothL1Loss: size_average="):
        nn.SmoothL1Loss(0.5)
    with pytest.raises(TypeError, match=r"GaussianNLLLoss\(\*, full=False.*too many "
                                        r"positional"):
        nn.GaussianNLLLoss(True)                          # keyword-only in torch
    with pytest.raises(TypeError, match="HuberLoss.*unexpected keyword argument 'beta'"):
        nn.HuberLoss(beta=1.0)


def test_bce_with_logits_loss_weights_equal_the_numpy_formula_and_pass_finite_differences():
    x0, t0 = RNG.standard_normal((4, 3)) * 30, RNG.uniform(0, 1, (4, 3))   # |x| up to ~90
    weight, pos_weight = RNG.uniform(0.5, 2.0, (4, 3)), np.array([1.0, 2.0, 0.5])
    softplus_neg = np.logaddexp(0.0, -x0)                                 # log(1 + e^-x)
    want = weight * ((1 - t0) * x0 + (1 + (pos_weight - 1) * t0) * softplus_neg)
    loss = tg.nn.BCEWithLogitsLoss(tg.tensor(weight), pos_weight=tg.tensor(pos_weight),
                                   reduction="none")
    assert list(loss.state_dict()) == ["weight", "pos_weight"]
    np.testing.assert_allclose(loss(tg.tensor(x0), tg.tensor(t0)).numpy(), want, rtol=1e-12)
    mean = tg.nn.BCEWithLogitsLoss(pos_weight=tg.tensor(pos_weight))
    np.testing.assert_allclose(
        mean(tg.tensor(x0), tg.tensor(t0)).item(),
        ((1 - t0) * x0 + (1 + (pos_weight - 1) * t0) * softplus_neg).mean(), rtol=1e-12)
    # Without weights: the fused op, and the same numbers as the composition with ones.
    plain = tg.nn.BCEWithLogitsLoss()(tg.tensor(x0), tg.tensor(t0)).item()
    ones = tg.nn.BCEWithLogitsLoss(pos_weight=tg.ones(3))(tg.tensor(x0), tg.tensor(t0)).item()
    assert np.isclose(plain, ones, rtol=1e-12)
    x = tg.tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    t = tg.tensor(t0, requires_grad=True)
    assert tgt.gradcheck(lambda a, b: loss(a, b), (x, t))
    assert tgt.gradgradcheck(lambda a, b: loss(a, b), (x, t))
    x32 = tg.tensor(x0.astype(np.float32), requires_grad=True)
    y32 = loss(x32, tg.tensor(t0.astype(np.float32)))
    y32.sum().backward()
    assert y32.dtype == np.float32 and x32.grad.dtype == np.float32
    with pytest.raises(ValueError, match=r"BCEWithLogitsLoss: target shape \(3,\) must "
                                         r"equal input shape \(4, 3\)"):
        loss(x, tg.zeros(3))
    with pytest.raises(TypeError, match="size_average"):
        tg.nn.BCEWithLogitsLoss(size_average=True)


def _adamw_numpy(p, grads, lr, betas, eps, weight_decay):
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        p = p * (1 - lr * weight_decay)
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        denom = np.sqrt(v) / np.sqrt(1 - betas[1] ** t) + eps
        p = p - lr / (1 - betas[0] ** t) * m / denom
    return p


def test_adam_decoupled_weight_decay_is_adamws_rule_and_round_trips(tmp_path):
    p0, grads = RNG.standard_normal(5), [RNG.standard_normal(5) for _ in range(6)]
    w = tg.tensor(p0, requires_grad=True)
    opt = tg.optim.Adam([w], lr=0.05, weight_decay=0.3, decoupled_weight_decay=True)
    for g in grads:
        w.grad = tg.tensor(g)
        opt.step()
    np.testing.assert_allclose(w.numpy(), _adamw_numpy(p0, grads, 0.05, (0.9, 0.999), 1e-8,
                                                       0.3), rtol=1e-12)
    assert opt.param_groups[0]["decoupled_weight_decay"] is True
    assert tg.optim.Adam([w]).param_groups[0]["decoupled_weight_decay"] is False
    assert tg.optim.AdamW([w]).param_groups[0]["decoupled_weight_decay"] is True
    # Per group, and through a file.
    u = tg.tensor(p0, requires_grad=True)
    two = tg.optim.Adam([{"params": [w]}, {"params": [u], "decoupled_weight_decay": True}],
                        lr=0.05, weight_decay=0.3)
    assert [g["decoupled_weight_decay"] for g in two.param_groups] == [False, True]
    tg.save(two.state_dict(), tmp_path / "adam.npz")
    again = tg.optim.Adam([w, u], lr=0.05)
    again.param_groups[0]["params"] = [w]
    again.add_param_group({"params": [u]})
    again.load_state_dict(tg.load(tmp_path / "adam.npz"))
    assert [g["decoupled_weight_decay"] for g in again.param_groups] == [False, True]
    # A state dict saved before the option existed loads; the groups keep their value
    # (what load_state_dict does for every key a saved group lacks).
    legacy = two.state_dict()
    for group in legacy["param_groups"]:
        del group["decoupled_weight_decay"]
    again.load_state_dict(legacy)
    assert [g["decoupled_weight_decay"] for g in again.param_groups] == [False, True]
    fresh = tg.optim.AdamW([w])
    legacy["param_groups"] = legacy["param_groups"][:1]
    legacy["state"] = {k: v for k, v in legacy["state"].items() if k in (0, "0")}
    fresh.load_state_dict(legacy)
    assert fresh.param_groups[0]["decoupled_weight_decay"] is True


# --- docs/nn.md's "PyTorch -> tapegrad" table -------------------------------------------

def test_the_docs_table_spellings_exist_and_the_missing_names_are_missing():
    import tapegrad.nn.functional as Fn
    present = [tg.manual_seed, tg.random.manual_seed, tg.random.get_state, tg.random.set_state,
               tg.random.rand, tg.random.randn, tg.random.rand_like, tg.random.randn_like,
               tg.random.randint_like, tg.random.randint, tg.random.permutation,
               tg.random.multinomial, tg.random.categorical, tg.random.bernoulli,
               tg.random.normal, tg.random.uniform, tg.concatenate, tg.save, tg.load,
               tg.data.TensorDataset, tg.data.DataLoader, tg.pad, Fn.interpolate,
               Fn.kl_div, tg.log_sigmoid, tg.logsigmoid, Fn.logsigmoid, Fn.one_hot,
               Fn.dropout, Fn.dropout1d, Fn.dropout2d, tg.nn.TransformerEncoder,
               tg.nn.TransformerDecoder, tg.nn.Module.register_buffer, tg.Tensor.register_hook,
               tg.nn.utils.clip_grad_norm_, tg.nn.init.normal_, tg.nn.init.xavier_uniform_,
               tg.optim.lr_scheduler.LambdaLR, tg.moveaxis]
    assert all(callable(f) for f in present)
    # (tg.checkpoint / checkpoint_sequential belong to tapegrad-checkpoint, not a
    # dependency of this distribution: docs/nn.md's own examples run them.)
    # The table's rows that map a torch spelling onto another tapegrad one, run.
    x = tg.random.randn(1, 2, 4, 4)
    y, idx = Fn.max_pool2d(x, 2, return_indices=True)
    assert idx.dtype == np.int64 and y.shape == idx.shape == (1, 2, 2, 2)
    padded = tg.pad(x, ((0, 0), (0, 0), (1, 2), (3, 4)), mode="edge")   # F.pad(x, (3, 4, 1, 2))
    assert padded.shape == (1, 2, 7, 11)
    np.testing.assert_allclose(tg.nn.Softmax(dim=-3)(x).numpy().sum(axis=1), 1.0)
    lin = tg.nn.Linear(2, 2).to(tg.float16)
    assert lin.weight.dtype == np.float16
    assert tg.random.categorical(tg.zeros((3, 4))).shape == (3, 1)
    w = tg.tensor([1.0], requires_grad=True)
    opt = tg.optim.SGD([w], lr=1.0)
    sched = tg.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e)   # MultiplicativeLR(0.5)
    for _ in range(3):
        opt.step(), sched.step()
    assert sched.get_last_lr() == [0.125]
    missing = {tg.nn: ["LazyLinear", "BatchNorm3d", "MaxPool3d", "AvgPool3d", "ConvTranspose3d",
                       "InstanceNorm3d", "Dropout3d", "AdaptiveMaxPool1d", "EmbeddingBag",
                       "CTCLoss", "MultiMarginLoss", "MultiLabelMarginLoss", "SoftMarginLoss",
                       "MultiLabelSoftMarginLoss", "TripletMarginWithDistanceLoss", "RReLU",
                       "Threshold", "Hardshrink", "Softshrink", "LocalResponseNorm",
                       "LPPool2d", "MaxUnpool2d", "FractionalMaxPool2d", "AlphaDropout",
                       "SyncBatchNorm", "Transformer", "ZeroPad2d", "ReflectionPad2d",
                       "Softmax2d", "UpsamplingBilinear2d", "UpsamplingNearest2d", "Buffer"],
               Fn: ["grid_sample", "affine_grid", "gumbel_softmax", "pdist", "pad",
                    "max_pool2d_with_indices", "upsample_bilinear", "upsample_nearest"],
               tg.optim: ["ASGD", "Rprop", "SparseAdam", "Adafactor", "swa_utils"],
               tg.optim.lr_scheduler: ["CyclicLR", "MultiplicativeLR"],
               tg.nn.utils: ["clip_grad_norm", "weight_norm", "spectral_norm"],
               tg.nn.init: ["normal", "xavier_uniform"]}
    present_now = [f"{ns.__name__}.{n}" for ns, names in missing.items() for n in names
                   if hasattr(ns, n)]
    assert present_now == [], f"now exists: update docs/nn.md's table ({present_now})"
    for kw in ("maximize", "foreach", "fused", "differentiable"):
        with pytest.raises(TypeError):
            tg.optim.Adam([w], **{kw: False})
