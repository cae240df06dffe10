"""Forward-mode (JVP) rules of tapegrad-nn's ops (issue 17).

Every op of the plugin with a VJP has a JVP rule, and the contract kit checks each one
against finite differences and against its VJP (transpose); the kit gives every input a
tangent at once, so the tests below also push ONE input's tangent at a time (the None
paths of each rule) and check it against central finite differences in float64, an
independent reference. A few hand tests cover boundaries the samples do not (-inf
logits, softplus at its threshold, ignored labels, float32).
"""

import numpy as np
import pytest
import tapegrad as tg
import tapegrad.testing as tt
from tapegrad import _engine

PLUGIN = "tapegrad-nn"

# Ops of the plugin with a VJP but no JVP rule, with the reason (the engine falls back
# to an exact double VJP for them). Empty: every differentiable op has one.
NO_JVP_RULE = {}


def _ops():
    return {n: op for n, op in _engine.ops_table().items() if op.plugin == PLUGIN}


DIFFERENTIABLE = sorted(n for n, op in _ops().items() if op.vjp is not None)


def test_the_plugin_has_differentiable_ops():
    # (guards the parametrisations below against an empty list)
    assert len(DIFFERENTIABLE) >= 30


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_every_op_with_a_vjp_has_a_jvp_rule(name):
    op = _ops()[name]
    if name in NO_JVP_RULE:
        assert op.jvp is None, f"{name} has a rule now: take it off NO_JVP_RULE"
    else:
        assert op.jvp is not None, f"{name} has a VJP but no JVP rule"


@pytest.mark.parametrize("name", sorted(set(DIFFERENTIABLE) - set(NO_JVP_RULE)))
def test_contract_kit_checks_the_jvp_rule(name, contract_reports):
    checks = contract_reports[name].checks
    n_samples = len(_ops()[name].samples)
    assert checks.count("float64 JVP rule vs finite differences") == n_samples
    assert checks.count("JVP rule is the transpose of the VJP rule") == n_samples
    assert "float64 JVP rule differentiable (reverse over forward)" in checks


# ---------------------------------------------------------------------------------------
# One tangent at a time, against finite differences
# ---------------------------------------------------------------------------------------

def _float_positions(op, args):
    return [i for i, a in enumerate(args)
            if isinstance(a, np.ndarray) and a.dtype.kind == "f" and op.is_differentiable(i)]


def _as_tensors(args, dtype=np.float64):
    return [tg.asarray(a.astype(dtype) if a.dtype.kind == "f" else a)
            if isinstance(a, np.ndarray) else a for a in args]


def _one_input_cases():
    cases = []
    for name in sorted(set(DIFFERENTIABLE) - set(NO_JVP_RULE)):
        op = _ops()[name]
        for k, sample in enumerate(op.samples):
            positions = _float_positions(op, sample.args)
            if len(positions) < 2:
                continue            # one input: the kit's check is this one already
            for i in positions:
                cases.append(pytest.param(name, k, i, id=f"{name}-s{k}-in{i}"))
    return cases


def _central_difference(op, args, kwargs, i, v, eps=1e-6):
    # (for the masked logits below, compared entry by entry; the rest use _check_jvp)
    def at(step):
        moved = list(args)
        moved[i] = args[i] + step * v
        with tg.no_grad():
            return op(*_as_tensors(moved), **kwargs).numpy()
    return (at(eps) - at(-eps)) / (2 * eps)


def _check_jvp(op, args, tangents, rtol, atol, **kwargs):
    """The op's tangent in forward mode (tg.jvp's path: the engine calls the rule) against
    central differences along the tangents (None: that input does not move)."""
    return tt.check_jvp(lambda *xs: op(*xs, **kwargs), _as_tensors(args), tangents,
                        rtol=rtol, atol=atol)


@pytest.mark.parametrize("name, k, i", _one_input_cases())
def test_jvp_rule_with_one_input_tangent_matches_finite_differences(name, k, i):
    op = _ops()[name]
    sample = op.samples[k]
    args = [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
            else a for a in sample.args]
    tangents = [None] * len(args)
    tangents[i] = np.random.default_rng(10 * k + i).standard_normal(args[i].shape)
    _check_jvp(op, args, tangents, rtol=1e-4, atol=1e-6, **sample.kwargs)


