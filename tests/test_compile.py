"""tg.compile: replays must be bit-identical to eager (values and gradients), the cache
must key on the whole signature, and everything a replay cannot repeat must either be
recorded (in-place writes, .grad updates, random draws) or refused with a clear error."""

import logging
import warnings

import numpy as np
import pytest
import tapegrad as tg


def _params(seed=0, sizes=(6, 8, 3), dtype=np.float64):
    rng = np.random.default_rng(seed)
    out = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        out.append(tg.tensor(rng.standard_normal((fan_in, fan_out)).astype(dtype), requires_grad=True))
        out.append(tg.tensor(rng.standard_normal(fan_out).astype(dtype), requires_grad=True))
    return out


def _mlp_loss(params, x, y):
    h = x
    for i in range(0, len(params), 2):
        h = h @ params[i] + params[i + 1]
        if i + 2 < len(params):
            h = tg.tanh(h)
    return tg.cross_entropy(h, y)


def _same(a, b):
    a = a.numpy() if isinstance(a, tg.Tensor) else np.asarray(a)
    b = b.numpy() if isinstance(b, tg.Tensor) else np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert np.array_equal(a, b, equal_nan=True), np.max(np.abs(a - b))


def _with_notes(exc):
    """The message and the notes (on Python 3.10, tapegrad puts notes in the message)."""
    return str(exc) + "\n".join(getattr(exc, "__notes__", []))


def _batch(seed, n=5):
    rng = np.random.default_rng(seed)
    return tg.tensor(rng.standard_normal((n, 6))), rng.integers(0, 3, n)


# -- bit-identical to eager -----------------------------------------------------------------

def test_mlp_loss_and_gradients_are_bit_identical_to_eager_on_new_data_each_call():
    eager_params, compiled_params = _params(), _params()
    compiled = tg.compile(lambda x, y: _mlp_loss(compiled_params, x, y))
    for seed in range(4):
        x, y = _batch(seed)
        for p in eager_params + compiled_params:
            p.grad = None
        le = _mlp_loss(eager_params, x, y)
        le.backward()
        lc = compiled(x, y)
        lc.backward()
        _same(lc, le)
        for pe, pc in zip(eager_params, compiled_params):
            _same(pc.grad, pe.grad)
    assert compiled.cache_info() == tg.CompiledFunction.cache_info(compiled)
    assert compiled.cache_info().misses == 1 and compiled.cache_info().hits == 3


def test_argument_gradients_broadcasting_and_several_outputs():
    def f(a, b):
        s = tg.sin(a) * b + b ** 2          # b (3,) broadcasts against a (2, 3)
        return s.sum(), (s * 2.0).mean(axis=0)

    compiled = tg.compile(f)
    rng = np.random.default_rng(1)
    for _ in range(3):
        a_np, b_np = rng.standard_normal((2, 3)), rng.standard_normal(3)
        outs = []
        for fn in (f, compiled):
            a, b = tg.tensor(a_np, requires_grad=True), tg.tensor(b_np, requires_grad=True)
            s, m = fn(a, b)
            (s + (m * tg.tensor([1.0, 2.0, 3.0])).sum()).backward()
            outs.append((s, m, a.grad, b.grad))
        for got, want in zip(outs[1], outs[0]):
            _same(got, want)
    assert isinstance(compiled(tg.ones((2, 3)), tg.ones(3)), tuple)


def test_an_unused_input_gets_no_gradient_and_a_returned_input_passes_gradients():
    @tg.compile
    def f(a, b):
        return a * 3.0, b

    a, b = tg.ones(2, requires_grad=True), tg.ones(2, requires_grad=True)
    for _ in range(2):
        a.grad = b.grad = None
        u, v = f(a, b)
        (u.sum() + (v * 5.0).sum()).backward()
        _same(a.grad, np.full(2, 3.0))
        _same(b.grad, np.full(2, 5.0))
    c = tg.ones(2, requires_grad=True)
    f(c, tg.ones(2))[0].sum().backward()
    _same(c.grad, np.full(2, 3.0))


