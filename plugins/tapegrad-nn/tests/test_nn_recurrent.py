"""tg.nn's recurrent layers (RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU): forward against a
direct NumPy implementation of the equations, gradients against finite differences, state
dict names and shapes, batch_first, bidirectional, multi-layer, initial states, errors;
``needs_torch`` tests compare outputs and gradients with torch.nn."""

import numpy as np
import pytest
import tapegrad as tg

RNG = np.random.default_rng(0)


# ---------------------------------------------------------------------------------------
# Independent reference: the equations in NumPy
# ---------------------------------------------------------------------------------------

def _sig(a):
    return 1.0 / (1.0 + np.exp(-a))


def np_cell(mode, x, h, c, w_ih, w_hh, b_ih, b_hh):
    H = h.shape[-1]
    b_ih = 0.0 if b_ih is None else b_ih
    b_hh = 0.0 if b_hh is None else b_hh
    gi, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    if mode == "tanh":
        return np.tanh(gi + gh), None
    if mode == "relu":
        return np.maximum(gi + gh, 0.0), None
    if mode == "LSTM":
        a = gi + gh
        i, f, g, o = _sig(a[:, :H]), _sig(a[:, H:2 * H]), np.tanh(a[:, 2 * H:3 * H]), \
            _sig(a[:, 3 * H:])
        c = f * c + i * g
        return o * np.tanh(c), c
    r = _sig(gi[:, :H] + gh[:, :H])
    z = _sig(gi[:, H:2 * H] + gh[:, H:2 * H])
    n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
    return (1 - z) * n + z * h, None


def np_rnn(mode, sd, x, h0, c0, num_layers, bidirectional, bias=True):
    """x (T, N, I); h0/c0 (L*D, N, H) -> output, h_n, c_n."""
    D = 2 if bidirectional else 1
    hn, cn = [], []
    for k in range(num_layers):
        outs = []
        for d, suf in enumerate(("", "_reverse")[:D]):
            w = [sd.get(f"{n}_l{k}{suf}") for n in ("weight_ih", "weight_hh", "bias_ih",
                                                   "bias_hh")]
            h, c = h0[k * D + d], c0[k * D + d] if c0 is not None else None
            hs = [None] * x.shape[0]
            for t in (reversed(range(x.shape[0])) if d else range(x.shape[0])):
                h, c = np_cell(mode, x[t], h, c, *w)
                hs[t] = h
            outs.append(np.stack(hs))
            hn.append(h)
            cn.append(c)
        x = np.concatenate(outs, axis=-1)
    return x, np.stack(hn), (np.stack(cn) if mode == "LSTM" else None)


def _sd(m):
    return {k: v.numpy() for k, v in m.state_dict().items()}


LAYERS = [("tanh", lambda *a, **k: tg.nn.RNN(*a, **k)),
          ("relu", lambda *a, **k: tg.nn.RNN(*a, nonlinearity="relu", **k)),
          ("LSTM", lambda *a, **k: tg.nn.LSTM(*a, **k)),
          ("GRU", lambda *a, **k: tg.nn.GRU(*a, **k))]
CELLS = [("tanh", lambda *a, **k: tg.nn.RNNCell(*a, **k)),
         ("relu", lambda *a, **k: tg.nn.RNNCell(*a, nonlinearity="relu", **k)),
         ("LSTM", lambda *a, **k: tg.nn.LSTMCell(*a, **k)),
         ("GRU", lambda *a, **k: tg.nn.GRUCell(*a, **k))]


# ---------------------------------------------------------------------------------------
# Forward against NumPy
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,make", LAYERS, ids=[m for m, _ in LAYERS])
@pytest.mark.parametrize("num_layers,bidirectional,bias",
                         [(1, False, True), (2, False, True), (1, True, True), (2, True, False)])
