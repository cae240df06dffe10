"""Fused replay (tg.compile, fuse=True): runs of elementwise ufunc kernels replayed through
NumPy's own inner loops must give exactly the bits eager gives, forward and backward.

The reference is always the eager call (NumPy's ufuncs called one by one) and the
unfused replay (fuse=False); values are compared by their bytes, so -0.0 and NaN payloads
count. Each test also checks that fused steps really ran (FusedKernel.runs / fused_runs),
so a fusion that silently stops happening fails here rather than passing unfused.
"""

import importlib.util
import pathlib
import warnings

import numpy as np
import pytest
import tapegrad as tg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tapegrad import _fuse

FLOATS = (np.float32, np.float64)
# Around the block size (1024 elements), a 0-d and 1-element case, 2-D ones.
SHAPES = ((), (1,), (7,), (16,), (1023,), (1024,), (1025,), (2500,), (3, 5), (40, 64))
SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, 1e300, -1.0, 1.0,
                    0.5, -0.5, 2.0, 3.0, 1e-8, 700.0])


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.dtype, a.shape, a.tobytes()


def _values(rng, shape, dtype, special=True):
    x = rng.standard_normal(shape) * 3
    if special and x.size:
        flat = x.reshape(-1)
        k = min(flat.size, SPECIAL.size)
        where = rng.choice(flat.size, size=k, replace=False)
        flat[where] = SPECIAL[:k]
    with np.errstate(over="ignore"):          # 1e300 in float32: inf, on purpose
        return np.asarray(x, dtype=dtype)


def _fused_steps(compiled):
    return [st for p in compiled.programs() for run in (p.forward_run, p.backward_run or [])
            for st in run if st.describe()[0] == "fused"]


def _runs(compiled):
    return sum(st.fn.runs for st in _fused_steps(compiled))


# -- every fusible ufunc, bit for bit against the ufunc call ------------------------------

UNARY = sorted((u for u in _fuse.FUSIBLE if u.nin == 1), key=lambda u: u.__name__)
BINARY = sorted((u for u in _fuse.FUSIBLE if u.nin == 2), key=lambda u: u.__name__)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("ufunc", UNARY + BINARY, ids=lambda u: u.__name__)
def test_every_fusible_ufunc_gives_the_bits_of_its_ufunc_call(ufunc, dtype):
    """Straight to a FusedKernel (the plugins register fewer ufuncs than FUSIBLE holds):
    its result is compared to calling NumPy directly, on every shape (a broadcast scalar,
    sizes around a block, NaN/inf/-0.0/subnormal inputs)."""
    rng = np.random.default_rng(sum(map(ord, ufunc.__name__)))
    # (power, say, takes a fast path for a scalar exponent of 0.5, 2, -1, 0 or 1)
    scalars = [np.asarray(v, dtype=dtype) for v in (0.5, 2.0, -1.0, 0.0, 1.0, 3.0, -0.7)]
    for shape, s in [(shape, s) for shape in SHAPES for s in scalars[:2]] + \
            [((16,), s) for s in scalars[2:]] + [((), s) for s in scalars[2:]] + \
            [((5,), s.reshape(1)) for s in scalars] + [((), np.asarray(np.nan, dtype))]:
        x = _values(rng, shape, dtype)
        y = _values(rng, shape, dtype)
        with np.errstate(all="ignore"):
            if ufunc.nin == 1:
                expect = ufunc(ufunc(x) * s)
            else:
                expect = ufunc(ufunc(x, y), s)
            kernel = _fuse.FusedKernel(
                [(ufunc, (0, 1) if ufunc.nin == 2 else (0,), 3),
                 (np.multiply, (3, 2), 4), (ufunc, (4,), 5)] if ufunc.nin == 1 else
                [(ufunc, (0, 1), 3), (ufunc, (3, 2), 5)],
                np.dtype(dtype).num, tuple(np.broadcast_shapes(x.shape, y.shape)),
                {0: x.size, 1: y.size, 2: 1}, {5})
            got = _run_kernel(kernel, {0: x, 1: y, 2: s})
        assert got is not None, f"{ufunc.__name__} {shape}: the fused run fell back"
        assert _bits(got) == _bits(expect), f"{ufunc.__name__} on {np.dtype(dtype)} {shape}"


def _run_kernel(kernel, inputs):
    """Run a FusedKernel built by hand on slots 0..5; its result (slot 5), or None when
    it handed the run back."""
    slots = [inputs.get(k) for k in range(6)]
    return slots[5] if kernel.try_run(slots) else None


def test_the_loop_picked_is_the_one_numpy_resolves():
    for ufunc in UNARY + BINARY:
        for dtype in FLOATS:
            dt = np.dtype(dtype)
            index = _fuse.loop_index(ufunc, dt.num)
            assert index >= 0, ufunc.__name__
            assert ufunc.types[index] == (dt.char * ufunc.nin) + "->" + dt.char
            assert ufunc.resolve_dtypes((dt,) * ufunc.nin + (None,)) == (dt,) * (ufunc.nin + 1)
    # integer and bool loops are not fused (not in FUSIBLE_TYPES), float16 neither
    assert np.dtype(np.float16).num not in _fuse.FUSIBLE_TYPES


