"""vmap batching rules of tapegrad-nn's ops: which ops have one (a lost rule shows), and
for the hot ones (a small MLP with cross-entropy: linear, activations, softmax,
log_softmax, cross_entropy) vmap with other in/out axes, nested vmap and per-example
gradients against a Python loop.

tg.vmap lives in tapegrad-higher, which is not a test dependency of this plugin:
tapegrad.testing.vmap_call opens batch levels with tapegrad._batching directly (as the
contract kit does)."""

import functools
import itertools

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _batching, _engine
from tapegrad._engine import run_backward
from tapegrad.testing import assert_same, batching_fallbacks, grad_of, loop_call, vmap_call

WITH_RULES = {
    "linear", "softmax", "log_softmax", "_logsumexp", "cross_entropy",
    "_softmax_minus_one_hot", "_minus_one_hot", "_softmax_backward", "_log_softmax_backward",
    "binary_cross_entropy_with_logits",
    "gelu", "_gelu_backward", "silu", "softplus", "silu_backward", "softplus_backward",
    "logsigmoid", "_normal_cdf",
    "_conv", "_conv_transpose", "_conv_weight",
    "_unfold", "_fold", "_max_pool_indices", "_adaptive_max_pool_indices", "_pool_gather",
    "_pool_scatter",
    "_standardize", "_rms_scale", "_standardize_grad", "_rms_scale_grad",
    "_standardize_backward", "_rms_scale_backward", "_batch_moments", "_channel_affine",
    "_channel_dot", "_channel_sum",
    "_gru_sequence", "_gru_sequence_backward", "_lstm_sequence", "_lstm_sequence_backward",
}


@pytest.fixture(autouse=True)
def fallbacks_allowed():
    """An op of WITH_RULES that went through the loop fallback (one call per example)
    fails the test, unless the test adds its name to this fixture's set (a rule that
    falls back on purpose). Other plugins' ops may still fall back."""
    allowed = set()
    with batching_fallbacks() as fell_back:
        yield allowed
    assert not (set(fell_back) & WITH_RULES) - allowed, sorted((set(fell_back) & WITH_RULES)
                                                               - allowed)


def rand(*shape, seed=0):
    return np.random.default_rng(seed + 31 * len(shape) + sum(shape)).standard_normal(shape)


# NOTE: not the last few ulps: the rules compute by other formulas than NumPy's loop
close = functools.partial(assert_same, rtol=1e-10, atol=1e-12)


B = 4


def test_ops_with_batching_rules():
    table = _engine.ops_table()
    have = {n for n, op in table.items() if op.plugin == "tapegrad-nn" and op.batch is not None}
    assert WITH_RULES <= have, sorted(WITH_RULES - have)


# ---------------------------------------------------------------------------------------
# linear
# ---------------------------------------------------------------------------------------

LINEAR_SHAPES = [((3,), (5, 3), (5,)), ((4, 3), (5, 3), (5,)), ((2, 4, 3), (5, 3), (5,)),
                 ((4, 3), (5, 3), None), ((3,), (5, 3), None), ((4, 3), (5, 3), (2, 1, 5))]
LINEAR_CASES = [(xs, ws, bs, which) for xs, ws, bs in LINEAR_SHAPES
                for which in itertools.product((0, None), repeat=2 if bs is None else 3)
                if 0 in which]


@pytest.mark.parametrize("xs,ws,bs,which", LINEAR_CASES)
def test_linear_vmap_equals_loop(xs, ws, bs, which):
    shapes = (xs, ws) if bs is None else (xs, ws, bs)
    args = [rand(*((B,) if ax == 0 else ()), *s, seed=k)
            for k, (s, ax) in enumerate(zip(shapes, which))]

    def ref(x, w, b=None):
        out = x @ w.T
        return out if b is None else out + b

    close(vmap_call(tg.linear, which)(*args), loop_call(ref, which)(*args))


def test_linear_other_axes_and_nested():
    # the examples along axis 1 of x, a nested map along axis 0 of x and of the bias
    x = rand(2, B, 3)
    w, b = rand(5, 3, seed=1), rand(2, 5, seed=2)
    ref = loop_call(loop_call(lambda x, w, b: x @ w.T + b, (0, None, 0)), (1, None, None),
                    out_axes=2)
    got = vmap_call(vmap_call(tg.linear, (0, None, 0)), (1, None, None), out_axes=2)(x, w, b)
    close(got, ref(x, w, b))