def test_layer_forward_matches_numpy(mode, make, num_layers, bidirectional, bias):
    m = make(3, 4, num_layers=num_layers, bidirectional=bidirectional, bias=bias,
             dropout=0.5 if num_layers > 1 else 0.0).eval()   # eval: no dropout
    D = 2 if bidirectional else 1
    x = RNG.standard_normal((5, 2, 3))
    h0 = RNG.standard_normal((num_layers * D, 2, 4))
    c0 = RNG.standard_normal((num_layers * D, 2, 4))
    hx = (tg.tensor(h0), tg.tensor(c0)) if mode == "LSTM" else tg.tensor(h0)
    out, st = m(tg.tensor(x), hx)
    e_out, e_h, e_c = np_rnn(mode, _sd(m), x, h0, c0 if mode == "LSTM" else None,
                             num_layers, bidirectional)
    np.testing.assert_allclose(out.numpy(), e_out, rtol=1e-12, atol=1e-12)
    if mode == "LSTM":
        np.testing.assert_allclose(st[0].numpy(), e_h, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(st[1].numpy(), e_c, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_allclose(st.numpy(), e_h, rtol=1e-12, atol=1e-12)
    assert out.shape == (5, 2, 4 * D)


@pytest.mark.parametrize("mode,make", LAYERS, ids=[m for m, _ in LAYERS])
def test_default_state_is_zeros_batch_first_and_unbatched(mode, make):
    m = make(3, 4, num_layers=2)
    x = RNG.standard_normal((5, 2, 3))
    out, st = m(tg.tensor(x))
    e_out, e_h, _ = np_rnn(mode, _sd(m), x, np.zeros((2, 2, 4)), np.zeros((2, 2, 4)), 2, False)
    np.testing.assert_allclose(out.numpy(), e_out, rtol=1e-12, atol=1e-12)
    # batch_first: the same layer's parameters, input (N, T, I)
    mb = make(3, 4, num_layers=2, batch_first=True)
    mb.load_state_dict(m.state_dict())
    outb, stb = mb(tg.tensor(x.transpose(1, 0, 2)))
    np.testing.assert_allclose(outb.numpy(), e_out.transpose(1, 0, 2), rtol=1e-12, atol=1e-12)
    h_b = stb[0] if mode == "LSTM" else stb
    np.testing.assert_allclose(h_b.numpy(), e_h, rtol=1e-12, atol=1e-12)   # h_n not batch-first
    # unbatched (T, I): the batch-of-one result without the batch axis
    out1, st1 = m(tg.tensor(x[:, 0]))
    np.testing.assert_allclose(out1.numpy(), e_out[:, 0], rtol=1e-12, atol=1e-12)
    h1 = st1[0] if mode == "LSTM" else st1
    assert h1.shape == (2, 4)
    np.testing.assert_allclose(h1.numpy(), e_h[:, 0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode,make", CELLS, ids=[m for m, _ in CELLS])
def test_cell_matches_numpy(mode, make):
    cell = make(3, 4)
    sd = _sd(cell)
    x, h, c = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 4)), RNG.standard_normal((2, 4))
    e_h, e_c = np_cell(mode, x, h, c, sd["weight_ih"], sd["weight_hh"], sd["bias_ih"],
                       sd["bias_hh"])
    if mode == "LSTM":
        got_h, got_c = cell(tg.tensor(x), (tg.tensor(h), tg.tensor(c)))
        np.testing.assert_allclose(got_c.numpy(), e_c, rtol=1e-12, atol=1e-12)
        u_h, u_c = cell(tg.tensor(x[0]), (tg.tensor(h[0]), tg.tensor(c[0])))
        np.testing.assert_allclose(u_c.numpy(), e_c[0], rtol=1e-12, atol=1e-12)
    else:
        got_h = cell(tg.tensor(x), tg.tensor(h))
        u_h = cell(tg.tensor(x[0]), tg.tensor(h[0]))
    np.testing.assert_allclose(got_h.numpy(), e_h, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(u_h.numpy(), e_h[0], rtol=1e-12, atol=1e-12)
    # default state: zeros
    z = np.zeros((2, 4))
    e0, _ = np_cell(mode, x, z, z, sd["weight_ih"], sd["weight_hh"], sd["bias_ih"], sd["bias_hh"])
    got0 = cell(tg.tensor(x))
    np.testing.assert_allclose((got0[0] if mode == "LSTM" else got0).numpy(), e0, rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("mode,make", [LAYERS[2], LAYERS[3]], ids=["LSTM", "GRU"])
@pytest.mark.parametrize("T", [33, 70])
def test_long_sequences_cut_into_chunks_match_numpy(mode, make, T):
    # More than 32 steps: the time axis is processed in chunks (one matmul each).
    m = make(2, 3, num_layers=2, bidirectional=True)
    x = RNG.standard_normal((T, 2, 2))
    h0, c0 = RNG.standard_normal((4, 2, 3)), RNG.standard_normal((4, 2, 3))
    hx = (tg.tensor(h0), tg.tensor(c0)) if mode == "LSTM" else tg.tensor(h0)
    out, st = m(tg.tensor(x), hx)
    e_out, e_h, _ = np_rnn(mode, _sd(m), x, h0, c0 if mode == "LSTM" else None, 2, True)
    np.testing.assert_allclose(out.numpy(), e_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose((st[0] if mode == "LSTM" else st).numpy(), e_h, rtol=1e-12,
                               atol=1e-12)


def test_long_sequence_gradcheck():
    m = tg.nn.GRU(1, 2, num_layers=2, bidirectional=True)
    x = tg.tensor(RNG.standard_normal((40, 1, 1)), requires_grad=True)   # chunks 32 + 8
    assert tg.gradcheck(lambda x: (m(x)[0] ** 2).sum(), (x,))


def test_zero_length_sequence():
    out, h = tg.nn.GRU(3, 4, bidirectional=True)(tg.ones((0, 2, 3)))
    assert out.shape == (0, 2, 8) and h.shape == (2, 2, 4)
    np.testing.assert_array_equal(h.numpy(), 0.0)


def test_dropout_between_layers_in_training_only():
    m = tg.nn.GRU(3, 4, num_layers=2, dropout=0.5)
    x = tg.tensor(RNG.standard_normal((6, 2, 3)))
    m.eval()
    a, b = m(x)[0].numpy(), m(x)[0].numpy()
    np.testing.assert_array_equal(a, b)
    m.train()
    tg.manual_seed(1)
    t1 = m(x)[0].numpy()
    assert not np.allclose(t1, a)              # training mode drops between layers
    with pytest.warns(UserWarning, match=r"GRU: dropout=0.5 has no effect with num_layers=1"):
        one = tg.nn.GRU(3, 4, num_layers=1, dropout=0.5)   # one layer: nothing between layers
    np.testing.assert_array_equal(one(x)[0].numpy(), one.eval()(x)[0].numpy())


# ---------------------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------------------

def test_state_dict_names_and_shapes_are_torchs():
    m = tg.nn.LSTM(3, 5, num_layers=2, bidirectional=True)
    names = list(m.state_dict())
    expected = []
    for k in range(2):
        for suf in ("", "_reverse"):
            expected += [f"weight_ih_l{k}{suf}", f"weight_hh_l{k}{suf}", f"bias_ih_l{k}{suf}",
                         f"bias_hh_l{k}{suf}"]
    assert names == expected
    sd = m.state_dict()
    assert sd["weight_ih_l0"].shape == (20, 3)
    assert sd["weight_ih_l1_reverse"].shape == (20, 10)
    assert sd["weight_hh_l1"].shape == (20, 5)
    assert sd["bias_hh_l0_reverse"].shape == (20,)
    g = tg.nn.GRU(3, 5, bias=False)
    assert list(g.state_dict()) == ["weight_ih_l0", "weight_hh_l0"]
    assert g.weight_ih_l0.shape == (15, 3)
    cell = tg.nn.LSTMCell(3, 5)
    assert [(k, v.shape) for k, v in cell.state_dict().items()] == [
        ("weight_ih", (20, 3)), ("weight_hh", (20, 5)), ("bias_ih", (20,)), ("bias_hh", (20,))]


@pytest.mark.parametrize("make", [lambda: tg.nn.RNN(2, 16), lambda: tg.nn.LSTMCell(2, 16),
                                  lambda: tg.nn.GRU(2, 16, num_layers=2, bidirectional=True)])
def test_init_is_uniform_in_one_over_sqrt_hidden(make):
    tg.manual_seed(0)
    m = make()
    k = 1 / np.sqrt(16)
    for p in m.parameters():
        a = p.numpy()
        assert a.min() >= -k and a.max() < k
        assert a.std() > k / 3                 # spread out, not zeros
    assert tg.nn.LSTM(2, 3, dtype=tg.float32).weight_hh_l0.dtype == np.float32


# ---------------------------------------------------------------------------------------
# Gradients (first and second order come from the composed ops)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,make", LAYERS, ids=[m for m, _ in LAYERS])
def test_layer_gradcheck_input_and_state(mode, make):
    m = make(2, 3, bidirectional=True)
    if mode == "relu":
        # NOTE: keep relu away from its kink for finite differences: positive weights,
        # positive inputs and states.
        with tg.no_grad():
            for p in m.parameters():
                p[...] = tg.abs(p) + 0.05
    x = tg.tensor(np.abs(RNG.standard_normal((3, 2, 2))) + 0.1, requires_grad=True)
    h0 = tg.tensor(np.abs(RNG.standard_normal((2, 2, 3))), requires_grad=True)
    c0 = tg.tensor(RNG.standard_normal((2, 2, 3)), requires_grad=True)

    def f(x, h0, c0=None):
        out, st = m(x, (h0, c0) if mode == "LSTM" else h0)
        h = st[0] if mode == "LSTM" else st
        return (out * out).sum() + (h * h).sum() + (st[1].sum() if mode == "LSTM" else 0.0)

    args = (x, h0, c0) if mode == "LSTM" else (x, h0)
    assert tg.gradcheck(f, args)
    assert tg.gradgradcheck(f, args)


@pytest.mark.parametrize("mode,make", LAYERS, ids=[m for m, _ in LAYERS])
def test_weight_gradients_match_finite_differences(mode, make):
    m = make(2, 3, num_layers=2, bidirectional=True)
    x = tg.tensor(np.abs(RNG.standard_normal((3, 2, 2))) + 0.1)
    if mode == "relu":
        with tg.no_grad():
            for p in m.parameters():
                p[...] = tg.abs(p) + 0.05

    def loss():
        out, st = m(x)
        return (out * out).sum() + ((st[1] if mode == "LSTM" else st) ** 2).sum()

    m.zero_grad()
    loss().backward()
    eps = 1e-6
    for name in ("weight_hh_l0_reverse", "weight_ih_l1", "bias_hh_l1"):
        p = getattr(m, name)
        analytic = p.grad.numpy()
        for idx in [(0,) * p.ndim, tuple(s - 1 for s in p.shape)]:
            old = p.numpy()[idx]
            with tg.no_grad():
                p[idx] = old + eps
                up = loss().item()
                p[idx] = old - eps
                down = loss().item()
                p[idx] = old
            assert analytic[idx] == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-8), \
                (name, idx)


@pytest.mark.parametrize("mode,make", [c for c in CELLS if c[0] != "relu"],
                         ids=["tanh", "LSTM", "GRU"])   # relu: its kink; see the layer test
def test_cell_gradcheck(mode, make):
    cell = make(2, 3)
    x = tg.tensor(RNG.standard_normal((2, 2)), requires_grad=True)
    h = tg.tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    c = tg.tensor(RNG.standard_normal((2, 3)), requires_grad=True)

    def f(x, h, c):
        out = cell(x, (h, c)) if mode == "LSTM" else cell(x, h)
        return (out[0] * out[1]).sum() if mode == "LSTM" else (out * out).sum()

    assert tg.gradcheck(f, (x, h, c)) if mode == "LSTM" else \
        tg.gradcheck(lambda x, h: f(x, h, None), (x, h))
    assert tg.gradgradcheck(f, (x, h, c)) if mode == "LSTM" else \
        tg.gradgradcheck(lambda x, h: f(x, h, None), (x, h))


def test_parameters_receive_gradients():
    m = tg.nn.LSTM(2, 3, num_layers=2, bidirectional=True)
    out, (h, c) = m(tg.tensor(RNG.standard_normal((4, 2, 2))))
    (out.sum() + c.sum()).backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, name
        assert np.abs(p.grad.numpy()).sum() > 0, name


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------

def test_bad_inputs_name_the_layer_and_shapes():
    m = tg.nn.LSTM(3, 4)
    with pytest.raises(ValueError, match=r"LSTM\(3, 4\).*input_size=3.*\(5, 2, 7\).*7 features"):
        m(tg.zeros((5, 2, 7)))
    with pytest.raises(ValueError, match=r"LSTM\(3, 4\).*\(seq, batch, feature\).*\(5,\)"):
        m(tg.zeros(5))
    with pytest.raises(ValueError, match=r"hidden state of shape \(1, 2, 4\).*\(1, 3, 4\)"):
        m(tg.zeros((5, 2, 3)), (tg.zeros((1, 3, 4)), tg.zeros((1, 2, 4))))
    with pytest.raises(TypeError, match="hx must be a tuple"):
        m(tg.zeros((5, 2, 3)), tg.zeros((1, 2, 4)))
    with pytest.raises(TypeError, match="float32.*float64"):
        m(tg.zeros((5, 2, 3), dtype=tg.float32))
    with pytest.raises(ValueError, match=r"GRUCell\(3, 4\).*input_size=3.*\(2, 5\)"):
        tg.nn.GRUCell(3, 4)(tg.zeros((2, 5)))
    with pytest.raises(ValueError, match=r"RNNCell.*hidden state of shape \(2, 4\).*\(2, 5\)"):
        tg.nn.RNNCell(3, 4)(tg.zeros((2, 3)), tg.zeros((2, 5)))
    with pytest.raises(ValueError, match=r"GRU\(3, 4, batch_first=True\).*\(batch, seq"):
        tg.nn.GRU(3, 4, batch_first=True)(tg.zeros((1, 2, 3, 4)))


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="LSTM: proj_size=2 is not supported"):
        tg.nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="RNN: nonlinearity must be 'tanh' or 'relu'"):
        tg.nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="RNNCell: nonlinearity"):
        tg.nn.RNNCell(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="GRU: dropout"):
        tg.nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="GRU: hidden_size"):
        tg.nn.GRU(3, 0)
    with pytest.raises(ValueError, match="RNN: num_layers"):
        tg.nn.RNN(3, 4, num_layers=0)
    with pytest.raises(TypeError, match="LSTMCell: dtype"):
        tg.nn.LSTMCell(3, 4, dtype=np.int64)