@pytest.mark.parametrize("name", sorted(set(DIFFERENTIABLE) - set(NO_JVP_RULE)))
def test_jvp_rule_keeps_float32(name):
    op = _ops()[name]
    sample = op.samples[0]
    xs = _as_tensors(list(sample.args), np.float32)
    positions = _float_positions(op, sample.args)
    rng = np.random.default_rng(3)
    tangents = [tg.asarray(rng.standard_normal(xs[j].shape).astype(np.float32))
                if j in positions else None for j in range(len(xs))]
    with tg.no_grad():
        ans = op(*xs, **sample.kwargs)
        got = op.jvp(tuple(tangents), ans, *xs, **sample.kwargs)
    assert ans.dtype == np.float32
    assert got.dtype == np.float32, f"{name}: the tangent of a float32 op is {got.dtype}"


# ---------------------------------------------------------------------------------------
# Boundaries
# ---------------------------------------------------------------------------------------

def _jvp(name, tangents, *args, **kwargs):
    op = _ops()[name]
    xs = _as_tensors(list(args))
    ts = tuple(None if v is None else tg.asarray(v) for v in tangents)
    with tg.no_grad():
        ans = op(*xs, **kwargs)
        return np.broadcast_to(op.jvp(ts, ans, *xs, **kwargs).numpy(), ans.shape)


@pytest.mark.parametrize("name, kwargs", [("softmax", {}), ("log_softmax", {}),
                                          ("_logsumexp", {"axis": -1})])
def test_minus_inf_logits_give_finite_tangents(name, kwargs):
    # a masked-out logit (attention masks): exp(-inf) = 0, no nan from inf - inf
    x = np.array([[0.3, -np.inf, 1.2, -0.4], [2.0, 0.1, -np.inf, -np.inf]])
    v = np.random.default_rng(0).standard_normal(x.shape)
    v = np.where(np.isinf(x), 0.0, v)           # the masked entries stay masked
    got = _jvp(name, [v], x, **kwargs)
    assert np.isfinite(got).all()
    with tg.no_grad():
        ans = _ops()[name](tg.asarray(x), **kwargs).numpy()
    kept = np.broadcast_to(np.isfinite(ans), got.shape)   # (log_softmax is -inf there)
    with np.errstate(invalid="ignore"):                   # -inf - -inf there
        expected = _central_difference(_ops()[name], [x], kwargs, 0, v)
    np.testing.assert_allclose(got[kept], expected[kept], rtol=1e-4, atol=1e-6)
    if name == "log_softmax":
        # a masked entry is x_i - logsumexp(x) with x_i constant: its (formal) tangent is
        # -sum(p * v), as PyTorch's (the VJP's transpose)
        p = np.exp(ans)
        expected_masked = np.broadcast_to(-(p * v).sum(-1, keepdims=True), x.shape)
        np.testing.assert_allclose(got[~kept], expected_masked[~kept], rtol=1e-12)


def test_softplus_tangent_at_and_around_the_threshold():
    # PyTorch's convention, as the VJP: the sigmoid branch at beta x == threshold, 1 above
    x = np.array([19.0, 20.0, 21.0, -3.0])
    got = _jvp("softplus", [np.ones(4)], x)
    sig = 1.0 / (1.0 + np.exp(-x))
    np.testing.assert_allclose(got, [sig[0], sig[1], 1.0, sig[3]], rtol=1e-12)
    got = _jvp("softplus", [np.ones(4)], x, beta=2.0, threshold=40.0)   # beta x: 38, 40, 42
    sig2 = 1.0 / (1.0 + np.exp(-2.0 * x))
    np.testing.assert_allclose(got, [sig2[0], sig2[1], 1.0, sig2[3]], rtol=1e-12)


def test_cross_entropy_tangent_with_ignored_labels_and_weights():
    # the weighted mean divides by the kept rows' weights (PyTorch's): against differences
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3))
    labels = np.array([0, -100, 2, 1, -100])
    v = rng.standard_normal(x.shape)
    w = np.array([0.5, 2.0, 1.5])
    kwargs = {"weight": w, "reduction": "mean"}
    got = _check_jvp(_ops()["cross_entropy"], [x, labels], [v, None], rtol=1e-5, atol=1e-8,
                     **kwargs)
    # an ignored row's tangent does not count: changing it changes nothing
    v2 = v.copy()
    v2[[1, 4]] += 10.0
    np.testing.assert_allclose(_jvp("cross_entropy", [v2, None], x, labels, **kwargs), got,
                               rtol=1e-12)


