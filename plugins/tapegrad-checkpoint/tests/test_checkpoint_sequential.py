"""tg.checkpoint_sequential, the strategies and CheckpointManager."""

import collections

import numpy as np
import pytest
import tapegrad as tg

ck = tg.checkpoint


def _plan(strategy, n):
    return [(s.start, s.stop, s.checkpoint) for s in strategy.plan([(str(i), None)
                                                                    for i in range(n)])]


# -- plans -------------------------------------------------------------------------------

@pytest.mark.parametrize("n,sizes", [(1, [1]), (2, [2]), (3, [2, 1]), (9, [3, 3, 3]),
                                     (10, [4, 3, 3]), (32, [6, 6, 5, 5, 5, 5]),
                                     (64, [8] * 8), (100, [10] * 10)])
def test_sqrt_n_makes_about_sqrt_n_segments_of_about_sqrt_n_layers(n, sizes):
    plan = _plan(ck.SqrtN(), n)
    assert [stop - start for start, stop, _ in plan] == sizes
    assert [c for _, _, c in plan] == [True] * (len(sizes) - 1) + [False]
    assert [c for _, _, c in _plan(ck.SqrtN(checkpoint_last=True), n)] == [True] * len(sizes)


def test_every_k_cuts_k_layers_at_a_time_and_leaves_the_last_plain():
    assert _plan(ck.Every(4), 10) == [(0, 4, True), (4, 8, True), (8, 10, False)]
    assert _plan(ck.Every(4), 8) == [(0, 4, True), (4, 8, False)]
    assert _plan(ck.Every(4), 3) == [(0, 3, False)]
    assert _plan(ck.Every(4, checkpoint_last=True), 8) == [(0, 4, True), (4, 8, True)]
    assert _plan(ck.Every(1), 3) == [(0, 1, True), (1, 2, True), (2, 3, False)]
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="positive integer"):
            ck.Every(bad)


def test_selective_checkpoints_exactly_the_picked_layers():
    net = tg.nn.Sequential(collections.OrderedDict(
        inp=tg.nn.Linear(2, 2), act=tg.nn.Tanh(), mid=tg.nn.Linear(2, 2),
        act2=tg.nn.Tanh(), drop=tg.nn.Dropout(0.1), out=tg.nn.Linear(2, 2)))
    named = list(net.named_children())
    by_type = ck.Selective(tg.nn.Linear).plan(named)
    assert [(s.start, s.stop, s.checkpoint) for s in by_type] == [
        (0, 1, True), (1, 2, False), (2, 3, True), (3, 5, False), (5, 6, True)]
    by_types = ck.Selective((tg.nn.Tanh, tg.nn.Dropout)).plan(named)
    assert [s.checkpoint for s in by_types] == [False, True, False, True, True, False]
    by_name = ck.Selective(lambda name, layer: name.startswith("act")).plan(named)
    assert [(s.start, s.stop) for s in by_name if s.checkpoint] == [(1, 2), (3, 4)]
    by_layer = ck.Selective(lambda layer: isinstance(layer, tg.nn.Dropout)).plan(named)
    assert [(s.start, s.stop, s.checkpoint) for s in by_layer] == [
        (0, 4, False), (4, 5, True), (5, 6, False)]
    with pytest.raises(TypeError, match="layer type"):
        ck.Selective(3)


def test_a_bad_strategy_is_reported_with_what_to_pass():
    x = tg.ones((1, 2))
    with pytest.raises(TypeError, match=r"a class: call it, e\.g\. SqrtN\(\)"):
        tg.checkpoint_sequential([tg.nn.Tanh()], x, strategy=ck.SqrtN)
    with pytest.raises(TypeError, match="strategy must be"):
        tg.checkpoint_sequential([tg.nn.Tanh()], x, strategy="sqrt")

    class Gappy(ck.Strategy):
        def plan(self, layers):
            return [ck.Segment(0, 1, True), ck.Segment(2, len(layers), False)]

    with pytest.raises(ValueError, match="consecutive"):
        tg.checkpoint_sequential([tg.nn.Tanh()] * 3, x, strategy=Gappy())
    with pytest.raises(TypeError, match="layer '1' is not callable"):
        tg.checkpoint_sequential([tg.nn.Tanh(), 3], x)
    with pytest.raises(TypeError, match="layers must be"):
        tg.checkpoint_sequential(tg.nn.Tanh(), x)