def test_linear_under_vmap_refuses_bad_shapes():
    with pytest.raises(ValueError, match="weight must be"):
        vmap_call(tg.linear, (0, None))(rand(B, 4), rand(5, 3))
    with pytest.raises(ValueError, match="weight must be"):
        vmap_call(tg.linear, (None, 0))(rand(4), rand(B, 5, 3))


# ---------------------------------------------------------------------------------------
# activations, softmax, log_softmax, logsumexp
# ---------------------------------------------------------------------------------------

def _np_softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0, (0, 2), None])
@pytest.mark.parametrize("in_axis", [0, 2])
def test_softmax_and_log_softmax(axis, in_axis):
    x = rand(2, 3, B) if in_axis == 2 else rand(B, 2, 3, seed=1)
    x = x.reshape((2, 3, B, 1) if in_axis == 2 else (B, 2, 3, 1))
    close(vmap_call(lambda v: tg.softmax(v, axis), (in_axis,), out_axes=1)(x),
          loop_call(lambda v: _np_softmax(v, axis), (in_axis,), out_axes=1)(x))
    close(vmap_call(lambda v: tg.log_softmax(v, axis=axis), (in_axis,))(x),
          loop_call(lambda v: np.log(_np_softmax(v, axis)), (in_axis,))(x))


def test_logsumexp_nested():
    x = rand(2, B, 3, 5)
    ref = loop_call(loop_call(lambda v: np.log(np.sum(np.exp(v), axis=-1)), (0,)), (0,))
    close(vmap_call(vmap_call(lambda v: tg.logsumexp(v, axis=-1), (0,)), (0,))(x), ref(x))


@pytest.mark.parametrize("name,ref", [
    ("gelu", lambda v: 0.5 * v * (1 + np.vectorize(__import__("math").erf)(v / np.sqrt(2)))),
    ("silu", lambda v: v / (1 + np.exp(-v))),
    ("softplus", lambda v: np.log1p(np.exp(v))),
    ("logsigmoid", lambda v: -np.log1p(np.exp(-v)))])
def test_activations_other_axis(name, ref):
    x = rand(3, B)
    close(vmap_call(getattr(tg, name), (1,), out_axes=1)(x), loop_call(ref, (1,), out_axes=1)(x))


# ---------------------------------------------------------------------------------------
# cross_entropy: per-example logits (C,) with a () target, as PyTorch allows
# ---------------------------------------------------------------------------------------

def _np_cross_entropy(x, t, reduction="mean", ignore_index=-100):
    lsm = np.log(_np_softmax(x, -1))
    if t.dtype.kind == "f":
        loss = -np.sum(t * lsm, -1)
        kept = np.ones(loss.shape)
    else:
        kept = (t != ignore_index).astype(float)
        safe = np.where(t == ignore_index, 0, t)
        loss = -np.take_along_axis(lsm, safe[..., None], -1)[..., 0] * kept
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.sum(loss)
    with np.errstate(invalid="ignore"):
        return np.sum(loss) / np.sum(kept)


