"""tg.compile against eager, call for call: threads, random generators, hooks, grad mode,
number arguments and errors of the recording backward (issue 13, items 21-27).

Every test runs the same sequence of calls through the eager function and through the
compiled one, from the same starting state, and compares everything the caller can see:
outputs (bit for bit), whether they have a graph, gradients, the generators' state after
each call, hook calls and raised errors."""

import threading
import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _engine


def _bits(t):
    a = np.asarray(t.numpy() if isinstance(t, tg.Tensor) else t)
    return a.dtype, a.shape, a.tobytes()


def _rng_probe():
    """What the generator gives next (and so where it stands), without changing it."""
    state = tg.random.get_state()
    probe = tg.random.rand(4).numpy()
    tg.random.set_state(state)
    return probe.tobytes()


def _calls(fn, arg_list, seed=0, after=None):
    """Call fn on each argument tuple in turn, from tg.manual_seed(seed); what each call
    gave: the output's bits and graph, the generator's position, `after(out)`, or the error."""
    tg.manual_seed(seed)
    seen = []
    for args in arg_list:
        try:
            out = fn(*args)
        except Exception as exc:                         # compared like any result
            seen.append(("raised", type(exc), str(exc)))
            continue
        seen.append((_bits(out), out.requires_grad, out.grad_fn is not None, _rng_probe(),
                     None if after is None else after(out)))
    return seen


def _quietly(fn):
    def run(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tg.CompileWarning)
            return fn(*args)
    return run


# -- 21: another thread never changes what a recording sees --------------------------------

def test_a_backward_in_another_thread_during_a_recording_changes_nothing_it_records(
        monkeypatch):
    # The other thread's backward accumulates into an existing .grad while the main thread
    # records. Its add kernel is made to wait inside that accumulation until the recording
    # is over, which is when the engine used to have swapped the recorder out of its slot.
    add = _engine.ops_table()["add"]
    plain_add = add.kernels["cpu"]
    started, inside, recorded = threading.Event(), threading.Event(), threading.Event()
    recording_thread = threading.get_ident()

    def add_that_waits(a, b):
        if threading.get_ident() != recording_thread and not inside.is_set():
            inside.set()
            recorded.wait(10)
        return plain_add(a, b)

    monkeypatch.setitem(add.kernels, "cpu", add_that_waits)
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    (w * 1.0).sum().backward()                       # .grad exists: the next one adds

    def other():
        assert started.wait(10)
        (w * 3.0).sum().backward()

    def f(x):
        y = x * 3.0
        started.set()
        assert inside.wait(10)                        # the other thread is mid-accumulation
        return y * y

    compiled = tg.compile(f)
    thread = threading.Thread(target=other)
    thread.start()
    try:
        first = compiled(tg.ones(2))
    finally:
        recorded.set()
        thread.join(10)
    monkeypatch.setitem(add.kernels, "cpu", plain_add)
    assert _engine.get_tracer() is None               # no recorder left installed
    assert [k for k, _ in compiled.programs()[0].describe()["forward"]] == ["kernel"] * 2
    assert np.array_equal(w.grad.numpy(), [4.0, 4.0])   # the other thread's backward is whole
    xs = [(tg.full(2, k),) for k in (1.0, 2.0, 3.0, 2.0)]
    assert _calls(compiled, xs) == _calls(f, xs) and _bits(first) == _bits(f(tg.ones(2)))
    assert compiled.cache_info().hits == 4
    assert len(compiled.programs()[0].forward) == 2   # the recording did not grow since