def test_a_custom_strategy_is_used_as_given():
    class FirstHalf(ck.Strategy):
        def plan(self, layers):
            half = len(layers) // 2
            return [ck.Segment(0, half, True), ck.Segment(half, len(layers), False)]

    layers = [tg.nn.Linear(3, 3) for _ in range(4)]
    y = tg.checkpoint_sequential(layers, tg.ones((1, 3)), strategy=FirstHalf())
    kinds = []
    node = y.grad_fn
    while node is not None:
        kinds.append(node.name)
        node = next((n for n, _ in node.next_functions if isinstance(n, tg.Node)), None)
    assert kinds == ["linear", "linear", "Checkpoint"]


# -- the 32-layer MLP with Dropout: every strategy equals the plain run bit for bit ----------

def _mlp(n_layers=32, width=24):
    tg.manual_seed(7)
    layers = []
    for _ in range(n_layers):
        layers += [tg.nn.Linear(width, width), tg.nn.Tanh(), tg.nn.Dropout(0.2)]
    return tg.nn.Sequential(*layers)


STRATEGIES = [None, ck.SqrtN(), ck.SqrtN(checkpoint_last=True), ck.Every(4), ck.Every(7),
              ck.Selective(tg.nn.Linear), ck.Selective(lambda name, layer: int(name) % 5 == 0)]


def _run(net, x, strategy, seed=11):
    net.zero_grad()
    x.grad = None
    tg.manual_seed(seed)
    y = tg.checkpoint_sequential(net, x, strategy=strategy)
    (y * y).sum().backward()
    return [y.numpy().copy(), x.grad.numpy().copy()] + [
        p.grad.numpy().copy() for p in net.parameters()]


@pytest.mark.parametrize("strategy", STRATEGIES[1:], ids=repr)
def test_every_strategy_gives_the_plain_runs_float64_bits_on_a_32_layer_mlp_with_dropout(
        strategy):
    net = _mlp()
    tg.manual_seed(5)
    x = tg.random.randn(16, 24, requires_grad=True)
    plain = _run(net, x, None)
    assert len(plain) == 2 + 64 and plain[0].dtype == np.float64
    got = _run(net, x, strategy)
    for a, b in zip(got, plain):
        assert np.array_equal(a, b)
    assert not np.array_equal(_run(net, x, strategy, seed=12)[1], plain[1])   # masks matter


def test_a_plain_loop_and_the_none_strategy_are_the_same_computation():
    net = _mlp(4)
    x = tg.random.randn(3, 24, requires_grad=True)
    y = tg.checkpoint_sequential(net, x, strategy=None)
    assert "Checkpoint" not in tg.memory.saved_bytes(y).nodes


def test_training_steps_with_checkpointing_follow_the_plain_trajectory():
    def train(strategy):
        net = _mlp(8, 12)
        opt = tg.optim.Adam(net.parameters(), lr=1e-2)
        tg.manual_seed(2)
        x, target = tg.random.randn(10, 12), tg.random.randn(10, 12)
        losses = []
        for _ in range(4):
            opt.zero_grad()
            loss = tg.mse_loss(tg.checkpoint_sequential(net, x, strategy=strategy), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.numpy().copy() for p in net.parameters()]

    plain = train(None)
    for strategy in (ck.SqrtN(), ck.Every(3)):
        losses, params = train(strategy)
        assert losses == plain[0]
        assert all(np.array_equal(a, b) for a, b in zip(params, plain[1]))