@pytest.mark.parametrize("rows", [(), (3,), (2, 3)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("which", [(0, 0), (0, None), (None, 0)])
def test_cross_entropy_labels(rows, reduction, which):
    C = 5
    x = rand(*((B,) if which[0] == 0 else ()), *rows, C)
    labels = np.random.default_rng(3).integers(0, C, ((B,) if which[1] == 0 else ()) + rows)
    if which[1] == 0 and rows:
        labels[1].flat[0] = -100        # an ignored row in one example only
    got = vmap_call(lambda a, t: tg.cross_entropy(a, t, reduction=reduction), which)(x, labels)
    close(got, loop_call(lambda a, t: _np_cross_entropy(a, t, reduction), which)(x, labels))


def test_cross_entropy_every_row_ignored_is_nan_in_that_example_only():
    x, t = rand(B, 3, 4), np.array([[0, 1, 2], [-100, -100, -100], [3, 3, 0], [1, -100, 2]])
    got = vmap_call(tg.cross_entropy, (0, 0))(x, t).numpy()
    want = loop_call(_np_cross_entropy, (0, 0))(x, t)
    assert np.isnan(got[1]) and np.isnan(want[1])
    close(got[[0, 2, 3]], want[[0, 2, 3]])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probabilities_and_ignore_index(reduction):
    x, p = rand(B, 3, 4), _np_softmax(rand(B, 3, 4, seed=1), -1)
    close(vmap_call(lambda a, t: tg.cross_entropy(a, t, reduction=reduction), (0, 0))(x, p),
          loop_call(lambda a, t: _np_cross_entropy(a, t, reduction), (0, 0))(x, p))
    t = np.array([[0, 1, 2], [1, 1, 1], [3, 1, 0], [1, 2, 2]])
    f = vmap_call(lambda a, t: tg.cross_entropy(a, t, reduction=reduction, ignore_index=1), (0, 0))
    close(f(x, t), loop_call(lambda a, t: _np_cross_entropy(a, t, reduction, 1), (0, 0))(x, t))


@pytest.mark.parametrize("rows", [(), (3,)])
def test_cross_entropy_weighted_mean(rows):
    # PyTorch's weighted mean: the sum of w[label] * loss over the kept rows, divided by
    # the sum of w[label] over the kept rows, per example
    w = np.array([0.5, 1.0, 2.0, 3.0])
    x = rand(B, *rows, 4)
    t = np.random.default_rng(4).integers(0, 4, (B,) + rows)
    t.flat[1] = -100

    def ref(a, t):
        lsm = np.log(_np_softmax(a, -1))
        kept = t != -100
        safe = np.where(kept, t, 0)
        picked = np.take_along_axis(lsm, safe[..., None], -1)[..., 0]
        with np.errstate(invalid="ignore"):
            return np.sum(-picked * w[safe] * kept) / np.sum(w[safe] * kept)

    got = vmap_call(lambda a, t: tg.cross_entropy(a, t, weight=w), (0, 0))(x, t)
    want = loop_call(ref, (0, 0))(x, t)
    assert np.isnan(want).sum() == (1 if rows == () else 0)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, equal_nan=True)


def test_cross_entropy_refuses_a_wrong_target_shape():
    with pytest.raises(ValueError, match="integer class labels must have"):
        vmap_call(tg.cross_entropy, (0, None))(rand(B, 3, 4), np.zeros(4, np.int64))


# ---------------------------------------------------------------------------------------
# a small MLP: per-example gradients (vmap of reverse mode) against per-example backward
# ---------------------------------------------------------------------------------------

def _mlp_loss(params, x, t, act):
    w1, b1, w2, b2 = params
    h = getattr(tg, act)(tg.linear(x, w1, b1))
    return tg.cross_entropy(tg.linear(h, w2, b2), t)


@pytest.mark.parametrize("act", ["relu", "gelu", "tanh", "silu"])
@pytest.mark.parametrize("rows", [(), (3,)])
def test_mlp_per_example_gradients(act, rows):
    rng = np.random.default_rng(5)
    params = [rand(6, 4), rand(6, seed=1), rand(3, 6, seed=2), rand(3, seed=3)]
    x, t = rand(B, *rows, 4, seed=4), rng.integers(0, 3, (B,) + rows)

    def per_example_grads(xi, ti):
        ps = [tg.tensor(p, requires_grad=True) for p in params]
        return grad_of(_mlp_loss(ps, xi, ti, act), tuple(ps))
    got = [g.numpy() for g in vmap_call(per_example_grads)(x, t)]
    for i in range(B):
        ps = [tg.tensor(p, requires_grad=True) for p in params]
        _mlp_loss(ps, tg.tensor(x[i]), tg.tensor(t[i]), act).backward()
        for g, p in zip(got, ps):
            np.testing.assert_allclose(g[i], p.grad.numpy(), rtol=1e-10, atol=1e-12)


# cross_entropy's VJP and JVP with labels batched under vmap: they cannot read the labels'
# values (one per example), so they take a tensor-op path; checked against per-example
# calls of the rules with plain labels (the path the contract kit checks against finite
# differences).
CE_PARAMS = [dict(), dict(reduction="sum"), dict(reduction="none"),
             dict(weight=np.array([0.5, 1.0, 2.0, 3.0])),
             dict(weight=np.array([0.5, 1.0, 2.0, 3.0]), reduction="none"),
             dict(label_smoothing=0.2), dict(label_smoothing=0.1, reduction="sum",
                                             weight=np.array([0.5, 1.0, 2.0, 3.0])),
             dict(ignore_index=2)]
CE_LABELS = np.array([[0, 1, -100], [3, 3, 0], [2, -100, 2], [1, 2, 3]])


def _ce_labels(params):
    # -100 is an invalid label when another class is ignored
    return CE_LABELS if params.get("ignore_index", -100) == -100 else np.where(
        CE_LABELS < 0, 1, CE_LABELS)


@pytest.mark.parametrize("params", CE_PARAMS)
def test_cross_entropy_per_example_gradient_batched_labels(params):
    x, labels = rand(B, 3, 4), _ce_labels(params)
    level = _batching.enter(B)
    try:
        xl = _batching.wrap(tg.tensor(x), level).requires_grad_(True)
        loss = tg.cross_entropy(xl, _batching.wrap(tg.tensor(labels), level), **params)
        seed = _batching.wrap(tg.tensor(rand(B, *loss.shape, seed=1)), level)
        (gx,) = run_backward((loss,), (seed,), None, False, (xl,), True)
        got_loss = _batching.physical(loss, level)[0].numpy()
    finally:
        _batching.exit(level)
    got = _batching.physical(gx, level)[0].numpy()
    for i in range(B):
        xi = tg.tensor(x[i], requires_grad=True)
        li = tg.cross_entropy(xi, tg.tensor(labels[i]), **params)
        np.testing.assert_allclose(got_loss[i], li.numpy(), rtol=1e-12, equal_nan=True)
        li.backward(tg.tensor(rand(B, *li.shape, seed=1)[i]))
        np.testing.assert_allclose(got[i], xi.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("params", CE_PARAMS)
def test_cross_entropy_jvp_rule_batched_labels(params):
    op = _engine.ops_table()["cross_entropy"]
    x, tx, labels = rand(B, 3, 4), rand(B, 3, 4, seed=2), _ce_labels(params)
    level = _batching.enter(B)
    try:
        xl, txl = (_batching.wrap(tg.tensor(v), level) for v in (x, tx))
        tl = _batching.wrap(tg.tensor(labels), level)
        ans = tg.cross_entropy(xl, tl, **params)
        jv = op.jvp((txl, None), ans, xl, tl, **params)
    finally:
        _batching.exit(level)
    got = _batching.physical(jv, level)[0].numpy()
    for i in range(B):
        xi, ti = tg.tensor(x[i]), tg.tensor(labels[i])
        want = op.jvp((tg.tensor(tx[i]), None), tg.cross_entropy(xi, ti, **params), xi, ti,
                      **params)
        np.testing.assert_allclose(got[i], want.numpy(), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------
# convolutions, pooling, normalisation, recurrences: against the ops called per example
# (the unbatched kernels, which their own tests check against PyTorch and finite
# differences)
# ---------------------------------------------------------------------------------------

F = tg.nn.functional


def _per_example(f, args, in_axes):
    return loop_call(lambda *a: f(*[tg.tensor(v) if isinstance(v, np.ndarray) else v for v in a]),
                     in_axes)(*args)


@pytest.mark.parametrize("which", [(0, None), (None, 0), (0, 0)])
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, groups=2),
                                dict(dilation=2, padding=(1, 0))])
