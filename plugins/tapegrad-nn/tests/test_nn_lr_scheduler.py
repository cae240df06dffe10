"""tg.optim.lr_scheduler: each schedule's learning rates equal PyTorch's documented closed
forms, computed here; state dicts round-trip through tg.save. The needs_torch tests at the
end compare with torch.optim.lr_scheduler (deselected by default)."""

import math
from bisect import bisect_right

import numpy as np
import pytest
import tapegrad as tg
from tapegrad.testing import run_doctests
from tapegrad_nn import lr_scheduler

S = tg.optim.lr_scheduler
BASE = [0.1, 0.05]
EPOCHS = 25


def make_opt(kind="SGD"):
    a, b = tg.tensor([1.0], requires_grad=True), tg.tensor([2.0, 3.0], requires_grad=True)
    extra = dict(momentum=0.9) if kind == "SGD" else {}
    return getattr(tg.optim, kind)([{"params": [a]}, {"params": [b], "lr": BASE[1]}],
                                   lr=BASE[0], **extra)


def lrs_of(make_sched, epochs=EPOCHS, kind="SGD"):
    """The rates of each epoch: get_last_lr() read before each scheduler.step(), which
    follows optimizer.step() as PyTorch prescribes; also the groups' own "lr"."""
    opt = make_opt(kind)
    sched = make_sched(opt)
    out = []
    for _ in range(epochs):
        assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups]
        out.append(list(sched.get_last_lr()))
        for g in opt.param_groups:
            for p in g["params"]:
                p.grad = tg.ones_like(p)
        opt.step()
        sched.step()
    return np.array(out)


def closed(f, epochs=EPOCHS):
    return np.array([[f(base, e) for base in BASE] for e in range(epochs)])


def warm_restarts(base, e, T_0, T_mult, eta_min):
    T_i, T_cur = T_0, e
    while T_cur >= T_i:
        T_cur -= T_i
        T_i *= T_mult
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * T_cur / T_i)) / 2


def one_cycle(base_index, e, max_lr, total, pct=0.3, div=25.0, final_div=1e4, cos=True,
              three_phase=False):
    m = max_lr[base_index]
    init, low = m / div, m / div / final_div
    anneal = ((lambda a, b, x: b + (a - b) * (1 + math.cos(math.pi * x)) / 2) if cos
              else (lambda a, b, x: a + (b - a) * x))
    up = pct * total - 1
    if three_phase:
        down = 2 * pct * total - 2
        if e <= up:
            return anneal(init, m, e / up)
        if e <= down:
            return anneal(m, init, (e - up) / (down - up))
        return anneal(init, low, (e - down) / (total - 1 - down))
    if e <= up:
        return anneal(init, m, e / up)
    return anneal(m, low, (e - up) / (total - 1 - up))


def one_cycle_momentum(e, total, pct=0.3, cos=True, three_phase=False, lo=0.85, hi=0.95,
                       **_):
    anneal = ((lambda a, b, x: b + (a - b) * (1 + math.cos(math.pi * x)) / 2) if cos
              else (lambda a, b, x: a + (b - a) * x))
    up = pct * total - 1
    if three_phase:
        down = 2 * pct * total - 2
        return (anneal(hi, lo, e / up) if e <= up else
                anneal(lo, hi, (e - up) / (down - up)) if e <= down else hi)
    return anneal(hi, lo, e / up) if e <= up else anneal(lo, hi, (e - up) / (total - 1 - up))


