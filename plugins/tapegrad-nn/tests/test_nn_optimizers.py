"""tg.optim's RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam and LBFGS follow the published
update rules (PyTorch's documented algorithms) step for step.

The references are written here in NumPy from those formulas, not from tapegrad_nn. The
needs_torch tests at the end compare with torch.optim itself (deselected by default).
"""

import math
import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import run_doctests
from tapegrad_nn import optimizers

STEPS = 10
P0 = np.array([0.5, -1.5, 2.0, 0.1, -0.3])


def random_grads(steps=STEPS, shape=P0.shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(steps)]


# -- NumPy references ---------------------------------------------------------------------

def rmsprop_ref(p, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                centered=False):
    v, m, b, out = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p), []
    for g in grads:
        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g ** 2
        if centered:
            m = alpha * m + (1 - alpha) * g
            avg = np.sqrt(v - m ** 2) + eps
        else:
            avg = np.sqrt(v) + eps
        if momentum > 0:
            b = momentum * b + g / avg
            p = p - lr * b
        else:
            p = p - lr * g / avg
        out.append(p)
    return out


def adagrad_ref(p, grads, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                initial_accumulator_value=0.0, eps=1e-10):
    s, out = np.full_like(p, initial_accumulator_value), []
    for t, g in enumerate(grads, 1):
        g = g + weight_decay * p
        s = s + g ** 2
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s) + eps)
        out.append(p)
    return out


def adadelta_ref(p, grads, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0):
    v, u, out = np.zeros_like(p), np.zeros_like(p), []
    for g in grads:
        g = g + weight_decay * p
        v = rho * v + (1 - rho) * g ** 2
        delta = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta ** 2
        p = p - lr * delta
        out.append(p)
    return out