# ---------------------------------------------------------------------------------------
# tg.compile (tg.checkpoint: tests/test_recurrent_checkpoint.py, another plugin)
# ---------------------------------------------------------------------------------------

def test_compiled_equals_eager():
    m = tg.nn.LSTM(2, 3, num_layers=2)
    x = tg.tensor(RNG.standard_normal((4, 2, 2)))

    def step(x):
        out, (h, c) = m(x)
        loss = (out * out).sum() + c.sum()
        loss.backward()
        return loss

    eager = step(x).item()
    g_eager = m.weight_hh_l1.grad.numpy().copy()
    m.zero_grad()
    cstep = tg.compile(step)
    for _ in range(2):
        m.zero_grad()
        got = cstep(x).item()
        assert got == pytest.approx(eager, rel=1e-12)
        np.testing.assert_allclose(m.weight_hh_l1.grad.numpy(), g_eager, rtol=1e-12)


# ---------------------------------------------------------------------------------------
# Against PyTorch (deselected unless -m needs_torch)
# ---------------------------------------------------------------------------------------

TORCH_LAYERS = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {})]


@pytest.mark.needs_torch
@pytest.mark.parametrize("name,extra", TORCH_LAYERS, ids=["RNN", "RNN-relu", "LSTM", "GRU"])
@pytest.mark.parametrize("kw", [{}, {"num_layers": 2, "bidirectional": True},
                                {"batch_first": True, "bias": False, "num_layers": 2},
                                {"bidirectional": True, "T": 70}])