CASES = {
    "StepLR": (lambda o: S.StepLR(o, step_size=3, gamma=0.5),
               lambda b, e: b * 0.5 ** (e // 3)),
    "MultiStepLR": (lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 11], gamma=0.3),
                    lambda b, e: b * 0.3 ** bisect_right([2, 5, 5, 11], e)),
    "ExponentialLR": (lambda o: S.ExponentialLR(o, gamma=0.9), lambda b, e: b * 0.9 ** e),
    "CosineAnnealingLR": (lambda o: S.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
                          lambda b, e: 0.001 + (b - 0.001) * (1 + math.cos(math.pi * e / 7)) / 2),
    "CosineAnnealingWarmRestarts": (
        lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.002),
        lambda b, e: warm_restarts(b, e, 3, 2, 0.002)),
    "CosineAnnealingWarmRestarts-1": (
        lambda o: S.CosineAnnealingWarmRestarts(o, T_0=4),
        lambda b, e: warm_restarts(b, e, 4, 1, 0.0)),
    "LinearLR": (lambda o: S.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6),
                 lambda b, e: b * (0.25 + (0.9 - 0.25) * min(e, 6) / 6)),
    "LambdaLR": (lambda o: S.LambdaLR(o, lambda e: 1 / (1 + e) + 0.01 * e),
                 lambda b, e: b * (1 / (1 + e) + 0.01 * e)),
    "ConstantLR": (lambda o: S.ConstantLR(o, factor=0.2, total_iters=4),
                   lambda b, e: b * (0.2 if e < 4 else 1.0)),
    "PolynomialLR": (lambda o: S.PolynomialLR(o, total_iters=9, power=2.0),
                     lambda b, e: b * (1 - min(e, 9) / 9) ** 2),
    "ChainedScheduler": (lambda o: S.ChainedScheduler([S.ConstantLR(o, factor=0.5, total_iters=3),
                                                       S.ExponentialLR(o, gamma=0.9)]),
                         lambda b, e: b * (0.5 if e < 3 else 1.0) * 0.9 ** e),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rates_equal_the_closed_form(name):
    make, f = CASES[name]
    np.testing.assert_allclose(lrs_of(make), closed(f), rtol=1e-12, atol=1e-15)


def test_lambda_lr_takes_one_function_per_group():
    got = lrs_of(lambda o: S.LambdaLR(o, [lambda e: 0.5 ** e, lambda e: e + 1.0]), 6)
    np.testing.assert_allclose(got, [[0.1 * 0.5 ** e, 0.05 * (e + 1)] for e in range(6)])
    with pytest.raises(ValueError, match="expected 2 lr_lambdas, got 3"):
        S.LambdaLR(make_opt(), [lambda e: 1.0] * 3)


@pytest.mark.parametrize("kw", [dict(), dict(three_phase=True), dict(anneal_strategy="linear"),
                                dict(pct_start=0.5, div_factor=10.0, final_div_factor=100.0)],
                         ids=str)
def test_one_cycle_rates_and_momentum(kw):
    total, max_lr = 20, [1.0, 0.4]
    opt = make_opt("SGD")
    sched = S.OneCycleLR(opt, max_lr=max_lr, total_steps=total, **kw)
    cos = kw.get("anneal_strategy", "cos") == "cos"
    f_kw = dict(pct=kw.get("pct_start", 0.3), div=kw.get("div_factor", 25.0),
                final_div=kw.get("final_div_factor", 1e4), cos=cos,
                three_phase=kw.get("three_phase", False))
    for e in range(total):
        want = [one_cycle(i, e, max_lr, total, **f_kw) for i in range(2)]
        np.testing.assert_allclose(sched.get_last_lr(), want, rtol=1e-12)
        # momentum moves inversely, between max_momentum 0.95 and base_momentum 0.85
        assert opt.param_groups[1]["momentum"] == pytest.approx(
            one_cycle_momentum(e, total, **f_kw), rel=1e-12)
        opt.step()
        sched.step()
    with pytest.raises(ValueError, match="tried to step 21 times"):
        sched.step()


def test_one_cycle_cycles_adams_beta1_from_max_to_base_momentum():
    opt = make_opt("Adam")
    sched = S.OneCycleLR(opt, max_lr=0.01, total_steps=10, pct_start=0.5, anneal_strategy="linear")
    beta1 = []
    for _ in range(10):
        beta1.append(opt.param_groups[0]["betas"][0])
        assert opt.param_groups[0]["betas"][1] == 0.999
        opt.step()
        sched.step()
    up = 0.5 * 10 - 1          # phase 1 ends at step 4: 0.95 -> 0.85, then back to 0.95
    want = [0.95 + (0.85 - 0.95) * e / up if e <= up else
            0.85 + (0.95 - 0.85) * (e - up) / (9 - up) for e in range(10)]
    np.testing.assert_allclose(beta1, want, rtol=1e-12)
    with pytest.raises(ValueError, match="needs an optimizer with momentum or betas"):
        S.OneCycleLR(tg.optim.Adagrad([tg.tensor([1.0], requires_grad=True)]), max_lr=0.1,
                     total_steps=5)