def test_index_arrays_given_as_arguments_are_read_on_every_call():
    @tg.compile
    def pick(x, idx):
        return (x[idx] * 2.0).sum()

    x = tg.tensor(np.arange(5.0), requires_grad=True)
    for idx in ([0, 1], [4, 4], [2, 3]):
        x.grad = None
        out = pick(x, np.array(idx))
        out.backward()
        assert out.item() == 2.0 * sum(idx)
        want = np.zeros(5)
        np.add.at(want, idx, 2.0)
        _same(x.grad, want)
    assert pick.cache_info().misses == 1


def test_concatenate_and_reshape_replay():
    @tg.compile
    def f(a, b):
        return tg.concatenate([a, b * 2.0]).reshape(2, 3).sum(axis=1)

    for k in range(3):
        a = tg.tensor(np.arange(3.0) + k, requires_grad=True)
        b = tg.tensor(np.arange(3.0) - k, requires_grad=True)
        out = f(a, b)
        out.backward(tg.tensor([1.0, 10.0]))
        _same(out, np.array([a.numpy().sum(), 2 * b.numpy().sum()]))
        _same(b.grad, np.full(3, 20.0))


# -- a whole training step ---------------------------------------------------------------------

def _training_step(params, x, y, lr=0.1):
    for p in params:
        p.grad = None
    loss = _mlp_loss(params, x, y)
    loss.backward()
    with tg.no_grad():
        for p in params:
            p -= lr * p.grad
    return loss


def test_a_whole_training_step_with_backward_and_sgd_inside_matches_eager_bit_for_bit():
    eager, mine = _params(3), _params(3)
    step = tg.compile(lambda x, y: _training_step(mine, x, y))
    for seed in range(5):
        x, y = _batch(seed)
        le = _training_step(eager, x, y)
        lc = step(x, y)
        _same(lc, le)
        for pe, pc in zip(eager, mine):
            _same(pc, pe)
            _same(pc.grad, pe.grad)
    assert step.cache_info().hits == 4


def test_gradients_accumulate_across_compiled_backward_steps_like_eager():
    eager, mine = _params(4), _params(4)
    def accumulate(params, x, y):
        _mlp_loss(params, x, y).backward()   # no zeroing: .grad sums over calls
        return params[0].grad
    step = tg.compile(lambda x, y: accumulate(mine, x, y))
    for seed in range(3):
        x, y = _batch(seed)
        accumulate(eager, x, y)
        step(x, y)
        for pe, pc in zip(eager, mine):
            _same(pc.grad, pe.grad)


@pytest.mark.parametrize("make_opt, replays", [
    # SGD with momentum records twice (no buffers yet, then buffers), then replays.
    (lambda ps: tg.optim.SGD(ps, lr=0.05, momentum=0.9), 4),
    # Adam's bias correction reads its Python step count: it records on every call
    # (correct, not faster; docs/compile.md) unless capturable=True.
    (lambda ps: tg.optim.Adam(ps, lr=0.01), 0),
    (lambda ps: tg.optim.Adam(ps, lr=0.01, capturable=True), 4),
])
def test_an_optimizer_from_tg_optim_inside_the_step(make_opt, replays):
    eager, mine = _params(5), _params(5)
    opt_e, opt_c = make_opt(eager), make_opt(mine)

    def step(params, opt, x, y):
        opt.zero_grad()
        loss = _mlp_loss(params, x, y)
        loss.backward()
        opt.step()
        return loss

    compiled = tg.compile(lambda x, y: step(mine, opt_c, x, y))
    for seed in range(6):
        x, y = _batch(seed)
        _same(compiled(x, y), step(eager, opt_e, x, y))
        for pe, pc in zip(eager, mine):
            _same(pc, pe)
    assert compiled.cache_info().hits == replays
    # one program per state of the optimizer it met (kept, for values that come back),
    # but for the first: it created the optimizer's state, which a replay would not
    assert compiled.cache_info().size == compiled.cache_info().misses - 1