def test_layers_match_torch(name, extra, kw):
    kw = dict(kw)
    T = kw.pop("T", 5)
    torch = pytest.importorskip("torch")
    tm = getattr(torch.nn, name)(3, 4, **extra, **kw).double()
    m = getattr(tg.nn, name)(3, 4, **extra, **kw)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    D = 2 if kw.get("bidirectional") else 1
    L = kw.get("num_layers", 1)
    x = RNG.standard_normal((2, T, 3) if kw.get("batch_first") else (T, 2, 3))
    h0, c0 = RNG.standard_normal((L * D, 2, 4)), RNG.standard_normal((L * D, 2, 4))
    tx = torch.tensor(x, requires_grad=True)
    ax = tg.tensor(x, requires_grad=True)
    if name == "LSTM":
        tout, (th, tc) = tm(tx, (torch.tensor(h0), torch.tensor(c0)))
        aout, (ah, ac) = m(ax, (tg.tensor(h0), tg.tensor(c0)))
        tloss = (tout ** 2).sum() + th.sum() + tc.sum()
        aloss = (aout ** 2).sum() + ah.sum() + ac.sum()
    else:
        tout, th = tm(tx, torch.tensor(h0))
        aout, ah = m(ax, tg.tensor(h0))
        tloss, aloss = (tout ** 2).sum() + th.sum(), (aout ** 2).sum() + ah.sum()
    np.testing.assert_allclose(aout.numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ah.numpy(), th.detach().numpy(), rtol=1e-10, atol=1e-12)
    tloss.backward()
    aloss.backward()
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    tparams = dict(tm.named_parameters())
    for k, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tparams[k].grad.numpy(), rtol=1e-9,
                                   atol=1e-12, err_msg=k)


