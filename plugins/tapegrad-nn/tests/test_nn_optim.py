"""tg.optim: SGD, Adam and AdamW follow PyTorch's update rules step for step.

The reference optimizers below are written here, in NumPy, from the formulas in PyTorch's
documentation (not from tapegrad_nn.optim), and every variant is compared with them over
several steps in float64. If torch happens to be installed, the last tests also compare
with torch.optim itself; nothing here needs it.
"""


import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import run_doctests
from tapegrad_nn import optim

STEPS = 6
TOL = dict(rtol=1e-12, atol=1e-12)


# -- NumPy references (PyTorch's formulas) ----------------------------------------------

def sgd_reference(p, grad_of, steps, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
                  nesterov=False):
    """Parameter values after each step; grad_of(p, t) is the gradient at step t."""
    p = np.array(p, dtype=np.float64)
    buf, out = None, []
    for t in range(steps):
        d = grad_of(p, t)
        if weight_decay:
            d = d + weight_decay * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
        out.append(p)
    return out


def adam_reference(p, grad_of, steps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                   weight_decay=0.0, amsgrad=False, decoupled=False):
    """Adam/AdamW in the textbook form: bias-corrected moments m_hat, v_hat."""
    p = np.array(p, dtype=np.float64)
    b1, b2 = betas
    m, v, v_max = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    out = []
    for t in range(1, steps + 1):
        g = grad_of(p, t - 1)
        if weight_decay and decoupled:
            p = p - lr * weight_decay * p
        elif weight_decay:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if amsgrad:
            v_max = np.maximum(v_max, v)
        m_hat = m / (1 - b1 ** t)
        v_hat = (v_max if amsgrad else v) / (1 - b2 ** t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
        out.append(p)
    return out


def random_grads(shape, steps, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    grads = [rng.standard_normal(shape).astype(dtype) for _ in range(steps)]
    return lambda p, t: grads[t]


def run(make_opt, p0, grad_of, steps, dtype=np.float64):
    """Run the tapegrad optimizer with the gradients grad_of gives; values after each step."""
    p = tg.tensor(np.asarray(p0, dtype=dtype), requires_grad=True)
    opt = make_opt([p])
    out = []
    for t in range(steps):
        p.grad = tg.tensor(np.asarray(grad_of(p.numpy(), t), dtype=dtype))
        opt.step()
        out.append(p.numpy().copy())
    return out, p, opt


def assert_trajectories_close(got, want, **tol):
    assert len(got) == len(want)
    for t, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, err_msg=f"step {t + 1}", **(tol or TOL))


P0 = np.random.default_rng(42).standard_normal((3, 4))

SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.1, weight_decay=0.01),
    dict(lr=0.02, momentum=0.9, weight_decay=0.1, nesterov=True),
    dict(lr=0.02, momentum=0.5, dampening=0.5, weight_decay=0.1),
]

ADAM_CASES = [
    dict(),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.05, betas=(0.5, 0.9), weight_decay=0.05, amsgrad=True),
    dict(lr=0.01, betas=(0.0, 0.0)),
]


# -- the update rules ---------------------------------------------------------------------

@pytest.mark.parametrize("kw", SGD_CASES, ids=str)
def test_sgd_matches_the_reference(kw):
    grads = random_grads(P0.shape, STEPS)
    got, _, _ = run(lambda ps: tg.optim.SGD(ps, **kw), P0, grads, STEPS)
    assert_trajectories_close(got, sgd_reference(P0, grads, STEPS, **kw))


@pytest.mark.parametrize("kw", ADAM_CASES, ids=str)
def test_adam_matches_the_reference(kw):
    grads = random_grads(P0.shape, STEPS)
    got, _, _ = run(lambda ps: tg.optim.Adam(ps, **kw), P0, grads, STEPS)
    assert_trajectories_close(got, adam_reference(P0, grads, STEPS, **kw))