def test_cross_entropy_tangent_in_the_probabilities_only():
    # a probability target is differentiable: its tangent alone is -sum(tt * log_softmax)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3))
    p = rng.uniform(0.1, 1.0, (4, 3))
    p /= p.sum(-1, keepdims=True)
    vt = rng.standard_normal(p.shape)
    lsm = x - np.log(np.exp(x).sum(-1, keepdims=True))
    got = _jvp("cross_entropy", [None, vt], x, p, reduction="sum")
    np.testing.assert_allclose(got, -(vt * lsm).sum(), rtol=1e-12)


def test_lstm_tangent_of_a_zero_state_tangent_is_zero():
    # h0's tangent alone, and zero: the recurrence starts from zero states and stays there
    op = _ops()["_lstm_sequence"]
    xw, h0, c0, w_hh = op.samples[0].args
    got = _jvp("_lstm_sequence", [None, np.zeros_like(h0), None, None], xw, h0, c0, w_hh)
    assert got.shape == (xw.shape[0], xw.shape[1], 2 * h0.shape[1])
    assert not got.any()


# ---------------------------------------------------------------------------------------
# Against PyTorch's forward mode (torch.func.jvp), float64
# ---------------------------------------------------------------------------------------

RNG = np.random.default_rng(17)


def _torch():
    return pytest.importorskip("torch")


def _torch_jvp(f, primals, tangents):
    torch = _torch()
    p = tuple(torch.tensor(a, dtype=torch.float64) for a in primals)
    v = tuple(torch.tensor(a, dtype=torch.float64) for a in tangents)
    return torch.func.jvp(f, p, v)[1].numpy()


@pytest.mark.needs_torch
@pytest.mark.parametrize("name, tg_kwargs, torch_fn", [
    ("gelu", {}, lambda F, x: F.gelu(x)),
    ("gelu", {"approximate": "tanh"}, lambda F, x: F.gelu(x, approximate="tanh")),
    ("silu", {}, lambda F, x: F.silu(x)),
    ("softplus", {"beta": 2.0, "threshold": 3.0}, lambda F, x: F.softplus(x, 2.0, 3.0)),
    ("softplus", {"beta": -1.0}, lambda F, x: F.softplus(x, -1.0)),
    ("logsigmoid", {}, lambda F, x: F.logsigmoid(x)),
    ("softmax", {"axis": 0}, lambda F, x: F.softmax(x, 0)),
    ("log_softmax", {"axis": -1}, lambda F, x: F.log_softmax(x, -1)),
])
def test_unary_jvp_matches_torch(name, tg_kwargs, torch_fn):
    F = _torch().nn.functional
    x = 3.0 * RNG.standard_normal((4, 5))
    v = RNG.standard_normal(x.shape)
    np.testing.assert_allclose(_jvp(name, [v], x, **tg_kwargs),
                               _torch_jvp(lambda a: torch_fn(F, a), [x], [v]),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.needs_torch
@pytest.mark.parametrize("kwargs", [
    {}, {"reduction": "sum"}, {"reduction": "none"},
    {"weight": np.array([0.3, 1.0, 2.5, 0.7])},
    {"ignore_index": 2, "reduction": "mean"},
    {"label_smoothing": 0.2, "weight": np.array([0.3, 1.0, 2.5, 0.7])},
])
def test_cross_entropy_jvp_with_labels_matches_torch(kwargs):
    torch = _torch()
    x = RNG.standard_normal((6, 4))
    y = np.array([0, 2, 3, 1, 2, 0])
    v = RNG.standard_normal(x.shape)
    tw = {k: (torch.tensor(a) if isinstance(a, np.ndarray) else a) for k, a in kwargs.items()}

    def loss(a):
        return torch.nn.functional.cross_entropy(a, torch.tensor(y), **tw)
    np.testing.assert_allclose(_jvp("cross_entropy", [v, None], x, y, **kwargs),
                               _torch_jvp(loss, [x], [v]), rtol=1e-10, atol=1e-12)


@pytest.mark.needs_torch
@pytest.mark.parametrize("kwargs", [{}, {"label_smoothing": 0.3, "reduction": "none"}])
def test_cross_entropy_jvp_with_probabilities_matches_torch(kwargs):
    torch = _torch()
    x = RNG.standard_normal((5, 3))
    p = RNG.uniform(0.1, 1.0, (5, 3))
    p /= p.sum(-1, keepdims=True)
    vx, vp = RNG.standard_normal(x.shape), RNG.standard_normal(p.shape)

    def loss(a, b):
        return torch.nn.functional.cross_entropy(a, b, **kwargs)
    np.testing.assert_allclose(_jvp("cross_entropy", [vx, vp], x, p, **kwargs),
                               _torch_jvp(loss, [x, p], [vx, vp]), rtol=1e-10, atol=1e-12)


@pytest.mark.needs_torch
def test_bce_with_logits_and_linear_jvp_match_torch():
    torch = _torch()
    F = torch.nn.functional
    x, t = RNG.standard_normal((4, 3)), RNG.uniform(0, 1, (4, 3))
    vx, vt = RNG.standard_normal(x.shape), RNG.standard_normal(t.shape)
    np.testing.assert_allclose(
        _jvp("binary_cross_entropy_with_logits", [vx, vt], x, t, reduction="sum"),
        _torch_jvp(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="sum"),
                   [x, t], [vx, vt]), rtol=1e-10, atol=1e-12)
    a, w, b = RNG.standard_normal((2, 4, 3)), RNG.standard_normal((5, 3)), RNG.standard_normal(5)
    ta, tw, tb = (RNG.standard_normal(z.shape) for z in (a, w, b))
    np.testing.assert_allclose(_jvp("linear", [ta, tw, tb], a, w, b),
                               _torch_jvp(F.linear, [a, w, b], [ta, tw, tb]),
                               rtol=1e-10, atol=1e-12)