@pytest.mark.needs_torch
@pytest.mark.parametrize("name,extra", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
                                        ("LSTMCell", {}), ("GRUCell", {})])
def test_cells_match_torch(name, extra):
    torch = pytest.importorskip("torch")
    tm = getattr(torch.nn, name)(3, 4, **extra).double()
    m = getattr(tg.nn, name)(3, 4, **extra)
    m.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x, h, c = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 4)), RNG.standard_normal((2, 4))
    tx, ax = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    if name == "LSTMCell":
        (th, tc), (ah, ac) = tm(tx, (torch.tensor(h), torch.tensor(c))), \
            m(ax, (tg.tensor(h), tg.tensor(c)))
        np.testing.assert_allclose(ac.numpy(), tc.detach().numpy(), rtol=1e-10, atol=1e-12)
        tloss, aloss = (th * tc).sum(), (ah * ac).sum()
    else:
        th, ah = tm(tx, torch.tensor(h)), m(ax, tg.tensor(h))
        tloss, aloss = (th ** 2).sum(), (ah ** 2).sum()
    np.testing.assert_allclose(ah.numpy(), th.detach().numpy(), rtol=1e-10, atol=1e-12)
    tloss.backward()
    aloss.backward()
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    tparams = dict(tm.named_parameters())
    for k, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tparams[k].grad.numpy(), rtol=1e-9,
                                   atol=1e-12, err_msg=k)