@pytest.mark.parametrize("cls", [tg.optim.Adam, tg.optim.AdamW])
@pytest.mark.parametrize("kw", ADAM_CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_capturable_adam_updates_equal_the_python_step_count_bit_for_bit(cls, kw, dtype):
    grads = random_grads(P0.shape, STEPS, dtype=dtype)
    plain, _, _ = run(lambda ps: cls(ps, **kw), P0, grads, STEPS, dtype)
    captured, p, opt = run(lambda ps: cls(ps, capturable=True, **kw), P0, grads, STEPS, dtype)
    for a, b in zip(captured, plain):
        assert a.dtype == dtype and np.array_equal(a, b)
    step = opt.state[p]["step"]
    assert isinstance(step, tg.Tensor) and step.dtype == np.float64 and step.item() == STEPS


def test_capturable_adam_inside_tg_compile_records_twice_then_replays():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((8, 5)), rng.integers(0, 3, 8)

    def make(capturable):
        tg.manual_seed(0)
        net = tg.nn.Sequential(tg.nn.Linear(5, 7), tg.nn.Tanh(), tg.nn.Linear(7, 3))
        opt = tg.optim.Adam(net.parameters(), lr=0.01, capturable=capturable)

        def step(x):
            opt.zero_grad()
            loss = tg.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss
        return net, opt, step

    net_e, opt_e, eager = make(False)
    net_c, opt_c, step_c = make(True)
    compiled = tg.compile(step_c)
    for _ in range(6):
        assert np.array_equal(compiled(tg.tensor(x)).numpy(), eager(tg.tensor(x)).numpy())
    for a, b in zip(net_c.parameters(), net_e.parameters()):
        assert np.array_equal(a.numpy(), b.numpy())
    # recorded before the state exists and once after; replayed from then on
    assert compiled.cache_info().misses == 2 and compiled.cache_info().hits == 4
    assert all(opt_c.state[p]["step"].item() == 6 for p in net_c.parameters())
    # with a Python step count every call records again (the count is baked in)
    plain = tg.compile(make(False)[2])
    for _ in range(3):
        plain(tg.tensor(x))
    assert plain.cache_info().hits == 0


def test_capturable_adam_state_dict_round_trip_and_switching():
    grads = random_grads(P0.shape, 6)
    _, p, opt = run(lambda ps: tg.optim.Adam(ps, lr=0.01, capturable=True), P0, grads, 3)
    sd = opt.state_dict()
    assert sd["state"][0]["step"] == 3 and sd["param_groups"][0]["capturable"] is True
    q = tg.tensor(p.numpy(), requires_grad=True)
    again = tg.optim.Adam([q], lr=0.01)
    again.load_state_dict(sd)
    for t in range(3, 6):
        for param, o in ((p, opt), (q, again)):
            param.grad = tg.tensor(grads(None, t))
            o.step()
        assert np.array_equal(p.numpy(), q.numpy())
    assert again.state[q]["step"].item() == 6        # capturable came with the state dict
    again.param_groups[0]["capturable"] = False        # and can be switched off
    q.grad = tg.tensor(grads(None, 0))
    again.step()
    assert again.state[q]["step"] == 7 and isinstance(again.state[q]["step"], int)


@pytest.mark.parametrize("kw", [dict(), dict(lr=0.01, weight_decay=0.3),
                                dict(lr=0.05, weight_decay=0.1, amsgrad=True),
                                dict(lr=0.01, weight_decay=0.0)], ids=str)
def test_adamw_matches_the_reference_with_decoupled_decay(kw):
    grads = random_grads(P0.shape, STEPS)
    got, _, _ = run(lambda ps: tg.optim.AdamW(ps, **kw), P0, grads, STEPS)
    ref_kw = dict(kw)
    ref_kw.setdefault("weight_decay", 1e-2)
    assert_trajectories_close(got, adam_reference(P0, grads, STEPS, decoupled=True, **ref_kw))


def test_adamw_default_weight_decay_is_1e_2_and_adam_is_0():
    p = tg.tensor([1.0], requires_grad=True)
    assert tg.optim.AdamW([p]).param_groups[0]["weight_decay"] == 1e-2
    assert tg.optim.Adam([p]).param_groups[0]["weight_decay"] == 0.0
    assert tg.optim.Adam([p]).defaults["betas"] == (0.9, 0.999)


def test_adam_and_adamw_differ_when_decaying():
    grads = random_grads(P0.shape, 3)
    a, _, _ = run(lambda ps: tg.optim.Adam(ps, lr=0.1, weight_decay=0.5), P0, grads, 3)
    w, _, _ = run(lambda ps: tg.optim.AdamW(ps, lr=0.1, weight_decay=0.5), P0, grads, 3)
    assert not np.allclose(a[-1], w[-1])


def test_gradients_from_backward_drive_the_update():
    target = np.linspace(-1, 1, 12).reshape(3, 4)
    p = tg.tensor(P0, requires_grad=True)
    opt = tg.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True)
    got = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = ((p - target) ** 2).sum()
        loss.backward()
        opt.step()
        got.append(p.numpy().copy())
    want = sgd_reference(P0, lambda q, t: 2 * (q - target), STEPS, lr=0.1, momentum=0.9,
                         nesterov=True)
    assert_trajectories_close(got, want)