# -- random chains through tg ops: forward and backward, eager vs fused vs unfused ---------

OPS = {
    "sin": (1, tg.sin), "cos": (1, tg.cos), "tanh": (1, tg.tanh), "exp": (1, tg.exp),
    "log": (1, tg.log), "sqrt": (1, tg.sqrt), "neg": (1, lambda a: -a),
    "abs": (1, abs), "square": (1, lambda a: a * a), "sigmoid": (1, tg.sigmoid),
    "add": (2, lambda a, b: a + b), "sub": (2, lambda a, b: a - b),
    "mul": (2, lambda a, b: a * b), "div": (2, lambda a, b: a / b),
    "max": (2, tg.maximum), "min": (2, tg.minimum), "pow": (2, lambda a, b: abs(a) ** b),
    "scale": (1, lambda a: a * 1.5), "shift": (1, lambda a: a - 0.25),
    "rdiv": (1, lambda a: 2.0 / a),
}

chain = st.lists(st.tuples(st.sampled_from(sorted(OPS)), st.integers(0, 7), st.integers(0, 7)),
                 min_size=2, max_size=24)


def _make(ops, row):
    def f(x, w):
        regs = [x, w if not row else x * 1.0]
        for name, i, j in ops:
            nin, fn = OPS[name]
            a = regs[i % len(regs)]
            regs.append(fn(a) if nin == 1 else fn(a, regs[j % len(regs)]))
        out = regs[-1]
        if row:
            out = out + w            # a row broadcast ends the chain (not fused)
        return out.sum() + (regs[-2] * 0.5).sum()
    return f


def _grads(f, x0, w0):
    x = tg.tensor(x0, requires_grad=True)
    w = tg.tensor(w0, requires_grad=True)
    loss = f(x, w)
    loss.backward()
    return tuple(None if t is None else _bits(t.numpy()) for t in (loss, x.grad, w.grad))


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(ops=chain, dtype=st.sampled_from(FLOATS), shape=st.sampled_from(((), (1,), (16,),
       (3, 4), (1100,))), row=st.booleans(), special=st.booleans(), seed=st.integers(0, 9))
def test_random_chains_replay_bit_for_bit_fused(ops, dtype, shape, row, special, seed):
    rng = np.random.default_rng(seed)
    x0 = _values(rng, shape, dtype, special)
    w0 = _values(rng, shape[-1:] if row else shape, dtype, special)
    f = _make(ops, row)
    fused, unfused = tg.compile(f), tg.compile(f, fuse=False)
    with np.errstate(all="ignore"):
        eager = _grads(f, x0, w0)
        for _ in range(3):
            assert _grads(fused, x0, w0) == eager
            assert _grads(unfused, x0, w0) == eager
    assert not _fused_steps(unfused)


def test_w1_like_chain_fuses_forward_and_backward_and_runs_fused():
    def f(x):
        for _ in range(50):
            x = tg.sin(x) * 1.002 + 0.01
            x = tg.tanh(x) - 0.01
        return x.sum()
    cf = tg.compile(f)
    x0 = np.random.default_rng(0).uniform(-0.1, 0.1, 16)
    eager = None
    for k in range(3):
        for fn in (f, cf):
            x = tg.tensor(x0, requires_grad=True)
            loss = fn(x)
            loss.backward()
            got = (_bits(loss.numpy()), _bits(x.grad.numpy()))
            eager = got if fn is f and k == 0 else eager
            assert got == eager
    desc = cf.programs()[0].describe(fused=True)
    assert [k for k, _ in desc["forward"]] == ["fused", "kernel"]      # sum stays a kernel
    assert "fused" in [k for k, _ in desc["backward"]]
    recorded = cf.programs()[0].describe()
    # every kernel but sum (forward) and broadcast_to (the seed, backward) is fused
    assert cf.programs()[0].fused_counts() == (
        2, len(recorded["forward"]) - 1 + len(recorded["backward"]) - 1)
    assert _runs(cf) == 4 and all(st.fn.fallbacks == 0 for st in _fused_steps(cf))
    # describe() without fused=True lists the recorded kernels, one by one
    assert len(cf.programs()[0].describe()["forward"]) == 251


# -- layouts, in-place writes, floating-point flags ---------------------------------------

@pytest.mark.parametrize("make", [
    lambda a: a[::2],                              # one axis, stride 2: fused
    lambda a: np.broadcast_to(a[:1], a[::2].shape),  # stride 0: fused
    lambda a: a[::-2],                             # a negative stride: unfused run
    lambda a: a.reshape(8, 2).T,                   # 2-D non-contiguous: unfused run
], ids=["stride2", "stride0", "negative", "transposed"])
def test_views_as_inputs_give_eager_bits(make):
    base = np.random.default_rng(3).standard_normal(16)

    def f(x):
        return tg.tanh(tg.sin(x) * 3.0 + x)
    cf = tg.compile(f)
    for k in range(3):
        view = make(base + k)
        assert _bits(cf(tg.tensor(view)).numpy()) == _bits(f(tg.tensor(view)).numpy())
        assert _bits(cf(view).numpy()) == _bits(f(view).numpy())     # an ndarray argument