# ---------------------------------------------------------------------------------------
# The fused LSTM recurrence (recurrent_ops): against the NumPy equations and the composition
# ---------------------------------------------------------------------------------------

def _np_lstm_sequence(xw, h0, c0, w_hh, reverse):
    """[h_t | c_t] for every t, from np_cell's equations (x @ w_ih.T = xw: identity w_ih)."""
    T, G = xw.shape[0], xw.shape[2]
    out = [None] * T
    h, c = h0, c0
    for t in (reversed(range(T)) if reverse else range(T)):
        h, c = np_cell("LSTM", xw[t], h, c, np.eye(G), w_hh, None, None)
        out[t] = np.concatenate([h, c], axis=-1)
    return np.stack(out)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lstm_sequence_matches_numpy_equations(reverse, dtype):
    rng = np.random.default_rng(3)
    T, N, H = 5, 3, 4
    xw, h0, c0 = (rng.standard_normal(s) for s in ((T, N, 4 * H), (N, H), (N, H)))
    w_hh = 0.5 * rng.standard_normal((4 * H, H))
    got = tg._lstm_sequence(*(tg.tensor(a.astype(dtype)) for a in (xw, h0, c0, w_hh)),
                            reverse=reverse)
    assert got.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(got.numpy(), _np_lstm_sequence(xw, h0, c0, w_hh, reverse),
                               rtol=tol, atol=tol)