def adamax_ref(p, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    b1, b2 = betas
    m, u, out = np.zeros_like(p), np.zeros_like(p), []
    for t, g in enumerate(grads, 1):
        g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        u = np.maximum(b2 * u, np.abs(g) + eps)
        p = p - lr / (1 - b1 ** t) * m / u
        out.append(p)
    return out


def nadam_ref(p, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              momentum_decay=4e-3, decoupled_weight_decay=False):
    b1, b2 = betas
    m, v, prod, out = np.zeros_like(p), np.zeros_like(p), 1.0, []
    for t, g in enumerate(grads, 1):
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu1 = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        prod *= mu
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g ** 2
        v_hat = v / (1 - b2 ** t)
        p = p - lr * (1 - mu) / (1 - prod) * g / (np.sqrt(v_hat) + eps) \
            - lr * mu1 / (1 - prod * mu1) * m / (np.sqrt(v_hat) + eps)
        out.append(p)
    return out


def radam_ref(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              decoupled_weight_decay=False):
    b1, b2 = betas
    m, v, out = np.zeros_like(p), np.zeros_like(p), []
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(grads, 1):
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g ** 2
        m_hat = m / (1 - b1 ** t)
        rho = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
        if rho > 5:
            r = math.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
            l_t = math.sqrt(1 - b2 ** t) / (np.sqrt(v) + eps)
            p = p - lr * m_hat * r * l_t
        else:
            p = p - lr * m_hat
        out.append(p)
    return out


CASES = [
    ("RMSprop", rmsprop_ref, dict()),
    ("RMSprop", rmsprop_ref, dict(lr=0.01, alpha=0.9, weight_decay=0.1)),
    ("RMSprop", rmsprop_ref, dict(lr=0.01, momentum=0.9)),
    ("RMSprop", rmsprop_ref, dict(lr=0.01, centered=True, eps=1e-6)),
    ("RMSprop", rmsprop_ref, dict(lr=0.005, centered=True, momentum=0.5, weight_decay=0.2)),
    ("Adagrad", adagrad_ref, dict()),
    ("Adagrad", adagrad_ref, dict(lr=0.1, lr_decay=0.05)),
    ("Adagrad", adagrad_ref, dict(lr=0.1, weight_decay=0.1, initial_accumulator_value=0.5)),
    ("Adadelta", adadelta_ref, dict()),
    ("Adadelta", adadelta_ref, dict(lr=0.5, rho=0.5, eps=1e-4, weight_decay=0.1)),
    ("Adamax", adamax_ref, dict()),
    ("Adamax", adamax_ref, dict(lr=0.05, betas=(0.8, 0.9), weight_decay=0.1)),
    ("NAdam", nadam_ref, dict()),
    ("NAdam", nadam_ref, dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", nadam_ref, dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", radam_ref, dict()),
    ("RAdam", radam_ref, dict(lr=0.01, betas=(0.9, 0.9), weight_decay=0.1)),
    ("RAdam", radam_ref, dict(lr=0.01, betas=(0.8, 0.95), weight_decay=0.1,
                              decoupled_weight_decay=True)),
]
IDS = [f"{n}-{kw}" for n, _, kw in CASES]


def run(name, kw, grads, p0=P0, dtype=np.float64):
    p = tg.tensor(np.asarray(p0, dtype), requires_grad=True)
    opt = getattr(tg.optim, name)([p], **kw)
    out = []
    for g in grads:
        p.grad = tg.tensor(np.asarray(g, dtype))
        opt.step()
        out.append(p.numpy().copy())
    return out, p, opt


@pytest.mark.parametrize("name, ref, kw", CASES, ids=IDS)
def test_trajectory_matches_the_published_rule(name, ref, kw):
    grads = random_grads()
    got, _, _ = run(name, kw, grads)
    for a, b in zip(got, ref(P0.copy(), grads, **kw)):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


def test_radam_switches_to_the_rectified_step_when_rho_exceeds_5():
    # beta2 = 0.9: rho_inf = 19; rho_t = 19 - 2 t 0.9^t / (1 - 0.9^t) is 1.0, 1.947, 2.85,
    # ..., > 5 from t = 6 on. The unrectified steps are lr * m_hat exactly.
    grads = random_grads(8)
    got, _, _ = run("RAdam", dict(lr=0.1, betas=(0.9, 0.9)), grads)
    p, m = P0.copy(), np.zeros_like(P0)
    for t in range(1, 4):
        m = 0.9 * m + 0.1 * grads[t - 1]
        p = p - 0.1 * m / (1 - 0.9 ** t)
        np.testing.assert_allclose(got[t - 1], p, rtol=1e-13)
    rho = [19 - 2 * t * 0.9 ** t / (1 - 0.9 ** t) for t in range(1, 9)]
    assert max(rho[:5]) <= 5 < min(rho[5:])


@pytest.mark.parametrize("name, ref, kw", CASES[::3], ids=IDS[::3])
def test_per_group_options_and_float32(name, ref, kw):
    grads_a, grads_b = random_grads(6, seed=1), random_grads(6, (3, 2), seed=2)
    a0, b0 = P0.astype(np.float32), np.arange(6.0).reshape(3, 2).astype(np.float32) / 5
    a, b = tg.tensor(a0, requires_grad=True), tg.tensor(b0, requires_grad=True)
    other = dict(kw, lr=0.02, weight_decay=0.05)
    opt = getattr(tg.optim, name)([{"params": [a]}, {"params": [b], **other}], **kw)
    for ga, gb in zip(grads_a, grads_b):
        a.grad, b.grad = tg.tensor(ga.astype(np.float32)), tg.tensor(gb.astype(np.float32))
        opt.step()
    assert a.dtype == b.dtype == np.float32
    assert all(v.dtype == np.float32 for st in opt.state.values()
               for v in st.values() if isinstance(v, tg.Tensor))
    np.testing.assert_allclose(a.numpy(), ref(a0.astype(float), grads_a, **kw)[-1], rtol=2e-5,
                               atol=2e-6)
    np.testing.assert_allclose(b.numpy(), ref(b0.astype(float), grads_b, **other)[-1],
                               rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name, ref, kw", CASES, ids=IDS)
def test_state_dict_round_trip_through_a_file_continues_identically(name, ref, kw, tmp_path):
    grads = random_grads()
    _, p, opt = run(name, kw, grads[:4])
    tg.save(opt.state_dict(), tmp_path / "opt.npz")
    q = tg.tensor(p.numpy().copy(), requires_grad=True)
    again = getattr(tg.optim, name)([q])            # defaults: the file brings kw back
    again.load_state_dict(tg.load(tmp_path / "opt.npz"))
    for g in grads[4:]:
        for param, o in ((p, opt), (q, again)):
            param.grad = tg.tensor(g)
            o.step()
        assert np.array_equal(p.numpy(), q.numpy())
    np.testing.assert_allclose(q.numpy(), ref(P0.copy(), grads, **kw)[-1], rtol=1e-11,
                               atol=1e-12)


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"])
def test_eager_and_tg_compile_give_the_same_training(name):
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((8, 4)), rng.integers(0, 3, 8)
    kw = dict(centered=True, momentum=0.5) if name == "RMSprop" else {}

    def make():
        tg.manual_seed(0)
        net = tg.nn.Sequential(tg.nn.Linear(4, 6), tg.nn.Tanh(), tg.nn.Linear(6, 3))
        opt = getattr(tg.optim, name)(net.parameters(), lr=0.01, weight_decay=0.01, **kw)

        def step(x):
            opt.zero_grad()
            loss = tg.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss
        return net, step

    net_e, eager = make()
    net_c, step_c = make()
    compiled = tg.compile(step_c)
    for _ in range(4):
        assert np.array_equal(compiled(tg.tensor(x)).numpy(), eager(tg.tensor(x)).numpy())
    for a, b in zip(net_c.parameters(), net_e.parameters()):
        assert np.array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("make, match", [
    (lambda p: tg.optim.RMSprop(p, lr=-1.0), "invalid lr"),
    (lambda p: tg.optim.RMSprop(p, alpha=1.5), "invalid alpha"),
    (lambda p: tg.optim.RMSprop(p, momentum=-0.1), "invalid momentum"),
    (lambda p: tg.optim.Adagrad(p, lr_decay=-1.0), "invalid lr_decay"),
    (lambda p: tg.optim.Adagrad(p, initial_accumulator_value=-1.0),
     "invalid initial_accumulator_value"),
    (lambda p: tg.optim.Adadelta(p, rho=1.5), "invalid rho"),
    (lambda p: tg.optim.Adamax(p, betas=(1.0, 0.9)), "invalid beta1"),
    (lambda p: tg.optim.NAdam(p, momentum_decay=-1.0), "invalid momentum_decay"),
    (lambda p: tg.optim.RAdam(p, eps=-1.0), "invalid eps"),
    (lambda p: tg.optim.LBFGS(p, line_search_fn="armijo"), "line_search_fn"),
    (lambda p: tg.optim.LBFGS(p, history_size=0), "history_size"),
    (lambda p: tg.optim.LBFGS([{"params": p}, {"params": [tg.tensor([1.0],
                                                                     requires_grad=True)]}]),
     "per-parameter options"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_bad_arguments_raise_clear_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make([tg.tensor([1.0, 2.0], requires_grad=True)])


def test_betas_that_are_not_a_pair_are_a_type_error():
    with pytest.raises(TypeError, match="NAdam: betas must be a pair"):
        tg.optim.NAdam([tg.tensor([1.0], requires_grad=True)], betas=0.9)


# -- LBFGS ---------------------------------------------------------------------------------

def rosen(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def rosen_grad(x):
    return np.array([-2 * (1 - x[0]) - 400 * x[0] * (x[1] - x[0] ** 2),
                     200 * (x[1] - x[0] ** 2)])


def lbfgs_ref(x, steps, lr, max_iter, history_size, tolerance_grad=1e-7,
              tolerance_change=1e-9):
    """L-BFGS without line search in NumPy (Nocedal & Wright algorithm 7.4, the two-loop
    recursion, with PyTorch's first step length and stopping tests); the iterate after
    each step() call of max_iter iterations."""
    max_eval = max_iter * 5 // 4
    S, Y, out = [], [], []
    first, d, t, g_prev, gamma = True, None, None, None, 1.0
    for _ in range(steps):
        f, g = rosen(x), rosen_grad(x)
        evals = 1
        if np.abs(g).max() <= tolerance_grad:
            out.append(x.copy())
            continue
        for k in range(1, max_iter + 1):
            if first:
                d = -g
            else:
                y_k, s_k = g - g_prev, d * t
                if y_k @ s_k > 1e-10:
                    if len(S) == history_size:
                        S.pop(0), Y.pop(0)
                    S.append(s_k), Y.append(y_k)
                    gamma = (s_k @ y_k) / (y_k @ y_k)
                q, alphas = -g, []
                for s_i, y_i in zip(reversed(S), reversed(Y)):
                    a_i = (s_i @ q) / (y_i @ s_i)
                    alphas.append(a_i)
                    q = q - a_i * y_i
                r = gamma * q
                for (s_i, y_i), a_i in zip(zip(S, Y), reversed(alphas)):
                    r = r + s_i * (a_i - (y_i @ r) / (y_i @ s_i))
                d = r
            g_prev, f_prev = g.copy(), f
            t = min(1.0, 1.0 / np.abs(g).sum()) * lr if first else lr
            first = False
            if g @ d > -tolerance_change:
                break
            x = x + t * d
            if k != max_iter:
                f, g = rosen(x), rosen_grad(x)
                evals += 1
            if k == max_iter or evals >= max_eval or np.abs(g).max() <= tolerance_grad:
                break
            if np.abs(d * t).max() <= tolerance_change or abs(f - f_prev) < tolerance_change:
                break
        out.append(x.copy())
    return out


def run_lbfgs(steps, **kw):
    x = tg.tensor([-1.5, 2.0], requires_grad=True)
    opt = tg.optim.LBFGS([x], **kw)
    calls = []

    def closure():
        opt.zero_grad()
        loss = rosen(x)
        loss.backward()
        calls.append(1)
        return loss
    out = []
    for _ in range(steps):
        opt.step(closure)
        out.append(x.numpy().copy())
    return out, x, opt, closure, calls


@pytest.mark.parametrize("kw", [dict(lr=0.5, max_iter=4, history_size=3),
                                dict(lr=1.0, max_iter=20, history_size=100),
                                dict(lr=0.2, max_iter=1, history_size=5)], ids=str)
def test_lbfgs_matches_a_numpy_two_loop_recursion(kw):
    got, _, _, _, _ = run_lbfgs(3, **kw)
    want = lbfgs_ref(np.array([-1.5, 2.0]), 3, **kw)
    # NOTE: 20 iterations on Rosenbrock amplify last-bit differences (dot products summed
    # in another order) to ~1e-6; a wrong recursion is off by far more.
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-12)


def test_lbfgs_with_strong_wolfe_minimises_rosenbrock():
    got, x, opt, _, calls = run_lbfgs(5, line_search_fn="strong_wolfe", tolerance_change=1e-14)
    np.testing.assert_allclose(x.numpy(), [1.0, 1.0], atol=1e-6)
    assert opt.state[x]["func_evals"] == len(calls)
    assert rosen(x).item() < 1e-12


def test_lbfgs_returns_the_loss_before_the_step_and_stops_at_a_stationary_point():
    x = tg.tensor([1.0, 1.0], requires_grad=True)     # the minimum: gradient 0
    opt = tg.optim.LBFGS([x])

    def closure():
        opt.zero_grad()
        loss = rosen(x)
        loss.backward()
        return loss
    assert opt.step(closure).item() == 0.0
    assert opt.state[x]["func_evals"] == 1 and np.array_equal(x.numpy(), [1.0, 1.0])


@pytest.mark.parametrize("ls", [None, "strong_wolfe"])
def test_lbfgs_keeps_float32_parameters_float32(ls):
    x = tg.tensor(np.array([-1.5, 2.0], np.float32), requires_grad=True)
    opt = tg.optim.LBFGS([x], line_search_fn=ls, max_iter=5)

    def closure():
        opt.zero_grad()
        loss = rosen(x)
        loss.backward()
        return loss
    for _ in range(3):
        opt.step(closure)
    assert x.dtype == np.float32 and opt.state[x]["d"].dtype == np.float32
    want = lbfgs_ref(np.array([-1.5, 2.0]), 3, lr=1.0, max_iter=5, history_size=100)[-1]
    if ls is None:
        np.testing.assert_allclose(x.numpy(), want, rtol=1e-3)


def test_lbfgs_needs_a_closure():
    opt = tg.optim.LBFGS([tg.tensor([1.0], requires_grad=True)])
    with pytest.raises(TypeError, match="LBFGS.step needs a closure"):
        opt.step()


def test_lbfgs_over_several_parameters_of_several_shapes():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 6))
    A = A @ A.T + 6 * np.eye(6)
    b = rng.standard_normal(6)
    w, c = tg.tensor(np.zeros((2, 2)), requires_grad=True), tg.tensor(np.zeros(2),
                                                                      requires_grad=True)
    opt = tg.optim.LBFGS([w, c], line_search_fn="strong_wolfe", tolerance_change=1e-14,
                         tolerance_grad=1e-12)

    def closure():
        opt.zero_grad()
        v = tg.concatenate([w.reshape(-1), c])
        loss = 0.5 * (v @ (tg.tensor(A) @ v)) - tg.tensor(b) @ v
        loss.backward()
        return loss
    for _ in range(3):
        opt.step(closure)
    v = np.concatenate([w.numpy().reshape(-1), c.numpy()])
    np.testing.assert_allclose(v, np.linalg.solve(A, b), atol=1e-6)   # loss resolution


@pytest.mark.parametrize("ls", [None, "strong_wolfe"])
def test_lbfgs_state_dict_round_trip_through_a_file(ls, tmp_path):
    _, x, opt, closure, _ = run_lbfgs(2, lr=0.5, max_iter=3, line_search_fn=ls)
    tg.save(opt.state_dict(), tmp_path / "lbfgs.npz")
    y = tg.tensor(x.numpy().copy(), requires_grad=True)
    again = tg.optim.LBFGS([y])
    again.load_state_dict(tg.load(tmp_path / "lbfgs.npz"))
    assert again.param_groups[0]["line_search_fn"] == ls

    def closure_y():
        again.zero_grad()
        loss = rosen(y)
        loss.backward()
        return loss
    for _ in range(2):
        opt.step(closure)
        again.step(closure_y)
        assert np.array_equal(x.numpy(), y.numpy())


def test_lbfgs_inside_tg_compile_runs_eagerly_with_a_warning():
    x = tg.tensor([-1.5, 2.0], requires_grad=True)
    opt = tg.optim.LBFGS([x], max_iter=3)

    def closure():
        opt.zero_grad()
        loss = rosen(x)
        loss.backward()
        return loss

    compiled = tg.compile(lambda: opt.step(closure))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            compiled()
    assert any(issubclass(w.category, tg.CompileWarning) for w in caught)
    want = lbfgs_ref(np.array([-1.5, 2.0]), 2, lr=1.0, max_iter=3, history_size=100)[-1]
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-9)


def test_docstring_examples_run():
    result = run_doctests(optimizers)
    assert result.attempted >= 7 and result.failed == 0


# -- against torch.optim (deselected by default; run with -m needs_torch) -----------------

@pytest.mark.needs_torch
@pytest.mark.parametrize("name, ref, kw", CASES, ids=IDS)
def test_matches_torch_optim(name, ref, kw):
    torch = pytest.importorskip("torch")
    grads = random_grads()
    got, _, _ = run(name, kw, grads)
    # NOTE: NAdam keeps its momentum product in a tensor of torch's default dtype (float32
    # unless set), the rule and tapegrad keep it in float64.
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        p = torch.tensor(P0, requires_grad=True)
        opt = getattr(torch.optim, name)([p], **kw)
        for a, g in zip(got, grads):
            p.grad = torch.tensor(g)
            opt.step()
            np.testing.assert_allclose(a, p.detach().numpy(), rtol=1e-11, atol=1e-13)
    finally:
        torch.set_default_dtype(old)


@pytest.mark.needs_torch
@pytest.mark.parametrize("kw", [dict(lr=0.5, max_iter=6, history_size=3),
                                dict(line_search_fn="strong_wolfe"),
                                dict(line_search_fn="strong_wolfe", history_size=2, max_iter=5,
                                     lr=0.8)], ids=str)
def test_lbfgs_matches_torch(kw):
    torch = pytest.importorskip("torch")
    got, _, _, _, calls = run_lbfgs(4, **kw)
    x = torch.tensor([-1.5, 2.0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([x], **kw)
    n = []

    def closure():
        opt.zero_grad()
        loss = rosen(x)
        loss.backward()
        n.append(1)
        return loss
    for a in got:
        opt.step(closure)
        np.testing.assert_allclose(a, x.detach().numpy(), rtol=1e-9, atol=1e-12)
    assert len(calls) == len(n)