def test_a_value_recorded_under_changes_every_call_warns_once_after_eight_recordings():
    params = _params(7)
    opt = tg.optim.Adam(params, lr=0.01)

    def step(x, y):
        opt.zero_grad()
        _mlp_loss(params, x, y).backward()
        opt.step()

    compiled = tg.compile(step)
    x, y = _batch(0)
    for _ in range(9):                          # the first (it creates the state) is not kept
        compiled(x, y)
    with pytest.warns(tg.CompileWarning, match="more than 8 times.*capturable=True"):
        compiled(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled(x, y)                          # once per compiled function
    assert compiled.cache_info().size == 8 and compiled.cache_info().hits == 0


def test_train_and_eval_mode_each_record_once_and_replay_from_then_on():
    tg.manual_seed(0)
    net = tg.nn.Sequential(tg.nn.Linear(6, 8), tg.nn.Dropout(0.5), tg.nn.Linear(8, 3))
    compiled = tg.compile(lambda x: net(x))
    x = _batch(0)[0]
    for epoch in range(3):
        net.train()
        state = tg.random.get_state()
        got = compiled(x)
        tg.random.set_state(state)
        _same(got, net(x))                      # dropout active, the replay's own mask
        net.eval()
        _same(compiled(x), net(x))              # dropout off: the mode is guarded
        if epoch == 0:
            assert "Module._compiled_state changed from (True, " in compiled.last_explanation
            assert "to (False, " in compiled.last_explanation
    assert compiled.cache_info().misses == 2 and compiled.cache_info().hits == 4


def test_a_shape_that_depends_on_values_runs_eagerly_with_a_warning():
    def f(x):
        y = x[x > 0]                            # as many elements as positive entries
        return (y * tg.ones(y.shape[0])).sum()  # a shape read in Python: baked in

    compiled = tg.compile(f)
    x1 = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    compiled(x1), compiled(x1)
    x2 = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.warns(tg.CompileWarning, match=r"_getitem_kernel.*shape \(3,\).*shape \(2,\)"
                                               r".*depends on the values.*runs eagerly"):
        out = compiled(x2)
    out.backward()
    _same(out, f(tg.tensor([1.0, 2.0, 3.0])))
    _same(x2.grad, np.ones(3))
    x3 = tg.tensor([-1.0, 2.0, 3.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(compiled(x3), f(x3))              # eagerly from now on, quietly


def test_a_value_dependent_shape_after_a_write_raises_instead_of_writing_twice():
    w = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def step(x):
        w.grad = None
        (w * x)[x > 0].sum().backward()
        return w.grad

    compiled = tg.compile(step)
    compiled(tg.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(RuntimeError, match="depends on the values") as info:
        compiled(tg.tensor([1.0, 1.0, 1.0]))
    assert "not rerun eagerly" in _with_notes(info.value)


def test_a_parameter_replaced_by_another_object_records_again():
    # The recording reads the parameter objects it saw; replacing one (to(dtype),
    # m.weight = ...) must not leave the replay reading the old one.
    tg.manual_seed(0)
    net = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Tanh(), tg.nn.Linear(4, 2))
    compiled = tg.compile(lambda x: net(x))
    x = tg.random.randn(5, 3)
    compiled(x), compiled(x)
    net[2].weight = tg.nn.Parameter(tg.zeros((2, 4)))
    _same(compiled(x), net(x))
    net[1] = tg.nn.Sigmoid()
    _same(compiled(x), net(x))
    net.to(dtype=np.float32)
    x32 = x.astype(np.float32)
    _same(compiled(x32), net(x32))
    assert compiled.cache_info().misses == 4
    # a plain attribute that steers forward (Dropout's p) counts too
    drop = tg.nn.Sequential(tg.nn.Linear(3, 4), tg.nn.Dropout(0.5))
    compiled = tg.compile(lambda x: drop(x))
    compiled(x), compiled(x)
    drop[1].p = 0.0
    _same(compiled(x), drop(x))
    drop[1].p = float("0")                      # an equal value again: no new recording
    compiled(x)
    assert compiled.cache_info().misses == 2 and compiled.cache_info().hits == 2


W_GLOBAL = tg.tensor([1.0, 2.0], requires_grad=True)


def test_a_global_or_closed_over_name_rebound_to_another_tensor_records_again():
    global W_GLOBAL

    def step(x):
        loss = (x * W_GLOBAL).sum()
        loss.backward()
        return loss

    compiled = tg.compile(step)
    x = tg.tensor([1.0, 1.0])
    for _ in range(3):                        # plain SGD by rebinding the name
        _same(compiled(x), (x * W_GLOBAL).sum())
        W_GLOBAL = (W_GLOBAL - 0.1 * W_GLOBAL.grad).detach().requires_grad_()
    assert "the name 'W_GLOBAL'" in compiled.last_explanation

    b = tg.tensor([0.5])
    f = tg.compile(lambda x: x + b)
    f(x), f(x)
    b = tg.tensor([5.0])                      # the lambda's closure cell now holds another
    _same(f(x), x + b)
    assert f.cache_info().misses == 2


def test_a_learning_rate_change_records_again():
    eager, mine = _params(6), _params(6)
    opt_e, opt_c = tg.optim.SGD(eager, lr=0.1), tg.optim.SGD(mine, lr=0.1)
    compiled = tg.compile(lambda x, y: _sgd_step(mine, opt_c, x, y))
    for seed in range(4):
        if seed == 2:
            for opt in (opt_e, opt_c):
                opt.param_groups[0]["lr"] = 0.01
        x, y = _batch(seed)
        _same(compiled(x, y), _sgd_step(eager, opt_e, x, y))
        for pe, pc in zip(eager, mine):
            _same(pc, pe)
    assert "a value guarded by" in compiled.last_explanation
    assert "0.01" in compiled.last_explanation


def _sgd_step(params, opt, x, y):
    opt.zero_grad()
    loss = _mlp_loss(params, x, y)
    loss.backward()
    opt.step()
    return loss


# -- what the replay must repeat -----------------------------------------------------------------

def test_a_buffer_created_and_written_inside_starts_fresh_on_every_replay():
    @tg.compile
    def f(x):
        buf = tg.zeros(3)
        buf += x
        buf[0] = 7.0
        return buf * 1.0

    for k in range(3):
        _same(f(tg.tensor([1.0, 2.0, 3.0]) * k), np.array([7.0, 2.0 * k, 3.0 * k]))


def test_a_recording_copies_only_the_constants_it_writes_into():
    import tracemalloc

    table = np.linspace(-1, 1, 1_000_000)          # 8 MB

    def reads(x):
        return x * tg.tensor(table)                # created inside, only read: no copy

    compiled = tg.compile(reads)
    x = tg.ones(1_000_000)
    tracemalloc.start()
    try:
        recorded = compiled(x)                     # the recording: the constant and the
        peak = tracemalloc.get_traced_memory()[1]  # result, 16 MB; no third 8 MB copy
    finally:
        tracemalloc.stop()
    assert peak < 20e6, peak
    _same(recorded, reads(x))
    program = compiled.programs()[0]
    assert program.mutable_constants == ()
    assert any(getattr(v, "size", 0) == 1_000_000 for _, v in program.constants)

    def fills(x):
        buf = tg.zeros(3)
        buf[1] = 5.0                               # written: restored on every replay
        return buf + x

    compiled = tg.compile(fills)
    compiled(tg.ones(3)), compiled(tg.ones(3))
    assert len(compiled.programs()[0].mutable_constants) == 1
    _same(compiled(tg.ones(3)), np.array([1.0, 6.0, 1.0]))


def test_random_draws_are_fresh_on_each_replay_and_follow_the_seed():
    import tapegrad_nn.functional as F

    def f(x):
        return F.dropout(x, p=0.5) * 1.0

    compiled = tg.compile(f)
    x = tg.ones(64)
    tg.manual_seed(0)
    eager = [f(x).numpy() for _ in range(3)]
    tg.manual_seed(0)
    replayed = [compiled(x).numpy() for _ in range(3)]
    for a, b in zip(replayed, eager):
        _same(a, b)
    assert not np.array_equal(replayed[1], replayed[2])


def test_a_checkpointed_segment_with_dropout_reruns_with_the_replays_own_masks():
    # checkpoint saves the generator state before the segment and restores it for the
    # rerun in backward: a replay must save and restore its own state at those points,
    # or the rerun draws other masks than the forward and the gradients are wrong.
    tg.manual_seed(0)
    net = tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Dropout(0.5), tg.nn.Tanh(),
                           tg.nn.Linear(8, 1))
    x = tg.random.randn(5, 4)

    def step(x):
        net.zero_grad()
        tg.checkpoint(net, x).sum().backward()
        return [p.grad for p in net.parameters()]

    compiled = tg.compile(step)
    masks_differ = False
    previous = None
    for _ in range(4):
        state = tg.random.get_state()
        eager = [g.numpy().copy() for g in step(x)]
        tg.random.set_state(state)
        for a, b in zip(compiled(x), eager):
            _same(a, b)
        masks_differ |= previous is not None and not np.array_equal(previous, eager[0])
        previous = eager[0]
    assert compiled.cache_info().hits == 3 and masks_differ
    kinds = [kind for kind, _ in compiled.programs()[0].describe()["forward"]]
    # save before the segment; in backward: save the current state, restore the saved one
    # for the rerun, put the current one back
    assert kinds.count("call") == 4


def test_closed_over_tensors_are_read_afresh_and_a_changed_one_records_again(caplog):
    w = tg.tensor([1.0, 2.0])
    f = tg.compile(lambda x: x * w, explain=True)
    _same(f(tg.ones(2)), [1.0, 2.0])
    with tg.no_grad():
        w *= 3.0
    _same(f(tg.ones(2)), [3.0, 6.0])
    assert f.cache_info().hits == 1
    w.requires_grad = True
    with caplog.at_level(logging.WARNING, logger="tapegrad.compile"):
        out = f(tg.ones(2))
    assert f.cache_info().misses == 2
    assert "closed-over tensor 0 changed" in caplog.text and "requires_grad=True" in caplog.text
    out.sum().backward()
    _same(w.grad, [1.0, 1.0])


# -- the cache ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, reason", [
    (lambda: (tg.ones(3),), "argument 0: shape changed from (2,) to (3,)"),
    (lambda: (tg.ones(2, dtype=np.float32),), "argument 0: dtype changed from float64 to float32"),
    (lambda: (tg.ones(2, requires_grad=True),), "argument 0: requires_grad changed from False to True"),
])
def test_each_part_of_the_signature_records_again_and_explain_says_which(change, reason, caplog):
    f = tg.compile(lambda x: x * 2.0, explain=True)
    f(tg.ones(2))
    with caplog.at_level(logging.WARNING, logger="tapegrad.compile"):
        f(*change())
    assert f.cache_info().misses == 2
    assert reason in caplog.text
    assert f.last_explanation == reason