def test_a_compiled_function_first_called_in_another_thread_during_a_recording_runs_there():
    # The recording waits for the other thread's result: waiting for the recording (one
    # recorder at a time) there would deadlock, so that call runs eagerly instead.
    inner = tg.compile(lambda x: tg.exp(x) * 2.0)
    cached = tg.compile(lambda x: x * 5.0)
    cached(tg.ones(3))
    got = {}
    ready = threading.Event()

    def other():
        got["first"] = inner(tg.ones(3))
        got["replayed"] = cached(tg.full(3, 2.0))
        ready.set()

    def outer(x):
        thread = threading.Thread(target=other)
        thread.start()
        assert ready.wait(10)
        thread.join(10)
        return x + 1.0

    compiled = tg.compile(outer)
    compiled(tg.ones(2))
    assert _bits(got["first"]) == _bits(tg.exp(tg.ones(3)) * 2.0)
    assert _bits(got["replayed"]) == _bits(tg.full(3, 10.0))
    assert [k for k, _ in compiled.programs()[0].describe()["forward"]] == ["kernel"]
    assert _bits(inner(tg.ones(3))) == _bits(tg.exp(tg.ones(3)) * 2.0)


# -- 22, 23: random generators -------------------------------------------------------------

def test_manual_seed_inside_a_compiled_function_seeds_again_on_every_replay():
    def f(x):
        tg.manual_seed(3)
        return x + tg.random.rand(2)

    def f_then_draw(x):                 # the generator moves on between calls
        out = f(x)
        tg.random.rand(5)
        return out

    compiled = tg.compile(f)

    def compiled_then_draw(x):
        out = compiled(x)
        tg.random.rand(5)
        return out

    xs = [(tg.full(2, k),) for k in (1.0, 2.0, 3.0)]
    assert _calls(compiled_then_draw, xs) == _calls(f_then_draw, xs)
    assert compiled.cache_info().hits == 2


@pytest.mark.parametrize("seed_inside", [False, True])
def test_a_replay_that_falls_back_to_eager_gives_back_the_numbers_it_drew(seed_inside):
    def f(x):
        if seed_inside:
            tg.manual_seed(1)
        r = tg.random.rand(3)
        return (x * r)[x > 0].sum()       # a shape that depends on x's values

    xs = [(tg.tensor(v),) for v in ([1.0, -1.0, 1.0], [1.0, -1.0, 2.0], [1.0, 1.0, 1.0],
                                    [1.0, -1.0, 1.0], [-1.0, -1.0, 1.0])]
    with pytest.warns(tg.CompileWarning, match="depends on the values"):
        got = _calls(tg.compile(f), xs, seed=5)
    assert got == _calls(f, xs, seed=5)


# -- 24: the recording's own backward calls no hook ----------------------------------------

def test_hooks_inside_never_see_the_placeholder_gradients_of_the_recording_backward():
    log = []

    def f(x, w):
        y = x * w
        y.register_hook(lambda g: log.append(g.numpy().tobytes()))
        z = tg.tanh(y)
        z.register_hook(lambda g: g * 2.0)       # changes the gradient that flows on
        return (z * x).sum()

    def run(fn):
        log.clear()
        seen = []
        for k in (1.0, 2.0, 3.0):
            w = tg.tensor([0.5, -1.5], requires_grad=True)
            out = fn(tg.full(2, k), w)
            out.backward()
            seen.append((_bits(out), _bits(w.grad)))
        return seen, list(log)

    eager = run(f)
    with pytest.warns(tg.CompileWarning, match="tensor hook"):
        compiled = run(tg.compile(f))
    assert compiled == eager and len(eager[1]) == 3


# -- 25: grad mode set inside --------------------------------------------------------------

def test_enable_grad_inside_a_function_called_under_no_grad_gives_outputs_a_graph():
    w = tg.tensor([1.0, -2.0], requires_grad=True)

    def f(x):
        y = x * 2.0                       # under the caller's no_grad: no graph
        with tg.enable_grad():
            return (tg.sin(y * w) * w).sum()

    def under_no_grad(fn):
        def call(x):
            with tg.no_grad():
                out = fn(x)
            w.grad = None
            out.backward()
            return out
        return call

    xs = [(tg.full(2, k),) for k in (0.5, 1.0, 1.5)]
    compiled = tg.compile(f)
    got = _calls(under_no_grad(compiled), xs, after=lambda out: _bits(w.grad))
    assert got == _calls(under_no_grad(f), xs, after=lambda out: _bits(w.grad))
    assert all(requires_grad and has_graph for _, requires_grad, has_graph, _, _ in got)
    assert compiled.cache_info().hits == 2