def test_reduce_lr_on_plateau():
    opt = make_opt()
    sched = S.ReduceLROnPlateau(opt, patience=2, factor=0.5, cooldown=1, min_lr=[0.01, 0.02])
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85]
    got = []
    for m in metrics:
        sched.step(tg.tensor(m))          # a 0-d tensor is accepted, as a number
        got.append(sched.get_last_lr())
    # after the best 0.9: bad epochs 1, 2, 3 > patience -> reduce at the 5th metric; the
    # cooldown epoch counts nothing; 0.8 is best; bad 1, 2, 3 -> reduce at the 10th (the
    # second group stops at its min_lr 0.02); cooldown; bad 1, 2, 3 -> reduce at the 14th
    want = ([BASE] * 4 + [[0.05, 0.025]] * 5 + [[0.025, 0.02]] * 4 + [[0.0125, 0.02]])
    np.testing.assert_allclose(got, want)
    assert sched.best == 0.8 and sched.last_epoch == len(metrics)


@pytest.mark.parametrize("mode, threshold_mode, seq, reduced", [
    ("min", "rel", [1.0, 0.99995, 0.99995], True),     # not below 1 * (1 - 1e-4): 2 bad
    ("min", "abs", [1.0, 0.9998, 0.9996], False),      # each below best - 1e-4
    ("max", "rel", [1.0, 1.0002, 1.0004], False),
    ("max", "abs", [1.0, 1.00005, 1.00009], True),
])
def test_plateau_modes(mode, threshold_mode, seq, reduced):
    opt = make_opt()
    sched = S.ReduceLROnPlateau(opt, mode=mode, threshold_mode=threshold_mode, patience=1)
    for m in seq:
        sched.step(m)
    assert (sched.get_last_lr()[0] < BASE[0]) == reduced


def test_sequential_lr():
    def make(o):
        return S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=3),
                                  S.ExponentialLR(o, gamma=0.8),
                                  S.CosineAnnealingLR(o, T_max=4)], milestones=[4, 8])

    def f(b, e):
        if e < 4:
            return b * (0.1 + 0.9 * min(e, 3) / 3)
        if e < 8:
            return b * 0.8 ** (e - 4)
        return b * (1 + math.cos(math.pi * (e - 8) / 4)) / 2
    np.testing.assert_allclose(lrs_of(make, 15), closed(f, 15), rtol=1e-12, atol=1e-15)