def test_step_runs_the_closure_under_grad_mode_and_returns_its_loss():
    target = np.array([3.0, -1.0])
    p = tg.tensor([0.0, 0.0], requires_grad=True)
    opt = tg.optim.Adam([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = ((p - target) ** 2).sum()
        loss.backward()
        return loss

    with tg.no_grad():                       # step turns grad mode on for the closure
        loss = opt.step(closure)
    assert loss.item() == pytest.approx(10.0)
    want = adam_reference([0.0, 0.0], lambda q, t: 2 * (q - target), 1, lr=0.1)
    np.testing.assert_allclose(p.numpy(), want[-1], **TOL)
    assert opt.step() is None


# -- parameters that get no gradient ------------------------------------------------------

@pytest.mark.parametrize("make", [lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: tg.optim.Adam(ps, lr=0.1),
                                  lambda ps: tg.optim.AdamW(ps, lr=0.1)],
                         ids=["SGD", "Adam", "AdamW"])
def test_params_without_grad_are_skipped_and_get_no_state(make):
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = tg.tensor([3.0, 4.0], requires_grad=True)
    opt = make([a, b])
    a.grad = tg.tensor([0.5, -0.5])
    opt.step()
    assert b.numpy().tolist() == [3.0, 4.0]
    assert b not in opt.state
    assert not np.allclose(a.numpy(), [1.0, 2.0])


def test_adam_counts_steps_per_parameter():
    # b gets gradients only at steps 1 and 3: its trajectory is Adam over those two.
    a = tg.tensor(P0, requires_grad=True)
    b = tg.tensor(P0, requires_grad=True)
    opt = tg.optim.Adam([a, b], lr=0.1)
    grads = random_grads(P0.shape, 3)
    for t in range(3):
        a.grad = tg.tensor(grads(None, t))
        b.grad = tg.tensor(grads(None, t)) if t != 1 else None
        opt.step()
    assert opt.state[a]["step"] == 3 and opt.state[b]["step"] == 2
    want = adam_reference(P0, lambda q, t: grads(None, [0, 2][t]), 2, lr=0.1)
    np.testing.assert_allclose(b.numpy(), want[-1], **TOL)


# -- in place, dtypes ------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=True),
    lambda ps: tg.optim.Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True),
    lambda ps: tg.optim.AdamW(ps, lr=0.01, amsgrad=True)], ids=["SGD", "Adam", "AdamW"])
def test_updates_are_in_place_and_bump_the_version(make):
    p = tg.tensor(P0, requires_grad=True)
    storage = np.asarray(p)
    opt = make([p])
    version = p._version
    p.grad = tg.tensor(np.ones_like(P0))
    opt.step()
    assert p._version > version
    assert np.shares_memory(storage, p.numpy())
    assert p.is_leaf and p.requires_grad and p.grad_fn is None