def test_grad_mode_and_python_values_are_part_of_the_signature():
    f = tg.compile(lambda x, k: x * k)
    x = tg.ones(2, requires_grad=True)
    assert f(x, 2.0).requires_grad
    with tg.no_grad():
        out = f(x, 2.0)
    assert not out.requires_grad
    assert f.last_explanation == "grad mode changed from enabled to disabled"
    _same(f(x, 3.0), [3.0, 3.0])
    assert f.cache_info().misses == 3


def test_lru_eviction_at_capacity():
    f = tg.compile(lambda x: x + 1.0, cache_size=2)
    for n in (1, 2, 1, 3):          # 3 evicts 2, the least recently used
        f(tg.ones(n))
    assert f.cache_info() == (1, 3, 2, 2)
    f(tg.ones(1))
    assert f.cache_info().hits == 2
    f(tg.ones(2))
    assert f.cache_info().misses == 4
    f.cache_clear()
    assert f.cache_info() == (0, 0, 0, 2)


def test_decorator_forms_and_methods():
    @tg.compile(cache_size=8)
    def double(x):
        return x * 2.0

    assert double.cache_info().maxsize == 8 and double.__name__ == "double"

    class Model:
        def __init__(self):
            self.w = tg.tensor([2.0])

        @tg.compile
        def __call__(self, x):
            return x * self.w

    m = Model()
    _same(m(tg.ones(1)), [2.0])
    _same(m(tg.ones(1)), [2.0])