def _grads(loss, leaves, create_graph=False):
    """The leaves' gradients of loss via backward() (tg.grad is tapegrad-higher's, not a
    dependency of this distribution)."""
    for t in leaves:
        t.grad = None
    loss.backward(create_graph=create_graph)
    grads = [t.grad for t in leaves]
    for t in leaves:
        t.grad = None
    return grads


def _composed_lstm(xw, h0, c0, w_hh, reverse):
    """The recurrence with plain tapegrad ops (the step of the unfused path)."""
    from tapegrad_nn.recurrent import _step
    T = xw.shape[0]
    h, c, out = h0, c0, [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        h, c = _step("LSTM", xw[t], h, c, w_hh, None)
        out[t] = tg.concatenate([h, c], axis=-1)
    return tg.stack(out, axis=0)


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_sequence_first_and_second_derivatives_equal_the_composition(reverse):
    # The fused kernel's BPTT (first order) and the recorded BPTT (create_graph) against
    # the graph of the ~14-ops-per-step composition.
    rng = np.random.default_rng(4)
    T, N, H = 4, 2, 3
    arrays = [rng.standard_normal((T, N, 4 * H)), rng.standard_normal((N, H)),
              rng.standard_normal((N, H)), 0.6 * rng.standard_normal((4 * H, H))]
    w_out = tg.tensor(rng.standard_normal((T, N, 2 * H)))
    results = []
    for f in (lambda *a: tg._lstm_sequence(*a, reverse=reverse),
              lambda *a: _composed_lstm(*a, reverse)):
        ins = [tg.tensor(a, requires_grad=True) for a in arrays]
        loss = (tg.tanh(f(*ins)) * w_out).sum()
        first = _grads(loss, ins, create_graph=True)
        second = _grads(sum((gk * gk).sum() for gk in first), ins)
        results.append([gk.numpy() for gk in first] + [gk.numpy() for gk in second])
    for fused, composed in zip(*results):
        np.testing.assert_allclose(fused, composed, rtol=1e-10, atol=1e-12)


def test_lstm_sequence_backward_refuses_to_be_differentiated():
    rng = np.random.default_rng(5)
    T, N, H = 2, 1, 2
    args = [rng.standard_normal(s) for s in ((T, N, 2 * H), (T, N, 2 * H), (T, N, 4 * H),
                                             (N, H), (N, H), (4 * H, H))]
    ins = [tg.tensor(a) for a in args]
    ins[2] = tg.tensor(args[2], requires_grad=True)
    with pytest.raises(NotImplementedError, match="_lstm_sequence_backward"):
        tg._lstm_sequence_backward(*ins)
    with tg.no_grad():                      # where the rule calls it: allowed
        assert tg._lstm_sequence_backward(*ins).shape == (T, N, 5 * H)


def test_lstm_sequence_rejects_inconsistent_shapes():
    with pytest.raises(ValueError, match=r"_lstm_sequence: expected xw \(T, N, 4H\)"):
        tg._lstm_sequence(tg.zeros((3, 2, 7)), tg.zeros((2, 2)), tg.zeros((2, 2)),
                          tg.zeros((8, 2)))


def _op_names(t):
    """The names of the ops in t's graph."""
    names, stack = set(), [t.grad_fn]
    while stack:
        node = stack.pop()
        names.add(node.name)
        stack.extend(e for e, _ in (n for n in node.next_functions if n is not None)
                     if isinstance(e, tg._engine.Node))
    return names


def test_lstm_layer_and_cell_use_the_fused_op_on_cpu():
    m = tg.nn.LSTM(3, 4, bidirectional=True)
    names = _op_names(m(tg.ones((5, 2, 3)))[0])
    assert "_lstm_sequence" in names and "sigmoid" not in names
    h, c = tg.nn.LSTMCell(3, 4)(tg.ones((2, 3)))
    assert h.grad_fn.next_functions[0][0].name == "_lstm_sequence"


# --- the fused GRU recurrence ----------------------------------------------------------

def _np_gru_sequence(xw, h0, w_hh, b_hn, reverse):
    """h_t for every t from np_cell's GRU equations (identity w_ih; xw holds b_ih and
    b_hr, b_hz; b_hh = [0, 0, b_hn])."""
    T, H = xw.shape[0], h0.shape[-1]
    b_hh = np.concatenate([np.zeros(2 * H), b_hn])
    out, h = [None] * T, h0
    for t in (reversed(range(T)) if reverse else range(T)):
        h, _ = np_cell("GRU", xw[t], h, None, np.eye(3 * H), w_hh, None, b_hh)
        out[t] = h
    return np.stack(out)


def _gru_args(seed, T=4, N=3, H=2):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((T, N, 3 * H)), rng.standard_normal((N, H)),
            0.6 * rng.standard_normal((3 * H, H)), rng.standard_normal(H)]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gru_sequence_matches_numpy_equations(reverse, dtype):
    args = _gru_args(6, 5, 3, 4)
    got = tg._gru_sequence(*(tg.tensor(a.astype(dtype)) for a in args), reverse=reverse)
    assert got.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(got.numpy(), _np_gru_sequence(*args, reverse), rtol=tol,
                               atol=tol)