@pytest.mark.parametrize("make, reference", [
    (lambda ps: tg.optim.SGD(ps, lr=np.float64(0.05), momentum=np.float64(0.9), nesterov=True),
     lambda p, g: sgd_reference(p, g, STEPS, lr=0.05, momentum=0.9, nesterov=True)),
    (lambda ps: tg.optim.Adam(ps, lr=np.float64(0.01), betas=np.array([0.9, 0.99]),
                              weight_decay=0.1, amsgrad=True),
     lambda p, g: adam_reference(p, g, STEPS, lr=0.01, betas=(0.9, 0.99), weight_decay=0.1,
                                 amsgrad=True)),
    (lambda ps: tg.optim.AdamW(ps, lr=0.01, weight_decay=np.float64(0.1)),
     lambda p, g: adam_reference(p, g, STEPS, lr=0.01, weight_decay=0.1, decoupled=True)),
], ids=["SGD", "Adam", "AdamW"])
def test_float32_params_and_state_stay_float32(make, reference):
    # NumPy float64 scalars as hyper-parameters would promote float32 math to float64
    # (NEP 50); the optimizers keep Python floats.
    grads = random_grads(P0.shape, STEPS, dtype=np.float32)
    got, p, opt = run(make, P0, grads, STEPS, dtype=np.float32)
    assert p.dtype == np.float32 and all(a.dtype == np.float32 for a in got)
    for value in opt.state[p].values():
        if isinstance(value, tg.Tensor):
            assert value.dtype == np.float32
    for key, value in opt.param_groups[0].items():
        if key != "params":
            assert type(value) in (float, bool, tuple), key
    want = reference(P0.astype(np.float32).astype(np.float64),
                     lambda q, t: grads(q, t).astype(np.float64))
    assert_trajectories_close(got, want, rtol=1e-4, atol=1e-5)


# -- parameter groups ----------------------------------------------------------------------

def test_param_groups_use_their_own_hyper_parameters():
    grads = random_grads(P0.shape, STEPS)
    a = tg.tensor(P0, requires_grad=True)
    b = tg.tensor(P0, requires_grad=True)
    c = tg.tensor(P0, requires_grad=True)
    opt = tg.optim.SGD([{"params": [a]},
                        {"params": [b], "lr": 0.01},
                        {"params": (x for x in [c]), "momentum": 0.5, "nesterov": True}],
                       lr=0.1, momentum=0.9)
    for t in range(STEPS):
        for p in (a, b, c):
            p.grad = tg.tensor(grads(None, t))
        opt.step()
    assert_trajectories_close([a.numpy()], sgd_reference(P0, grads, STEPS, 0.1, 0.9)[-1:])
    assert_trajectories_close([b.numpy()], sgd_reference(P0, grads, STEPS, 0.01, 0.9)[-1:])
    assert_trajectories_close([c.numpy()], sgd_reference(P0, grads, STEPS, 0.1, 0.5,
                                                         nesterov=True)[-1:])
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01, 0.1]
    assert [len(g["params"]) for g in opt.param_groups] == [1, 1, 1]


def test_adam_param_groups_and_add_param_group():
    grads = random_grads(P0.shape, STEPS)
    a = tg.tensor(P0, requires_grad=True)
    b = tg.tensor(P0, requires_grad=True)
    opt = tg.optim.Adam([a], lr=0.01)
    opt.add_param_group({"params": b, "lr": 0.1, "betas": (0.5, 0.9)})
    for t in range(STEPS):
        a.grad, b.grad = tg.tensor(grads(None, t)), tg.tensor(grads(None, t))
        opt.step()
    np.testing.assert_allclose(a.numpy(), adam_reference(P0, grads, STEPS, lr=0.01)[-1], **TOL)
    np.testing.assert_allclose(
        b.numpy(), adam_reference(P0, grads, STEPS, lr=0.1, betas=(0.5, 0.9))[-1], **TOL)