# -- check=True and what is baked in ---------------------------------------------------------------

def test_check_catches_python_branching_on_values():
    def f(x):
        if x.sum().item() > 0:
            return x * 2.0
        return x * -1.0

    compiled = tg.compile(f, check=True)
    compiled(tg.ones(2))
    compiled(tg.ones(2))            # same branch: fine
    with pytest.raises(RuntimeError, match="output 0 of .*differs between the compiled replay"):
        compiled(-tg.ones(2))
    # Without check the branch is silently baked in: documented in docs/compile.md.
    baked = tg.compile(f)
    baked(tg.ones(2))
    _same(baked(-tg.ones(2)), [-2.0, -2.0])


def test_check_compares_gradients_too_and_refuses_side_effects():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    f = tg.compile(lambda x: (tg.tanh(x * w) ** 2).sum(), check=True)
    for _ in range(3):
        f(tg.tensor([0.3, 0.4]))
    step = tg.compile(lambda x: _training_step(_params(), x, np.array([0, 1, 2, 0, 1])), check=True)
    x, _ = _batch(0)
    step(x)
    with pytest.raises(RuntimeError, match="side effects .*apply them twice"):
        step(x)


# -- what is refused --------------------------------------------------------------------------------

def test_modifying_a_saved_input_in_place_before_backward_raises():
    f = tg.compile(lambda x, w: (x * w).sum())
    w = tg.ones(2, requires_grad=True)
    f(tg.ones(2), w)
    x = tg.ones(2)
    out = f(x, w)
    with tg.no_grad():
        x += 1.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        out.backward()