def _composed_gru(xw, h0, w_hh, b_hn, reverse):
    from tapegrad_nn.recurrent import _step
    T = xw.shape[0]
    h, out = h0, [None] * T
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        h, _ = _step("GRU", xw[t], h, None, w_hh, b_hn)
        out[t] = h
    return tg.stack(out, axis=0)


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_sequence_first_and_second_derivatives_equal_the_composition(reverse):
    arrays = _gru_args(7)
    w_out = tg.tensor(np.random.default_rng(8).standard_normal((4, 3, 2)))
    results = []
    for f in (lambda *a: tg._gru_sequence(*a, reverse=reverse),
              lambda *a: _composed_gru(*a, reverse)):
        ins = [tg.tensor(a, requires_grad=True) for a in arrays]
        loss = (tg.tanh(f(*ins)) * w_out).sum()
        first = _grads(loss, ins, create_graph=True)
        second = _grads(sum((gk * gk).sum() for gk in first), ins)
        results.append([gk.numpy() for gk in first] + [gk.numpy() for gk in second])
    for fused, composed in zip(*results):
        np.testing.assert_allclose(fused, composed, rtol=1e-10, atol=1e-12)


def test_gru_sequence_backward_refuses_to_be_differentiated_and_shapes_are_checked():
    xw, h0, w_hh, b_hn = (tg.tensor(a) for a in _gru_args(9, 2, 1, 2))
    seq = tg._gru_sequence(xw, h0, w_hh, b_hn)
    with pytest.raises(NotImplementedError, match="_gru_sequence_backward"):
        tg._gru_sequence_backward(seq, seq, xw, tg.tensor(h0.numpy(), requires_grad=True),
                                  w_hh, b_hn)
    with pytest.raises(ValueError, match=r"_gru_sequence: expected xw \(T, N, 3H\)"):
        tg._gru_sequence(xw, h0, w_hh, tg.zeros(3))


def test_gru_without_bias_uses_the_fused_op_and_matches_numpy():
    m = tg.nn.GRU(3, 2, bias=False, bidirectional=True)
    x = RNG.standard_normal((4, 2, 3))
    out, h_n = m(tg.tensor(x))
    names = _op_names(out)
    assert "_gru_sequence" in names and "sigmoid" not in names
    assert tg.nn.GRUCell(3, 2)(tg.ones((2, 3))).grad_fn.next_functions[0][0].name == \
        "_gru_sequence"
    want, want_h, _ = np_rnn("GRU", _sd(m), x, np.zeros((2, 2, 2)), None, 1, True)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h_n.numpy(), want_h, rtol=1e-12, atol=1e-14)