def test_sgd_lr_may_be_given_by_every_group_instead():
    a, b = tg.tensor([1.0], requires_grad=True), tg.tensor([1.0], requires_grad=True)
    opt = tg.optim.SGD([{"params": [a], "lr": 0.1}, {"params": [b], "lr": 0.2}])
    a.grad, b.grad = tg.tensor([1.0]), tg.tensor([1.0])
    opt.step()
    assert (a.item(), b.item()) == (pytest.approx(0.9), pytest.approx(0.8))
    with pytest.raises(ValueError, match="parameter group 2: no value for the required"):
        opt.add_param_group({"params": [tg.tensor([1.0], requires_grad=True)]})


def test_changing_a_groups_lr_between_steps_takes_effect():
    p = tg.tensor([1.0], requires_grad=True)
    opt = tg.optim.SGD([p], lr=0.1)
    p.grad = tg.tensor([1.0])
    opt.step()
    opt.param_groups[0]["lr"] = 0.5
    opt.step()
    assert p.item() == pytest.approx(1.0 - 0.1 - 0.5)


def test_parameters_from_a_generator_are_accepted():
    ps = [tg.tensor([1.0], requires_grad=True) for _ in range(3)]
    opt = tg.optim.SGD((p for p in ps), lr=0.1)
    got = opt.param_groups[0]["params"]
    assert len(got) == 3 and all(x is y for x, y in zip(got, ps))


# -- zero_grad ---------------------------------------------------------------------------------

def test_zero_grad_sets_grads_to_none_by_default():
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = tg.tensor([1.0], requires_grad=True)
    opt = tg.optim.SGD([a, b], lr=0.1)
    (a * 2.0).sum().backward()
    opt.zero_grad()
    assert a.grad is None and b.grad is None


def test_zero_grad_without_set_to_none_zeroes_the_same_buffer():
    a = tg.tensor(np.ones(3, np.float32), requires_grad=True)
    b = tg.tensor([1.0], requires_grad=True)
    opt = tg.optim.Adam([a, b])
    (a * 2.0).sum().backward()
    g = a.grad
    opt.zero_grad(set_to_none=False)
    assert a.grad is g and a.grad.numpy().tolist() == [0.0, 0.0, 0.0]
    assert a.grad.dtype == np.float32
    assert b.grad is None                   # no gradient: nothing to zero
    (a * 3.0).sum().backward()              # accumulates onto the zeros
    assert a.grad.numpy().tolist() == [3.0, 3.0, 3.0]


def test_zero_grad_cuts_a_gradient_that_has_a_graph():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward(create_graph=True)
    assert x.grad.grad_fn is not None
    tg.optim.SGD([x], lr=0.1).zero_grad(set_to_none=False)
    assert x.grad.grad_fn is None and not x.grad.requires_grad
    assert x.grad.numpy().tolist() == [0.0, 0.0]


# -- state dicts ------------------------------------------------------------------------------