def test_a_non_contiguous_argument_runs_the_recorded_steps():
    def f(x):
        return tg.exp(x * 2.0) + x
    cf = tg.compile(f)
    a = np.arange(12.0).reshape(3, 4)
    cf(tg.tensor(a.T.copy()))                       # records on a contiguous array
    out = cf(tg.tensor(a.T))                        # same signature, transposed layout
    assert _bits(out.numpy()) == _bits(f(tg.tensor(a.T)).numpy())
    (st,) = _fused_steps(cf)
    assert st.fn.fallbacks == 1


def test_in_place_writes_between_fused_runs():
    def f(x, w):
        y = tg.sin(x) * 2.0 + w
        y += 1.0                                    # an in-place write: splits the runs
        y.mul_(w)
        return tg.tanh(y * y - w).sum()
    cf = tg.compile(f)
    rng = np.random.default_rng(5)
    for _ in range(3):
        x0, w0 = rng.standard_normal(9), rng.standard_normal(9)
        assert _grads(cf, x0, w0) == _grads(f, x0, w0)
    assert _runs(cf) > 0


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_nan_and_inf_inputs_warn_and_give_eager_bits(dtype):
    def f(x):
        return tg.log(x * 1.0 - 1.0) * 2.0 + 1.0
    cf = tg.compile(f)
    x = np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, 2.0, -3.0], dtype=dtype)
    with np.errstate(all="ignore"):
        cf(tg.tensor(x + 10))                       # records
    with pytest.warns(RuntimeWarning) as eager_warnings:
        expect = f(tg.tensor(x)).numpy()
    with pytest.warns(RuntimeWarning) as fused_warnings:
        got = cf(tg.tensor(x)).numpy()
    assert _bits(got) == _bits(expect)
    assert sorted(str(w.message) for w in fused_warnings) == \
        sorted(str(w.message) for w in eager_warnings)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")              # ignored flags: fused, no warning
        before = _runs(cf)
        assert _bits(cf(tg.tensor(x)).numpy()) == _bits(expect)
        assert _runs(cf) == before + 1
    with np.errstate(invalid="raise", divide="raise"):
        with pytest.raises(FloatingPointError):
            f(tg.tensor(x))
        with pytest.raises(FloatingPointError):
            cf(tg.tensor(x))


def test_fuse_false_replays_every_kernel_and_matches():
    def f(x):
        return (tg.exp(x) * 0.5 + tg.sin(x)).sum()
    cf = tg.compile(f, fuse=False)
    x0 = np.linspace(-1, 1, 33)
    for _ in range(2):
        assert _grads(lambda x, w: cf(x) + (w * 0).sum(), x0, x0) == \
            _grads(lambda x, w: f(x) + (w * 0).sum(), x0, x0)
    assert cf.programs()[0].fused_counts() == (0, 0)
    assert cf.programs()[0].forward_run is cf.programs()[0].forward


def test_float32_chain_with_python_scalars_stays_float32_and_fuses():
    def f(x):
        return tg.tanh(x * 0.1 + 3) / 7
    cf = tg.compile(f)
    x = np.linspace(-5, 5, 2049, dtype=np.float32)
    for _ in range(2):
        out = cf(tg.tensor(x))
        assert out.dtype == np.float32
        assert _bits(out.numpy()) == _bits(f(tg.tensor(x)).numpy())
    assert _runs(cf) == 1


# -- the differential fuzzers cover fused programs ----------------------------------------

def _load(name):
    path = pathlib.Path(__file__).with_name(name)
    spec = importlib.util.spec_from_file_location(f"_fused_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_differential_fuzzer_replays_fused_steps():
    """Programs of tests/test_compile_fuzz.py, through its own comparison: fused steps
    must occur (and run fused) in a good share of them."""
    fuzz = _load("test_compile_fuzz.py")
    counts = []

    @settings(max_examples=120, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(spec=fuzz.program)
    def check(spec):
        before = _fuse.fused_runs()
        fuzz.test_compiled_calls_equal_eager_calls_bit_for_bit.hypothesis.inner_test(spec)
        counts.append(_fuse.fused_runs() - before)

    check()
    assert sum(c > 0 for c in counts) >= len(counts) // 10, counts


def test_the_training_step_fuzzer_replays_fused_steps():
    fuzz = _load("test_compile_fuzz_training_steps.py")
    counts = []

    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(spec=fuzz.program)
    def check(spec):
        before = _fuse.fused_runs()
        with np.errstate(all="ignore"):
            fuzz.run_program(spec)
        counts.append(_fuse.fused_runs() - before)

    check()
    assert sum(c > 0 for c in counts) >= len(counts) // 4, counts