def _torch_lstm(xw, h0, c0, w_hh, reverse):
    """The LSTM recurrence written out in torch ops (gates i, f, g, o), a slow obvious
    reference: [h_t | c_t] per step."""
    torch = _torch()
    H = h0.shape[1]
    h, c, out = h0, c0, [None] * xw.shape[0]
    for t in (range(xw.shape[0] - 1, -1, -1) if reverse else range(xw.shape[0])):
        z = xw[t] + h @ w_hh.T
        i, f = torch.sigmoid(z[:, :H]), torch.sigmoid(z[:, H:2 * H])
        g, o = torch.tanh(z[:, 2 * H:3 * H]), torch.sigmoid(z[:, 3 * H:])
        c = f * c + i * g
        h = o * torch.tanh(c)
        out[t] = torch.cat([h, c], -1)
    return torch.stack(out)


def _torch_gru(xw, h0, w_hh, b_hn, reverse):
    torch = _torch()
    H = h0.shape[1]
    h, out = h0, [None] * xw.shape[0]
    for t in (range(xw.shape[0] - 1, -1, -1) if reverse else range(xw.shape[0])):
        hw = h @ w_hh.T
        r = torch.sigmoid(xw[t, :, :H] + hw[:, :H])
        z = torch.sigmoid(xw[t, :, H:2 * H] + hw[:, H:2 * H])
        n = torch.tanh(xw[t, :, 2 * H:] + r * (hw[:, 2 * H:] + b_hn))
        h = (1 - z) * n + z * h
        out[t] = h
    return torch.stack(out)


@pytest.mark.needs_torch
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("with_tangent", [(1, 1, 1, 1), (0, 1, 0, 0), (1, 0, 0, 1),
                                          (0, 0, 1, 0)])
def test_recurrence_jvps_match_torch(reverse, with_tangent):
    T, N, H = 5, 2, 3
    lstm = [RNG.standard_normal((T, N, 4 * H)), RNG.standard_normal((N, H)),
            RNG.standard_normal((N, H)), 0.6 * RNG.standard_normal((4 * H, H))]
    gru = [RNG.standard_normal((T, N, 3 * H)), RNG.standard_normal((N, H)),
           0.6 * RNG.standard_normal((3 * H, H)), RNG.standard_normal(H)]
    for name, args, ref in [("_lstm_sequence", lstm, _torch_lstm),
                            ("_gru_sequence", gru, _torch_gru)]:
        vs = [RNG.standard_normal(a.shape) if on else np.zeros(a.shape)
              for a, on in zip(args, with_tangent)]
        got = _jvp(name, [v if on else None for v, on in zip(vs, with_tangent)], *args,
                   reverse=reverse)
        want = _torch_jvp(lambda *a: ref(*a, reverse), args, vs)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.needs_torch