def test_double_backward_through_a_compiled_function_raises():
    f = tg.compile(lambda x: (x ** 3).sum())
    x = tg.ones(2, requires_grad=True)
    f(x)
    out = f(x)
    with pytest.raises(RuntimeError, match="create_graph=True .*not supported"):
        tg.grad(out, x, create_graph=True)


def test_backward_twice_needs_retain_graph():
    f = tg.compile(lambda x: (x * x).sum())
    x = tg.ones(2, requires_grad=True)
    f(x)
    out = f(x)
    out.backward(retain_graph=True)
    out.backward()
    _same(x.grad, [4.0, 4.0])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def test_tg_grad_inside_a_compiled_function():
    @tg.compile
    def penalty(x):
        y = (x ** 3).sum()
        (g,) = tg.grad(y, x)
        return g

    for k in (1.0, 2.0):
        x = tg.tensor([k, -k], requires_grad=True)
        _same(penalty(x), 3 * np.array([k, -k]) ** 2)


@pytest.mark.parametrize("make, exc, pattern", [
    (lambda: tg.compile(3), TypeError, "expected a function, got int"),
    (lambda: tg.compile(lambda x: x, cache_size=0), ValueError, "cache_size must be a positive int"),
    (lambda: tg.compile(lambda x: x)({"a": 1}), TypeError, "cannot use an argument of type dict"),
    (lambda: tg.compile(lambda x: 3.0)(tg.ones(1)), TypeError, "must return a Tensor.*returned float"),
])
def test_bad_inputs(make, exc, pattern):
    with pytest.raises(exc, match=pattern):
        make()


def test_a_compiled_function_called_while_another_records_is_recorded_into_it():
    inner = tg.compile(lambda x: tg.exp(x) * 2.0)
    inner(tg.ones(2))                      # cached: would replay if called alone
    outer = tg.compile(lambda x: inner(x) + 1.0)
    for k in (0.0, 1.0, 2.0):
        _same(outer(tg.full(2, k)), 2.0 * np.exp(np.full(2, k)) + 1.0)
    assert len(outer.programs()[0].forward) == 3      # exp, multiply, add


def test_other_threads_eager_work_stays_out_of_a_recording():
    import threading

    recording, done = threading.Event(), threading.Event()

    def slow(x):
        y = x * 2.0
        recording.set()
        assert done.wait(10)
        return y

    def other():
        assert recording.wait(10)
        a = tg.ones(3)
        for _ in range(5):
            a = tg.sin(a) + 1.0
        done.set()

    compiled = tg.compile(slow)
    thread = threading.Thread(target=other)
    thread.start()
    compiled(tg.ones(2))
    thread.join()
    assert len(compiled.programs()[0].forward) == 1


def test_a_returned_constant_is_a_fresh_copy_and_replay_errors_name_the_function():
    @tg.compile
    def make(x):
        return tg.zeros(2), x * 1.0

    a, _ = make(tg.ones(2))
    b, _ = make(tg.ones(2))
    b += 5.0
    c, _ = make(tg.ones(2))
    _same(c, [0.0, 0.0])

    @tg.compile
    def loss(x, y):
        return tg.cross_entropy(x, y)

    loss(tg.ones((2, 3)), np.array([0, 1]))
    with pytest.raises(IndexError, match="out of range") as info:
        loss(tg.ones((2, 3)), np.array([0, 7]))
    assert "while replaying compiled:loss" in _with_notes(info.value)