@pytest.mark.parametrize("container", ["sequential", "modulelist", "list", "dict"])
def test_layers_may_be_a_sequential_a_module_list_a_list_or_a_dict(container):
    tg.manual_seed(0)
    mods = [tg.nn.Linear(3, 3), tg.nn.Tanh(), tg.nn.Linear(3, 3), tg.nn.Tanh()]
    layers = {"sequential": lambda: tg.nn.Sequential(*mods),
              "modulelist": lambda: tg.nn.ModuleList(mods),
              "list": lambda: list(mods),
              "dict": lambda: {f"l{i}": m for i, m in enumerate(mods)}}[container]()
    x = tg.random.randn(2, 3, requires_grad=True)
    tg.checkpoint_sequential(layers, x, strategy=ck.Every(2)).sum().backward()
    got = x.grad.numpy().copy()
    x.grad = None
    h = x
    for m in mods:
        h = m(h)
    h.sum().backward()
    assert np.array_equal(got, x.grad.numpy())


def test_selective_names_come_from_the_container():
    mods = {"enc": tg.nn.Linear(3, 3), "act": tg.nn.Tanh(), "dec": tg.nn.Linear(3, 3)}
    picked = ck.Selective(lambda name, layer: name == "dec")
    y = tg.checkpoint_sequential(mods, tg.ones((1, 3)), strategy=picked)
    assert y.grad_fn.name == "Checkpoint"
    y = tg.checkpoint_sequential(tg.nn.Sequential(collections.OrderedDict(mods)),
                                 tg.ones((1, 3)), strategy=picked)
    assert y.grad_fn.name == "Checkpoint"


def test_under_no_grad_nothing_is_checkpointed():
    net = _mlp(4)
    with tg.no_grad():
        y = tg.checkpoint_sequential(net, tg.ones((2, 24)))
    assert y.grad_fn is None


# -- CheckpointManager -------------------------------------------------------------------

class Deep(tg.nn.Module):
    def __init__(self, n, strategy):
        super().__init__()
        self.layers = tg.nn.Sequential(*[tg.nn.Linear(6, 6) for _ in range(n)])
        self.head = tg.nn.Linear(6, 1)
        self.checkpointing = ck.CheckpointManager(strategy)

    def forward(self, x):
        h = self.checkpointing(self.layers, x)
        return self.checkpointing.checkpoint(lambda t: tg.tanh(self.head(t)), h)


def test_a_manager_inside_forward_checkpoints_and_can_be_switched_off():
    tg.manual_seed(4)
    model = Deep(9, ck.SqrtN())
    x = tg.random.randn(5, 6)
    assert [(s.start, s.stop, s.checkpoint) for s in model.checkpointing.plan(model.layers)] \
        == [(0, 3, True), (3, 6, True), (6, 9, False)]
    y = model(x)
    assert y.grad_fn.name == "Checkpoint"
    held = tg.memory.saved_bytes(y).activations
    y.sum().backward()
    got = [p.grad.numpy().copy() for p in model.parameters()]

    model.zero_grad()
    model.checkpointing.enabled = False
    assert [s.checkpoint for s in model.checkpointing.plan(model.layers)] == [False]
    y = model(x)
    assert y.grad_fn.name == "tanh"
    assert tg.memory.saved_bytes(y).activations > held
    y.sum().backward()
    assert all(np.array_equal(a, p.grad.numpy()) for a, p in zip(got, model.parameters()))
    assert "enabled=False" in repr(model.checkpointing)


def test_a_manager_checks_its_strategy_when_made():
    with pytest.raises(TypeError, match="strategy must be"):
        ck.CheckpointManager(4)
    assert ck.CheckpointManager(None).plan([tg.nn.Tanh()] * 3)[0] == ck.Segment(0, 3, False)
    assert repr(ck.CheckpointManager(ck.Every(2))) == "CheckpointManager(Every(2))"