def _plain_values_only(obj):
    if isinstance(obj, dict):
        return all(isinstance(k, (int, str)) and _plain_values_only(v) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return all(_plain_values_only(v) for v in obj)
    return obj is None or isinstance(obj, (bool, int, float, str, np.ndarray))


def _through_npz(state_dict, path):
    """Write a state dict as flat .npz entries and read it back (allow_pickle=False),
    as tg.save/tg.load would: keys become strings and numbers 0-d arrays."""
    flat = {}

    def walk(prefix, obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(f"{prefix}{k}/", v)
        elif isinstance(obj, list) and obj and isinstance(obj[0], dict):
            for i, v in enumerate(obj):
                walk(f"{prefix}{i}/", v)
        else:
            flat[prefix[:-1]] = np.asarray(obj)

    walk("", state_dict)
    np.savez(path, **flat)
    loaded = {}
    with np.load(path, allow_pickle=False) as f:
        for key in f.files:
            node = loaded
            *parents, leaf = key.split("/")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = f[key]
    groups = loaded["param_groups"]
    loaded["param_groups"] = [groups[str(i)] for i in range(len(groups))]
    loaded.setdefault("state", {})
    return loaded


OPTIMIZERS = [
    lambda ps: tg.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda ps: tg.optim.Adam(ps, lr=0.02, betas=(0.8, 0.95), weight_decay=0.1, amsgrad=True),
    lambda ps: tg.optim.AdamW(ps, lr=0.02, weight_decay=0.1),
]


@pytest.mark.parametrize("through_file", [False, True], ids=["dict", "npz"])
@pytest.mark.parametrize("make", OPTIMIZERS, ids=["SGD", "Adam", "AdamW"])
def test_state_dict_round_trip_continues_identically(make, through_file, tmp_path):
    grads = random_grads(P0.shape, 8)
    p = tg.tensor(P0, requires_grad=True)
    q = tg.tensor(P0[0], requires_grad=True)        # a second group with no gradient
    opt = make([p])
    opt.add_param_group({"params": [q], "lr": 0.5})
    for t in range(4):
        p.grad = tg.tensor(grads(None, t))
        opt.step()
    sd = opt.state_dict()
    assert _plain_values_only(sd)
    assert list(sd["state"]) == [0]                 # q has no state
    if through_file:
        sd = _through_npz(sd, tmp_path / "opt.npz")

    p2 = tg.tensor(p.numpy(), requires_grad=True)
    q2 = tg.tensor(q.numpy(), requires_grad=True)
    opt2 = make([p2])
    opt2.add_param_group({"params": [q2], "lr": 0.1})
    opt2.load_state_dict(sd)
    assert opt2.param_groups[1]["lr"] == 0.5
    assert opt2.param_groups[0]["params"][0] is p2
    for key, value in opt.param_groups[0].items():
        if key != "params":
            assert opt2.param_groups[0][key] == value and type(opt2.param_groups[0][key]) is type(value)
    for t in range(4, 8):
        for x in (p, p2):
            x.grad = tg.tensor(grads(None, t))
        opt.step()
        opt2.step()
        np.testing.assert_array_equal(p2.numpy(), p.numpy())
    assert opt2.state[p2].keys() == opt.state[p].keys()


def test_state_dict_holds_copies():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = tg.optim.Adam([p], lr=0.1)
    p.grad = tg.tensor([1.0, 1.0])
    opt.step()
    sd = opt.state_dict()
    saved = sd["state"][0]["exp_avg"].copy()
    opt.step()
    np.testing.assert_array_equal(sd["state"][0]["exp_avg"], saved)
    assert sd["state"][0]["step"] == 1
    sd["state"][0]["exp_avg"][:] = 99.0           # the loaded optimizer keeps its own copy
    opt.load_state_dict(sd)
    sd["state"][0]["exp_avg"][:] = -1.0
    assert opt.state[p]["exp_avg"].numpy().tolist() == [99.0, 99.0]


def test_load_state_dict_casts_state_to_the_params_dtype():
    p64 = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = tg.optim.SGD([p64], lr=0.1, momentum=0.9)
    p64.grad = tg.tensor([1.0, 1.0])
    opt.step()
    p32 = tg.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
    opt32 = tg.optim.SGD([p32], lr=0.1, momentum=0.9)
    opt32.load_state_dict(opt.state_dict())
    assert opt32.state[p32]["momentum_buffer"].dtype == np.float32


@pytest.mark.parametrize("change, match", [
    (lambda sd: sd["param_groups"].append({**sd["param_groups"][0], "params": []}),
     "2 parameter groups, this optimizer has 1"),
    (lambda sd: sd["param_groups"][0]["params"].append(7), "parameter group 0 has 3"),
    (lambda sd: sd["state"][0].__setitem__("exp_avg", np.zeros(5)), "has shape \\(5,\\)"),
    (lambda sd: sd["state"].__setitem__(9, {"step": 1}), "parameter 9"),
    (lambda sd: sd["param_groups"][0].__setitem__("lr", -1.0), "invalid lr"),
    (lambda sd: sd.pop("param_groups"), "'state' and 'param_groups'"),
])
def test_load_state_dict_rejects_a_state_dict_that_does_not_fit(change, match):
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = tg.tensor([3.0], requires_grad=True)
    opt = tg.optim.Adam([a, b], lr=0.1)
    a.grad = tg.tensor([1.0, 1.0])
    opt.step()
    sd = opt.state_dict()
    other = tg.optim.Adam([tg.tensor([0.0, 0.0], requires_grad=True),
                           tg.tensor([0.0], requires_grad=True)], lr=0.3)
    change(sd)
    groups, state, text = other.param_groups, other.state, repr(other)
    with pytest.raises(ValueError, match=match) as info:
        other.load_state_dict(sd)
    assert "Adam" in str(info.value)
    assert other.param_groups is groups and other.state is state and not state  # unchanged
    assert repr(other) == text and other.param_groups[0]["lr"] == 0.3


def test_a_state_dict_without_state_loads():
    # A file writer may drop the empty "state" of an optimizer that never stepped.
    p = tg.tensor([1.0], requires_grad=True)
    sd = tg.optim.SGD([p], lr=0.3, momentum=0.5).state_dict()
    assert sd["state"] == {}
    del sd["state"]
    opt = tg.optim.SGD([p], lr=0.1)
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == 0.3 and opt.param_groups[0]["momentum"] == 0.5


# -- errors --------------------------------------------------------------------------------------

def _param():
    return tg.tensor([1.0, 2.0], requires_grad=True)


@pytest.mark.parametrize("make, exc, match", [
    (lambda: tg.optim.SGD([_param()], lr=-0.1), ValueError, "SGD: invalid lr -0.1"),
    (lambda: tg.optim.Adam([_param()], lr=-1e-3), ValueError, "Adam: invalid lr"),
    (lambda: tg.optim.AdamW([_param()], lr=-1.0), ValueError, "AdamW: invalid lr"),
    (lambda: tg.optim.SGD([_param()], lr=float("nan")), ValueError, "invalid lr nan"),
    (lambda: tg.optim.SGD([_param()], lr="fast"), TypeError, "SGD: lr must be a real number"),
    (lambda: tg.optim.SGD([_param()], lr=0.1, momentum=-0.5), ValueError, "invalid momentum"),
    (lambda: tg.optim.SGD([_param()], lr=0.1, weight_decay=-1), ValueError,
     "invalid weight_decay"),
    (lambda: tg.optim.SGD([_param()], lr=0.1, nesterov=True), ValueError,
     "SGD: nesterov=True needs momentum > 0 and dampening == 0"),
    (lambda: tg.optim.SGD([_param()], lr=0.1, momentum=0.9, dampening=0.1, nesterov=True),
     ValueError, "dampening == 0"),
    (lambda: tg.optim.Adam([_param()], betas=(1.0, 0.999)), ValueError,
     "Adam: invalid beta1 1.0"),
    (lambda: tg.optim.Adam([_param()], betas=(0.9, -0.1)), ValueError, "invalid beta2 -0.1"),
    (lambda: tg.optim.AdamW([_param()], betas=(0.9, 1.5)), ValueError, "AdamW: invalid beta2"),
    (lambda: tg.optim.Adam([_param()], betas=0.9), TypeError, "betas must be a pair"),
    (lambda: tg.optim.Adam([_param()], eps=-1e-8), ValueError, "invalid eps"),
    (lambda: tg.optim.Adam([_param()], weight_decay=-0.1), ValueError, "invalid weight_decay"),
    (lambda: tg.optim.SGD([_param()]), ValueError, "SGD: parameter group 0: no value for the "
                                                   "required hyper-parameter 'lr'"),
    (lambda: tg.optim.SGD([], lr=0.1), ValueError, "SGD: got an empty parameter list"),
    (lambda: tg.optim.Adam(iter([])), ValueError, "Adam: got an empty parameter list"),
    (lambda: tg.optim.Adam([{"params": []}]), ValueError, "parameter group 0: got an empty"),
    (lambda: tg.optim.Adam([{"lr": 0.1}]), ValueError, "no 'params' entry"),
    (lambda: tg.optim.SGD(_param(), lr=0.1), TypeError, "SGD: params must be an iterable"),
    (lambda: tg.optim.SGD({_param()}, lr=0.1), TypeError, "a set has no stable order"),
    (lambda: tg.optim.SGD(3, lr=0.1), TypeError, "got int"),
    (lambda: tg.optim.SGD([np.ones(2)], lr=0.1), TypeError,
     "SGD: parameter group 0: parameter 0 is a ndarray, not a tapegrad tensor"),
    (lambda: tg.optim.Adam([_param() * 2.0]), ValueError,
     "Adam: parameter group 0: parameter 0 \\(shape \\(2,\\)\\) is not a leaf tensor"),
    (lambda: tg.optim.Adam([_param(), tg.tensor([1.0])]), ValueError,
     "parameter 1 .*does not require grad"),
    (lambda: tg.optim.SGD([{"params": [_param()]}, _param()], lr=0.1), TypeError,
     "parameter group 1: expected a dict"),
])
def test_bad_arguments_raise_clear_errors(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_a_parameter_listed_twice_is_an_error():
    p = _param()
    with pytest.raises(ValueError, match="SGD: parameter group 0: parameter 1 .*more than once"):
        tg.optim.SGD([p, p], lr=0.1)
    opt = tg.optim.Adam([p])
    with pytest.raises(ValueError, match="Adam: parameter group 1: parameter 0 .*more than once"):
        opt.add_param_group({"params": [p], "lr": 0.5})
    assert len(opt.param_groups) == 1


def test_a_bad_group_hyper_parameter_names_the_group():
    with pytest.raises(ValueError, match="SGD: parameter group 1: invalid lr -2.0"):
        tg.optim.SGD([{"params": [_param()]}, {"params": [_param()], "lr": -2.0}], lr=0.1)


def test_base_optimizer_step_is_abstract():
    opt = optim.Optimizer([_param()], {"lr": 0.1})
    with pytest.raises(NotImplementedError, match="Optimizer.step"):
        opt.step()


def test_repr_lists_the_groups():
    text = repr(tg.optim.SGD([_param()], lr=0.1, momentum=0.9))
    assert text.startswith("SGD (") and "lr: 0.1" in text and "momentum: 0.9" in text


# -- the plugin's public names, docs ------------------------------------------------------------

def test_tg_optim_is_this_module():
    assert tg.optim is optim
    assert {"Optimizer", "SGD", "Adam", "AdamW"} <= set(optim.__all__)


def test_docstring_examples_run():
    result = run_doctests(optim)
    assert result.attempted > 10
    assert result.failed == 0


# -- against torch.optim, when torch happens to be installed --------------------------------------

def _torch_trajectory(torch, name, kw, grads):
    p = torch.tensor(P0, dtype=torch.float64, requires_grad=True)
    opt = getattr(torch.optim, name)([p], **kw)
    out = []
    for t in range(STEPS):
        p.grad = torch.tensor(grads(None, t), dtype=torch.float64)
        opt.step()
        out.append(p.detach().numpy().copy())
    return out


@pytest.mark.needs_torch
@pytest.mark.parametrize("name, kw", [("SGD", kw) for kw in SGD_CASES]
                         + [("Adam", kw) for kw in ADAM_CASES]
                         + [("AdamW", dict(lr=0.01, weight_decay=0.3)),
                            ("AdamW", dict(lr=0.05, weight_decay=0.1, amsgrad=True))], ids=str)
def test_matches_torch_optim_when_torch_is_installed(name, kw):
    torch = pytest.importorskip("torch")
    grads = random_grads(P0.shape, STEPS)
    got, _, _ = run(lambda ps: getattr(tg.optim, name)(ps, **kw), P0, grads, STEPS)
    assert_trajectories_close(got, _torch_trajectory(torch, name, kw, grads))