def test_conv2d_vmap_equals_loop(which, kw):
    x = rand(*((B,) if which[0] == 0 else ()), 2, 4, 7, 6)
    w = rand(*((B,) if which[1] == 0 else ()), 6, 4 // kw.get("groups", 1), 3, 2, seed=1)
    f = lambda a, b: F.conv2d(a, b, **kw)     # noqa: E731
    close(vmap_call(f, which)(x, w), _per_example(f, (x, w), which))


@pytest.mark.parametrize("which", [(0, None), (None, 0), (0, 0)])
def test_conv_transpose1d_vmap_equals_loop(which):
    x = rand(*((B,) if which[0] == 0 else ()), 2, 4, 5)
    w = rand(*((B,) if which[1] == 0 else ()), 4, 3, 3, seed=1)
    f = lambda a, b: F.conv_transpose1d(a, b, stride=2, output_padding=1)    # noqa: E731
    close(vmap_call(f, which)(x, w), _per_example(f, (x, w), which))


@pytest.mark.parametrize("pool", [
    lambda v: F.max_pool2d(v, 2), lambda v: F.max_pool2d(v, 3, stride=1, padding=1),
    lambda v: F.avg_pool2d(v, 2), lambda v: F.adaptive_max_pool2d(v, (2, 3)),
    lambda v: F.max_pool1d(v[:, :, 0], 2)])
def test_pooling_vmap_equals_loop(pool):
    x = rand(2, 3, B, 6, 6).transpose(2, 0, 1, 3, 4)
    close(vmap_call(pool, (0,))(x), _per_example(pool, (x,), (0,)))


@pytest.mark.parametrize("norm", [
    lambda v: F.layer_norm(v, (6,)), lambda v: F.layer_norm(v, (3, 6)),
    lambda v: F.rms_norm(v, (6,)), lambda v: F.group_norm(v, 1),
    lambda v: F.batch_norm(v, None, None, training=True),
    lambda v: F.instance_norm(v), lambda v: F.normalize(v, dim=-1)])
def test_normalisation_vmap_equals_loop(norm):
    x = rand(B, 2, 3, 6)
    close(vmap_call(norm, (0,))(x), _per_example(norm, (x,), (0,)))


def test_affine_group_norm_with_per_example_weights():
    x, w, b = rand(B, 2, 4, 5), rand(B, 4, seed=1), rand(4, seed=2)
    f = lambda v, w, b: F.group_norm(v, 2, w, b)       # noqa: E731
    close(vmap_call(f, (0, 0, None))(x, w, b), _per_example(f, (x, w, b), (0, 0, None)))
    close(vmap_call(f, (None, 0, None))(x[0], w, b), _per_example(f, (x[0], w, b), (None, 0, None)))


@pytest.mark.parametrize("name,states", [("_lstm_sequence", 2), ("_gru_sequence", 1)])
@pytest.mark.parametrize("reverse", [False, True])
def test_recurrences_vmap_equals_loop(name, states, reverse):
    T, N, H = 3, 2, 4
    gates = 4 if name == "_lstm_sequence" else 3
    xw = rand(B, T, N, gates * H)
    h = [rand(B, N, H, seed=1 + k) for k in range(states)]
    w = [rand(gates * H, H, seed=5) * 0.5] + ([rand(H, seed=6)] if gates == 3 else [])
    in_axes = (0,) + (0,) * states + (None,) * len(w)
    f = lambda *a: getattr(tg, name)(*a, reverse=reverse)    # noqa: E731
    close(vmap_call(f, in_axes)(xw, *h, *w), _per_example(f, (xw, *h, *w), in_axes))
    # a state shared by every example
    in_axes = (0, None) + (0,) * (states - 1) + (None,) * len(w)
    h[0] = h[0][0]
    close(vmap_call(f, in_axes)(xw, *h, *w), _per_example(f, (xw, *h, *w), in_axes))


@pytest.mark.filterwarnings("ignore::tapegrad._batching.BatchingFallbackWarning")
def test_recurrence_with_per_example_weights_loops_exactly(fallbacks_allowed):
    fallbacks_allowed.add("_gru_sequence")
    xw, h0, w, b = rand(3, 2, 12), rand(2, 4, seed=1), rand(B, 12, 4, seed=2), rand(4, seed=3)
    close(vmap_call(tg._gru_sequence, (None, None, 0, None))(xw, h0, w, b),
          _per_example(tg._gru_sequence, (xw, h0, w, b), (None, None, 0, None)))


def _convnet_loss(params, x, t):
    w1, b1, w2, b2, gamma, beta = params
    h = tg.relu(F.conv2d(x, w1, b1, padding=1))              # (N, 4, 6, 6)
    h = F.max_pool2d(F.group_norm(h, 2, gamma, beta), 2)      # (N, 4, 3, 3)
    return tg.cross_entropy(tg.linear(tg.reshape(h, (h.shape[0], 36)), w2, b2), t)


def test_convnet_per_example_gradients():
    rng = np.random.default_rng(9)
    params = [rand(4, 2, 3, 3), rand(4, seed=1), rand(3, 36, seed=2) * 0.2, rand(3, seed=3),
              1.0 + 0.1 * rand(4, seed=4), rand(4, seed=5)]
    x, t = rand(B, 2, 2, 6, 6, seed=6), rng.integers(0, 3, (B, 2))

    def per_example_grads(xi, ti):
        ps = [tg.tensor(p, requires_grad=True) for p in params]
        return grad_of(_convnet_loss(ps, xi, ti), tuple(ps))
    got = [g.numpy() for g in vmap_call(per_example_grads)(x, t)]
    for i in range(B):
        ps = [tg.tensor(p, requires_grad=True) for p in params]
        _convnet_loss(ps, tg.tensor(x[i]), tg.tensor(t[i])).backward()
        for g, p in zip(got, ps):
            np.testing.assert_allclose(g[i], p.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_lstm_module_per_example_gradients():
    tg.manual_seed(0)
    lstm = tg.nn.LSTM(3, 4)
    params = list(lstm.parameters())
    x = rand(B, 5, 2, 3)                                      # per example (T, N, F)

    def per_example_grads(xi):
        out, _ = lstm(xi)
        return grad_of(tg.sum(out ** 2), tuple(params))
    got = [g.numpy() for g in vmap_call(per_example_grads)(x)]
    for i in range(B):
        lstm.zero_grad()
        out, _ = lstm(tg.tensor(x[i]))
        tg.sum(out ** 2).backward()
        for g, p in zip(got, params):
            np.testing.assert_allclose(g[i], p.grad.numpy(), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------------------------
# embedding with per-example indices: its index check runs per example inside vmap
# ---------------------------------------------------------------------------------------

def test_embedding_batched_indices():
    w = rand(5, 3)
    idx = np.array([[0, 4, 4], [2, 1, 0], [3, 3, 3], [1, 0, 2]])
    f = lambda i, w: F.embedding(i, w, padding_idx=0)     # noqa: E731
    close(vmap_call(f, (0, None))(idx, w), loop_call(lambda i, w: w[i], (0, None))(idx, w))


def test_embedding_batched_indices_out_of_range_raises():
    w = rand(5, 3)
    for bad in (5, -1):          # (np.take would wrap -1 silently)
        idx = np.array([[0, 4], [2, bad], [3, 3], [1, 0]])
        with pytest.raises(IndexError, match=f"index {bad} is out of range"):
            vmap_call(F.embedding, (0, None))(idx, w)


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention(causal):
    q, k, v = rand(B, 2, 5, 8), rand(B, 2, 6, 8, seed=1), rand(B, 2, 6, 4, seed=2)
    f = lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal)   # noqa: E731
    close(vmap_call(f, (0, 0, 0))(q, k, v), _per_example(f, (q, k, v), (0, 0, 0)))
    shared = (None, None)
    close(vmap_call(f, (0,) + shared)(q, k[0], v[0]),
          _per_example(f, (q, k[0], v[0]), (0,) + shared))


def test_multihead_attention_module():
    tg.manual_seed(1)
    mha = tg.nn.MultiheadAttention(8, 2)
    x = rand(B, 5, 1, 8)
    f = lambda t: mha(t, t, t)[0]        # noqa: E731
    close(vmap_call(f, (0,))(x), _per_example(f, (x,), (0,)))


# ---------------------------------------------------------------------------------------
# the losses composed of ops that read label / probability values: per example in vmap
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("params", [dict(), dict(reduction="sum"), dict(reduction="none"),
                                    dict(weight=np.array([0.5, 1.0, 2.0, 3.0])),
                                    dict(ignore_index=2, reduction="none")])
@pytest.mark.parametrize("rows", [(), (3,)])
def test_nll_loss_of_log_softmax_batched_labels(params, rows):
    x = rand(B, *rows, 4)
    t = np.random.default_rng(8).integers(0, 4, (B,) + rows)
    t.flat[2] = params.get("ignore_index", -100)
    f = lambda a, t: tg.nll_loss(tg.log_softmax(a), t, **params)       # noqa: E731
    ref = lambda a, t: tg.cross_entropy(a, t, **params)                # noqa: E731
    got = vmap_call(f, (0, 0))(x, t).numpy()
    want = _per_example(ref, (x, t), (0, 0))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, equal_nan=True)
    # and the per-example gradients
    def per_example_grad(xl, tl):
        xl = xl.requires_grad_(True)
        return grad_of(tg.sum(f(xl, tl)), xl)
    gx = vmap_call(per_example_grad)(x, t).numpy()
    for i in range(B):
        xi = tg.tensor(x[i], requires_grad=True)
        tg.sum(ref(xi, tg.tensor(t[i]))).backward()
        np.testing.assert_allclose(gx[i], xi.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_nll_loss_batched_label_out_of_range_raises():
    t = np.array([0, 1, 4, 2])                     # example 2's label is out of range
    with pytest.raises(IndexError, match="class label 4 is out of range"):
        vmap_call(lambda a, t: tg.nll_loss(a, t), (0, 0))(rand(B, 4), t)


def test_binary_cross_entropy_and_gaussian_nll_check_each_example():
    p = 1 / (1 + np.exp(-rand(B, 3)))
    t = np.random.default_rng(2).uniform(0, 1, (B, 3))
    close(vmap_call(tg.binary_cross_entropy, (0, 0))(p, t),
          _per_example(tg.binary_cross_entropy, (p, t), (0, 0)))
    p[3, 1] = 1.5
    with pytest.raises(ValueError, match="probability in"):
        vmap_call(tg.binary_cross_entropy, (0, 0))(p, t)
    x, v = rand(B, 3), np.abs(rand(B, 3, seed=1)) + 0.1
    f = lambda a, b, c: tg.gaussian_nll_loss(a, b, c)      # noqa: E731
    close(vmap_call(f, (0, None, 0))(x, t[0], v), _per_example(f, (x, t[0], v), (0, None, 0)))
    v[1, 2] = -0.5
    with pytest.raises(ValueError, match="negative entries"):
        vmap_call(f, (0, None, 0))(x, t[0], v)


# ---------------------------------------------------------------------------------------
# against PyTorch: per-example gradients with torch.func.vmap(torch.func.grad(...))
# ---------------------------------------------------------------------------------------

@pytest.mark.needs_torch
@pytest.mark.parametrize("rows", [(), (3,)])
def test_per_example_gradients_against_torch_func(rows):
    import torch
    import torch.func
    rng = np.random.default_rng(11)
    params = [rand(6, 4), rand(6, seed=1), rand(3, 6, seed=2), rand(3, seed=3)]
    x, t = rand(B, *rows, 4, seed=4), rng.integers(0, 3, (B,) + rows)
    t.flat[1] = -100

    def torch_loss(ps, xi, ti):
        h = torch.nn.functional.gelu(torch.nn.functional.linear(xi, ps[0], ps[1]))
        logits = torch.nn.functional.linear(h, ps[2], ps[3])
        # (torch's class axis is 1 for batched rows: move tapegrad's last axis there)
        if logits.ndim > 1:
            logits = logits.movedim(-1, 1)
        return torch.nn.functional.cross_entropy(logits, ti)

    want = torch.func.vmap(torch.func.grad(torch_loss), in_dims=(None, 0, 0))(
        [torch.tensor(p) for p in params], torch.tensor(x), torch.tensor(t))

    def per_example_grads(xi, ti):
        ps = [tg.tensor(p, requires_grad=True) for p in params]
        return grad_of(_mlp_loss(ps, xi, ti, "gelu"), tuple(ps))
    for g, w in zip(vmap_call(per_example_grads)(x, t), want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-9, atol=1e-12, equal_nan=True)


def test_one_hot_batched_indices():
    idx = np.array([[0, 3], [2, 2], [1, 0], [3, 1]])
    close(vmap_call(lambda i: F.one_hot(i, num_classes=4), (0,))(idx),
          np.eye(4, dtype=np.int64)[idx])
    with pytest.raises(IndexError, match="class values must be in"):
        vmap_call(lambda i: F.one_hot(i, num_classes=3), (0,))(idx)
    with pytest.raises(RuntimeError, match="vmap"):        # the class count from the values
        vmap_call(lambda i: F.one_hot(i), (0,))(idx)