# -- 26: numbers baked into the program key on their exact value ---------------------------

def _nan(payload):
    return np.frombuffer(np.uint64(0x7FF8000000000000 | payload).tobytes(), np.float64)[0].item()


def test_numbers_that_compare_equal_but_differ_get_programs_of_their_own():
    def f(x, d):
        return x / d

    compiled = _quietly(tg.compile(f))
    args = [(tg.ones(2), d) for d in (0.0, -0.0, 0.0, -0.0, np.float32(0.0),
                                      np.float32(-0.0), _nan(1), _nan(2), complex(1.0, 0.0),
                                      complex(1.0, -0.0))]
    ints = tg.tensor([3, 4])
    args += [(ints, d) for d in (1, 1.0, True, 2, 2.0)]
    with np.errstate(divide="ignore", invalid="ignore"):
        assert _calls(compiled, args) == _calls(f, args)
        assert _bits(compiled(tg.ones(2), -0.0)) == _bits(np.full(2, -np.inf))


def test_a_replay_for_the_same_nan_replays_and_explain_names_the_numbers():
    f = tg.compile(lambda x, d: x + d)
    a, b = _nan(3), _nan(3)
    assert a is not b
    f(tg.ones(1), a), f(tg.ones(1), b)
    assert f.cache_info().hits == 1
    f(tg.ones(1), 0.0), f(tg.ones(1), -0.0)
    assert f.cache_info().misses == 3
    assert f.last_explanation == "argument 1 changed from 0.0 to -0.0"


def test_a_guarded_value_that_turns_from_0_to_minus_0_records_again():
    state = {"k": 0.0}

    def f(x):
        tg.compile_guard(lambda: state["k"])
        return x / state["k"]

    compiled = tg.compile(f)
    with np.errstate(divide="ignore"):
        assert _bits(compiled(tg.ones(1))) == _bits(np.full(1, np.inf))
        state["k"] = -0.0
        assert _bits(compiled(tg.ones(1))) == _bits(np.full(1, -np.inf))
    assert compiled.cache_info().misses == 2


# -- 27: the recording backward's errors belong to the caller's backward --------------------

def test_a_function_whose_backward_would_raise_returns_like_eager_and_raises_in_backward():
    def f(x):
        y = x * 2.0
        z = y * y                          # saves y
        y.add_(1.0)                        # ... and modifies it: z's backward must raise
        return z.sum() + x.sum()

    errors = []

    def call_then_backward(fn):
        def run(x):
            out = fn(x)
            with pytest.raises(RuntimeError, match="modified by an in-place operation") as info:
                out.backward()
            errors.append(str(info.value))
            return out
        return run

    compiled = tg.compile(f)
    xs = [(tg.full(2, k, requires_grad=True),) for k in (1.0, 2.0, 3.0)]
    with pytest.warns(tg.CompileWarning, match="recording its backward raised RuntimeError"):
        compiled(tg.ones(2, requires_grad=True))    # returns, as the eager call does
    eager = _calls(call_then_backward(f), xs, after=lambda out: errors[-1])
    assert _calls(call_then_backward(compiled), xs, after=lambda out: errors[-1]) == eager


def test_grad_mode_switched_for_the_caller_inside_is_switched_by_every_replay():
    def f(x):
        tg.set_grad_enabled(False)         # called plainly: the caller's mode changes
        return x * 2.0

    def call_with_grad_on(fn):
        def call(x):
            tg.set_grad_enabled(True)
            return fn(x)
        return call

    xs = [(tg.full(2, k, requires_grad=True),) for k in (1.0, 2.0, 3.0)]
    try:
        eager = _calls(call_with_grad_on(f), xs, after=lambda out: tg.is_grad_enabled())
        compiled = tg.compile(f)
        got = _calls(call_with_grad_on(compiled), xs, after=lambda out: tg.is_grad_enabled())
    finally:
        tg.set_grad_enabled(True)
    assert got == eager and compiled.cache_info().hits == 2