def test_two_schedulers_on_one_optimizer_chain():
    def make(o):
        a, b = S.StepLR(o, step_size=2, gamma=0.5), S.ExponentialLR(o, gamma=0.9)

        class Both:
            def get_last_lr(self):
                return b.get_last_lr()

            def step(self):
                a.step()
                b.step()
        return Both()
    np.testing.assert_allclose(lrs_of(make, 8),
                               closed(lambda base, e: base * 0.5 ** (e // 2) * 0.9 ** e, 8),
                               rtol=1e-12)


def test_step_with_an_epoch_uses_the_closed_form():
    opt = make_opt()
    sched = S.StepLR(opt, step_size=3, gamma=0.5)
    sched.step(7)
    assert sched.last_epoch == 7
    np.testing.assert_allclose(sched.get_last_lr(), [b * 0.25 for b in BASE])


def test_the_rates_drive_the_optimizer():
    w = tg.tensor([1.0], requires_grad=True)
    opt = tg.optim.SGD([w], lr=1.0)
    sched = S.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        w.grad = tg.tensor([1.0])
        opt.step()
        sched.step()
    assert w.item() == 1.0 - (1.0 + 0.5 + 0.25)


def test_a_compiled_training_step_follows_the_schedule():
    # the rate is a hyper-parameter guarded by tg.compile: a new rate records again
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((6, 3)), rng.integers(0, 2, 6)

    def make():
        tg.manual_seed(0)
        net = tg.nn.Linear(3, 2)
        opt = tg.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
        sched = S.StepLR(opt, step_size=2, gamma=0.1)

        def step(x):
            opt.zero_grad()
            loss = tg.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss
        return net, step, sched

    net_e, eager, sched_e = make()
    net_c, step_c, sched_c = make()
    compiled = tg.compile(step_c)
    for _ in range(6):
        assert np.array_equal(compiled(tg.tensor(x)).numpy(), eager(tg.tensor(x)).numpy())
        sched_e.step(), sched_c.step()
    assert np.array_equal(net_c.weight.numpy(), net_e.weight.numpy())


def test_resuming_needs_initial_lr():
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(make_opt(), step_size=2, last_epoch=3)


STATEFUL = dict(CASES)
STATEFUL["OneCycleLR"] = (lambda o: S.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=30), None)
STATEFUL["SequentialLR"] = (lambda o: S.SequentialLR(
    o, [S.LinearLR(o, start_factor=0.5, total_iters=2),
        S.MultiStepLR(o, milestones=[3, 6])], milestones=[5]), None)


@pytest.mark.parametrize("name", list(STATEFUL))
def test_state_dict_round_trip_through_a_file(name, tmp_path):
    make = STATEFUL[name][0]
    opt = make_opt()
    sched = make(opt)
    for _ in range(7):
        opt.step()
        sched.step()
    tg.save({"opt": opt.state_dict(), "sched": sched.state_dict()}, tmp_path / "ck.npz")
    loaded = tg.load(tmp_path / "ck.npz")
    opt2 = make_opt()
    sched2 = make(opt2)
    opt2.load_state_dict(loaded["opt"])
    sched2.load_state_dict(loaded["sched"])
    assert sched2.get_last_lr() == sched.get_last_lr()
    for _ in range(10):
        opt.step(), opt2.step()
        sched.step(), sched2.step()
        assert sched2.get_last_lr() == sched.get_last_lr()
        assert [g["lr"] for g in opt2.param_groups] == [g["lr"] for g in opt.param_groups]


def test_plateau_state_dict_round_trip(tmp_path):
    opt = make_opt()
    sched = S.ReduceLROnPlateau(opt, patience=1, cooldown=2)
    for m in [1.0, 1.0, 1.0]:
        sched.step(m)
    tg.save(sched.state_dict(), tmp_path / "s.npz")
    again = S.ReduceLROnPlateau(make_opt(), patience=7)
    again.load_state_dict(tg.load(tmp_path / "s.npz"))
    assert (again.patience, again.cooldown_counter, again.best) == (1, 2, 1.0)


@pytest.mark.parametrize("make, exc, match", [
    (lambda o: S.LinearLR(o, start_factor=0.0), ValueError, "start_factor"),
    (lambda o: S.LinearLR(o, end_factor=1.5), ValueError, "end_factor"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=0), ValueError, "T_0"),
    (lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0), ValueError, "T_mult"),
    (lambda o: S.OneCycleLR(o, max_lr=1.0), ValueError, "total_steps"),
    (lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=10, pct_start=1), ValueError,
     "pct_start"),
    (lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=10, anneal_strategy="exp"), ValueError,
     "anneal_strategy"),
    (lambda o: S.OneCycleLR(o, max_lr=[1.0], total_steps=10), ValueError, "one per parameter"),
    (lambda o: S.ReduceLROnPlateau(o, factor=1.0), ValueError, "factor"),
    (lambda o: S.ReduceLROnPlateau(o, mode="low"), ValueError, "mode"),
    (lambda o: S.ReduceLROnPlateau(o, threshold_mode="pct"), ValueError, "threshold_mode"),
    (lambda o: S.SequentialLR(o, [S.StepLR(o, 2)], milestones=[3]), ValueError, "milestones"),
    (lambda o: S.SequentialLR(o, [S.StepLR(make_opt(), 2), S.StepLR(o, 2)], milestones=[3]),
     ValueError, "another optimizer"),
    (lambda o: S.SequentialLR(o, [S.ReduceLROnPlateau(o), S.StepLR(o, 2)], milestones=[3]),
     ValueError, "ReduceLROnPlateau"),
    (lambda o: S.StepLR("not an optimizer", 2), TypeError, "not a tg.optim optimizer"),
    (lambda o: S.ConstantLR(o, factor=1.5), ValueError, "factor"),
    (lambda o: S.ChainedScheduler([]), ValueError, "at least one scheduler"),
    (lambda o: S.ChainedScheduler([S.StepLR(o, 2), S.StepLR(make_opt(), 2)]), ValueError,
     "another optimizer"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_bad_arguments(make, exc, match):
    with pytest.raises(exc, match=match):
        make(make_opt())


def test_docstring_examples_run():
    result = run_doctests(lr_scheduler)
    assert result.attempted >= 5 and result.failed == 0


# -- against torch.optim.lr_scheduler (deselected by default) ------------------------------

TORCH_CASES = {
    "StepLR": dict(step_size=3, gamma=0.5),
    "MultiStepLR": dict(milestones=[2, 5, 5, 11], gamma=0.3),
    "ExponentialLR": dict(gamma=0.9),
    "CosineAnnealingLR": dict(T_max=7, eta_min=0.001),
    "CosineAnnealingWarmRestarts": dict(T_0=3, T_mult=2, eta_min=0.002),
    "OneCycleLR": dict(max_lr=[1.0, 0.5], total_steps=EPOCHS),
    "OneCycleLR-3": dict(max_lr=1.0, total_steps=EPOCHS, three_phase=True,
                         anneal_strategy="linear"),
    "LinearLR": dict(start_factor=0.25, end_factor=0.9, total_iters=6),
    "LambdaLR": dict(lr_lambda=lambda e: 0.95 ** e + 0.01 * e),
    "ConstantLR": dict(factor=0.2, total_iters=4),
    "PolynomialLR": dict(total_iters=9, power=2.0),
}


def _torch_opt(torch, kind):
    a, b = torch.zeros(1, requires_grad=True), torch.zeros(2, requires_grad=True)
    extra = dict(momentum=0.9) if kind == "SGD" else {}
    return getattr(torch.optim, kind)([{"params": [a]}, {"params": [b], "lr": BASE[1]}],
                                      lr=BASE[0], **extra)


@pytest.mark.needs_torch
@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("name", list(TORCH_CASES))
def test_matches_torch(name, kind):
    torch = pytest.importorskip("torch")
    cls = name.split("-")[0]
    kw = TORCH_CASES[name]
    epochs = EPOCHS - 1 if cls == "OneCycleLR" else EPOCHS
    ours, theirs = make_opt(kind), _torch_opt(torch, kind)
    s1, s2 = getattr(S, cls)(ours, **kw), getattr(torch.optim.lr_scheduler, cls)(theirs, **kw)
    key = "momentum" if kind == "SGD" else "betas"
    for _ in range(epochs):
        assert s1.get_last_lr() == pytest.approx(s2.get_last_lr(), rel=1e-14)
        assert [g[key] for g in ours.param_groups] == [g[key] for g in theirs.param_groups]
        ours.step(), theirs.step()
        s1.step(), s2.step()


@pytest.mark.needs_torch
def test_plateau_and_sequential_match_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = make_opt(), _torch_opt(torch, "SGD")
    s1 = S.ReduceLROnPlateau(ours, patience=2, cooldown=1, factor=0.5, min_lr=[0.01, 0.02])
    s2 = torch.optim.lr_scheduler.ReduceLROnPlateau(theirs, patience=2, cooldown=1, factor=0.5,
                                                    min_lr=[0.01, 0.02])
    for m in [1, 0.9, 0.95, 0.95, 0.95, 0.95, 0.8] + [0.85] * 10:
        s1.step(m), s2.step(m)
        assert s1.get_last_lr() == s2.get_last_lr()

    def seq(lib, o):
        L = lib.lr_scheduler if lib is not S else S
        return L.SequentialLR(o, [L.LinearLR(o, start_factor=0.1, total_iters=3),
                                  L.ExponentialLR(o, gamma=0.8),
                                  L.CosineAnnealingLR(o, T_max=4)], milestones=[4, 8])
    ours, theirs = make_opt(), _torch_opt(torch, "SGD")
    s1, s2 = seq(S, ours), seq(torch.optim, theirs)
    for _ in range(15):
        assert s1.get_last_lr() == pytest.approx(s2.get_last_lr(), rel=1e-14)
        ours.step(), theirs.step()
        s1.step(), s2.step()


@pytest.mark.needs_torch
def test_chained_and_constant_in_sequence_match_torch():
    torch = pytest.importorskip("torch")

    builds = [lambda L, o: L.ChainedScheduler([L.ConstantLR(o, factor=0.5, total_iters=3),
                                               L.ExponentialLR(o, gamma=0.9)]),
              lambda L, o: L.SequentialLR(o, [L.ConstantLR(o, factor=0.1, total_iters=2),
                                              L.PolynomialLR(o, total_iters=6, power=0.5)],
                                          milestones=[3])]
    for build in builds:
        ours, theirs = make_opt(), _torch_opt(torch, "SGD")
        s1, s2 = build(S, ours), build(torch.optim.lr_scheduler, theirs)
        for _ in range(12):
            assert s1.get_last_lr() == pytest.approx(s2.get_last_lr(), rel=1e-14)
            ours.step(), theirs.step()
            s1.step(), s2.step()