def test_hooks_inside_a_recording_make_that_signature_run_eagerly():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    w.register_hook(lambda g: seen.append(g.tolist()))

    def step(x):                          # backward inside: w's hook runs in the recording
        w.grad = None
        (x * w).sum().backward()
        return w.grad * 1.0

    compiled = tg.compile(step)
    with pytest.warns(tg.CompileWarning, match="tensor hook .* runs eagerly"):
        compiled(tg.ones(2))
    for k in (2.0, 3.0):
        _same(compiled(tg.full(2, k)), [k, k])
    assert seen == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]     # every call ran the hook

    # The inputs' own hooks are fine when the backward is outside: they run in it.
    f = tg.compile(lambda x: (x * w).sum())
    seen.clear()
    for k in (1.0, 2.0):
        w.grad = None
        f(tg.full(2, k)).backward()
    assert seen == [[1.0, 1.0], [2.0, 2.0]] and f.cache_info().hits == 1


def test_an_inplace_write_inside_whose_rule_reads_the_old_value_replays_on_the_new_input():
    # Found by the differential fuzzer: the copy of a's old value that the in-place op's
    # rule saves was made outside the recorded kernels, so the recorder took it for a
    # tensor from outside; every replay's backward then reached the *first* call's graph
    # (an error here, a wrong gradient into the first call's x had it been retained).
    def f(x):
        a = x * 2.0
        a.mul_(x)                         # multiply's rule reads a's old value
        return (a * a).sum()

    compiled = tg.compile(f)
    for k in range(3):
        xe = tg.tensor(np.arange(4.0) + k, requires_grad=True)
        xc = tg.tensor(np.arange(4.0) + k, requires_grad=True)
        f(xe).backward()
        compiled(xc).backward()
        np.testing.assert_array_equal(xc.grad.numpy(), xe.grad.numpy())
        np.testing.assert_array_equal(xe.grad.numpy(), 16.0 * xe.detach().numpy() ** 3)
    assert compiled.cache_info().hits == 2


def test_a_step_that_runs_its_own_backward_returns_a_loss_like_eager():
    # Found by the differential fuzzer: replays returned the loss with requires_grad=False
    # and no grad_fn, where eager's loss keeps its (consumed) graph.
    w = tg.tensor([1.0, -2.0], requires_grad=True)

    def step(x):
        w.grad = None
        loss = (x * w).sum()
        loss.backward()
        return loss

    compiled = tg.compile(step)
    for k in range(3):
        eager, replayed = step(tg.full(2, k)), compiled(tg.full(2, k))
        assert (replayed.requires_grad, replayed.grad_fn is None) == (True, False)
        assert (eager.requires_grad, eager.grad_fn is None) == (True, False)
        for loss in (eager, replayed):
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                loss.backward()
    assert compiled.cache_info().hits == 2


class _BranchOnGrad(tg.Function):
    """A backward whose ops depend on the gradient's values (Python control flow)."""

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return (g * 2.0,) if float(g.numpy().sum()) > 0 else (g * 3.0,)


def test_a_function_whose_backward_branches_on_the_gradient_runs_eagerly():
    # Replays used to replay the kernels of the branch the recording took: gradient
    # [-2, -2] for a negative seed where eager gives [-3, -3] (a silent wrong gradient).
    calls = []

    class Logged(_BranchOnGrad):
        @staticmethod
        def backward(ctx, g):
            calls.append(g.tolist())
            return _BranchOnGrad.backward(ctx, g)

    compiled = tg.compile(lambda x: Logged.apply(x))
    for k, sign in enumerate((1.0, -1.0, -1.0)):
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        if k == 0:
            with pytest.warns(tg.CompileWarning, match="backward of tg.Function 'Logged'"):
                y = compiled(x)
        else:
            y = compiled(x)
        y.backward(tg.tensor([sign, sign]))
        assert x.grad.tolist() == ([2.0, 2.0] if sign > 0 else [-3.0, -3.0])
    # the user's backward saw only the real gradients (no placeholder from the recording)
    assert calls == [[1.0, 1.0], [-1.0, -1.0], [-1.0, -1.0]]


def test_a_function_that_declares_its_backward_replayable_is_replayed():
    class Scale(tg.Function):
        replay_backward = True

        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return (g * 2.0,)

    compiled = tg.compile(lambda x: Scale.apply(x).sum())
    for k in range(3):
        x = tg.tensor([1.0, float(k)], requires_grad=True)
        compiled(x).backward()
        assert x.grad.tolist() == [2.0, 2.0]
    assert compiled.cache_info().hits == 2