@pytest.mark.parametrize("name, centred", [("_standardize_grad", True),
                                           ("_rms_scale_grad", False)])
def test_normalization_grad_ops_jvp_is_torch_forward_over_reverse(name, centred):
    # B(g, x) = J(x)^T g of layer_norm / rms_norm over the last two axes; its tangent in
    # (g, x) from torch.func.jvp over torch.func.vjp (forward over reverse)
    torch = _torch()
    eps = 1e-3
    axis = (-2, -1)

    def f(x):
        if centred:
            return torch.nn.functional.layer_norm(x, x.shape[-2:], eps=eps)
        return x / torch.sqrt((x * x).mean(dim=axis, keepdim=True) + eps)

    def grad_op(g, x):
        return torch.func.vjp(f, x)[1](g)[0]
    g, x = RNG.standard_normal((3, 2, 4)), RNG.standard_normal((3, 2, 4))
    vg, vx = RNG.standard_normal(g.shape), RNG.standard_normal(x.shape)
    for tangents in ([vg, vx], [None, vx], [vg, None]):
        got = _jvp(name, tangents, g, x, axis=axis, eps=eps)
        want = _torch_jvp(grad_op, [g, x], [np.zeros_like(g) if v is None else v
                                            for v in tangents])
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


@pytest.mark.needs_torch
@pytest.mark.parametrize("name, kwargs, torch_fn", [
    ("_gelu_backward", {}, lambda F, x: F.gelu(x)),
    ("_gelu_backward", {"approximate": "tanh"}, lambda F, x: F.gelu(x, approximate="tanh")),
    ("silu_backward", {}, lambda F, x: F.silu(x)),
    ("softplus_backward", {"beta": 1.5, "threshold": 4.0},
     lambda F, x: F.softplus(x, 1.5, 4.0)),
])
def test_activation_backward_ops_jvp_is_torch_forward_over_reverse(name, kwargs, torch_fn):
    # op(g, x) = f'(x) g; its tangent in (g, x) is torch's jvp of torch's vjp of f
    torch = _torch()
    F = torch.nn.functional
    x = np.array([-4.1, -2.3, -0.6, 0.2, 1.1, 2.05, 2.9, 3.8])   # off softplus's threshold
    g = RNG.standard_normal(x.shape)
    vg, vx = RNG.standard_normal(x.shape), RNG.standard_normal(x.shape)

    def grad_op(g, x):
        return torch.func.vjp(lambda a: torch_fn(F, a), x)[1](g)[0]
    for tangents in ([vg, vx], [None, vx], [vg, None]):
        got = _jvp(name, tangents, g, x, **kwargs)
        want = _torch_jvp(grad_op, [g, x], [np.zeros_like(g) if v is None else v
                                            for v in tangents])
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


@pytest.mark.needs_torch
def test_softmax_backward_ops_jvp_is_torch_forward_over_reverse():
    # with y = softmax(x) (p for log_softmax) as the op's input, the tangents of
    # _softmax_backward(g, y) and _log_softmax_backward(g, p) along (vg, vy) are those of
    # torch's vjp of softmax / log_softmax along (vg, vx) when vy is y's tangent from vx
    torch = _torch()
    F = torch.nn.functional
    x, g = RNG.standard_normal((3, 5)), RNG.standard_normal((3, 5))
    vx, vg = RNG.standard_normal(x.shape), RNG.standard_normal(x.shape)
    y = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    vy = y * (vx - (y * vx).sum(-1, keepdims=True))          # softmax's tangent
    for name, fn in [("_softmax_backward", lambda a: F.softmax(a, -1)),
                     ("_log_softmax_backward", lambda a: F.log_softmax(a, -1))]:
        def grad_op(g, x):
            return torch.func.vjp(fn, x)[1](g)[0]
        got = _jvp(name, [vg, vy], g, y, axis=-1)
        np.testing.assert_allclose(got, _torch_jvp(grad_op, [g, x], [vg, vx]),
                                   rtol=1e-9, atol=1e-11, err_msg=name)


# ---------------------------------------------------------------------------------------
# The BPTT ops: no VJP (never differentiated in reverse), but a JVP rule for forward over
# reverse through a plain backward; the kit checks JVPs of ops with a VJP only, so here
# ---------------------------------------------------------------------------------------

BPTT_OPS = ("_lstm_sequence_backward", "_gru_sequence_backward")


def _bptt_cases():
    cases = []
    for name in BPTT_OPS:
        for k, sample in enumerate(_ops()[name].samples):
            for which in ["all"] + list(range(len(sample.args))):
                cases.append(pytest.param(name, k, which, id=f"{name}-s{k}-{which}"))
    return cases


@pytest.mark.parametrize("name, k, which", _bptt_cases())
def test_bptt_op_jvp_matches_finite_differences(name, k, which):
    op = _ops()[name]
    assert op.vjp is None and op.jvp is not None
    sample = op.samples[k]
    args = [a.astype(np.float64) for a in sample.args]
    rng = np.random.default_rng(k)
    tangents = [rng.standard_normal(a.shape) if which in ("all", j) else None
                for j, a in enumerate(args)]
    _check_jvp(op, args, tangents, rtol=1e-5, atol=1e-7, **sample.kwargs)


@pytest.mark.parametrize("name", BPTT_OPS)
def test_bptt_op_jvp_rule_is_differentiable(name):
    # reverse over forward: the rule is tapegrad ops, so its own gradient in every input
    # (for fixed tangents) passes gradcheck
    op = _ops()[name]
    sample = op.samples[1]                          # reverse=True
    rng = np.random.default_rng(5)
    ts = tuple(tg.asarray(rng.standard_normal(a.shape)) for a in sample.args)
    xs = [tg.tensor(a.astype(np.float64), requires_grad=True) for a in sample.args]
    with tg.no_grad():
        ans = op(*[x.detach() for x in xs], **sample.kwargs)

    def rule(*inputs):
        return op.jvp(ts, ans, *inputs, **sample.kwargs)
    assert tt.gradcheck(rule, tuple(xs))


@pytest.mark.parametrize("name", BPTT_OPS)
def test_bptt_op_jvp_keeps_float32(name):
    op = _ops()[name]
    sample = op.samples[0]
    xs = _as_tensors(list(sample.args), np.float32)
    ts = tuple(tg.asarray(np.ones(x.shape, np.float32)) for x in xs)
    with tg.no_grad():
        ans = op(*xs, **sample.kwargs)
        assert op.jvp(ts, ans, *xs, **sample.kwargs).dtype == np.float32


@pytest.mark.needs_torch
@pytest.mark.parametrize("reverse", [False, True])
def test_bptt_op_jvps_are_torch_forward_over_reverse(reverse):
    # forward over reverse as the engine will run it through a plain backward: seq is the
    # forward's output, its tangent the forward's tangent (_lstm_sequence's own JVP rule);
    # the xw-gradient part of each BPTT op's tangent is torch's jvp of its vjp in xw
    torch = _torch()
    T, N, H = 4, 2, 3
    cases = [("_lstm_sequence", _torch_lstm,
              [RNG.standard_normal((T, N, 4 * H)), RNG.standard_normal((N, H)),
               RNG.standard_normal((N, H)), 0.6 * RNG.standard_normal((4 * H, H))],
              lambda out: out[..., :4 * H]),
             ("_gru_sequence", _torch_gru,
              [RNG.standard_normal((T, N, 3 * H)), RNG.standard_normal((N, H)),
               0.6 * RNG.standard_normal((3 * H, H)), RNG.standard_normal(H)],
              lambda out: np.concatenate([out[..., :2 * H], out[..., 3 * H:4 * H]], -1))]
    for name, ref, args, dxw_part in cases:
        vs = [RNG.standard_normal(a.shape) for a in args]
        with tg.no_grad():
            seq = _ops()[name](*_as_tensors(args), reverse=reverse).numpy()
        t_seq = _jvp(name, vs, *args, reverse=reverse)
        g, vg = RNG.standard_normal(seq.shape), RNG.standard_normal(seq.shape)
        got = _jvp(name + "_backward", [vg, t_seq] + vs, g, seq, *args, reverse=reverse)

        def grad_xw(g, *a):
            return torch.func.vjp(lambda *p: ref(*p, reverse), *a)[1](g)[0]
        want = _torch_jvp(grad_xw, [g] + args, [vg] + vs)
        np.testing.assert_allclose(dxw_part(got), want, rtol=1e-9, atol=1e-11, err_msg=name)
