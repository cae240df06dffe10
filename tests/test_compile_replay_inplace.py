"""In-place fused updates (tg.compile, fuse=True): `p -= lr * p.grad` replayed as one
step (_fuse.InPlaceKernel: the multiply's and the subtract's inner loops, block by block,
writing straight into p) must leave exactly the bits eager leaves, warn as eager warns,
and, wherever writing block by block could differ from eager's whole-array temporary,
run the recorded steps instead (docs/compile.md, "In-place fused updates").

The reference is always eager (the same function uncompiled, NumPy's ufuncs called one by
one) or NumPy itself; arrays are compared by their bytes. The unsafe cases are built so
that a block-by-block write *would* give other bits (inputs larger than one block,
overlapping the target at a shift): each fails if its check were dropped.
"""

import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import _fuse

FLOATS = (np.float32, np.float64)
BLOCK = 8192            # _fuse.pxd's INPLACE_BLOCK
SHAPES = ((1,), (7,), (BLOCK - 1,), (BLOCK,), (BLOCK + 1,), (3 * BLOCK + 5,), (3, 5),
          (64, 130))


def _bits(a):
    a = np.asarray(a)
    return a.dtype, a.shape, np.ascontiguousarray(a).tobytes()


def _inplace_steps(compiled):
    return [st for p in compiled.programs() for run in (p.forward_run, p.backward_run or [])
            for st in run if st.describe()[0] == "fused_inplace"]


def _values(rng, shape, dtype):
    x = rng.standard_normal(shape) * 3
    flat = x.reshape(-1)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, 1e-30, 1.0]
    k = min(flat.size, len(special))
    flat[rng.choice(flat.size, size=k, replace=False)] = special[:k]
    return np.asarray(x, dtype=dtype)


# -- the kernel itself, against NumPy ------------------------------------------------------

KERNELS = (np.multiply, np.add, np.divide, np.maximum)
WRITES = (np.subtract, np.add, np.multiply, np.divide, np.minimum)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("write", WRITES, ids=lambda u: u.__name__)
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda u: u.__name__)
def test_in_place_kernel_gives_the_bits_of_the_two_ufunc_calls(kernel, write, dtype):
    """t = kernel(g, s); write(p, t, out=p) -- NumPy's two calls -- against one
    InPlaceKernel run on the same arrays, on every shape (sizes around a block, 2-D), with
    a broadcast scalar (0-d and (1,)) and NaN/inf/-0.0/subnormal values."""
    rng = np.random.default_rng(sum(map(ord, kernel.__name__ + write.__name__)))
    for shape in SHAPES:
        for s in (np.asarray(0.01, dtype), np.asarray([-2.5], dtype), None):
            g = _values(rng, shape, dtype)
            p0 = _values(rng, shape, dtype)
            other = _values(rng, shape, dtype) if s is None else s
            with np.errstate(all="ignore"):
                expect = p0.copy()
                write(expect, kernel(g, other), out=expect)
                p = p0.copy()
                step = _fuse.InPlaceKernel(
                    [(kernel, (0, 1), 3), (write, (2, 3), 2)], np.dtype(dtype).num, shape,
                    {0: g.size, 1: other.size, 2: p.size}, 2)
                assert step.try_run([g, other, p, None])
            assert _bits(p) == _bits(expect), (shape, s)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_a_chain_of_kernels_and_the_target_as_an_input(dtype):
    """p -= lr * (g + wd * p): three kernels, one reading the target itself at the same
    positions (safe block by block), over several blocks."""
    rng = np.random.default_rng(3)
    shape = (3 * BLOCK + 17,)
    g, p0 = _values(rng, shape, dtype), _values(rng, shape, dtype)
    lr, wd = np.asarray(0.1, dtype), np.asarray(1e-4, dtype)
    with np.errstate(all="ignore"):
        expect = p0.copy()
        np.subtract(expect, lr * (g + wd * expect), out=expect)
        p = p0.copy()
        step = _fuse.InPlaceKernel(
            [(np.multiply, (3, 2), 4), (np.add, (0, 4), 5), (np.multiply, (1, 5), 6),
             (np.subtract, (2, 6), 2)], np.dtype(dtype).num, shape,
            {0: g.size, 1: 1, 2: p.size, 3: 1}, 2)
        assert step.try_run([g, lr, p, wd, None, None, None])
    assert _bits(p) == _bits(expect)


def _simple_step(dtype=np.float32, shape=(3 * BLOCK + 5,)):
    step = _fuse.InPlaceKernel([(np.multiply, (0, 1), 3), (np.subtract, (2, 3), 2)],
                               np.dtype(dtype).num, shape,
                               {0: int(np.prod(shape)), 1: 1, 2: int(np.prod(shape))}, 2)
    return step


def test_a_target_it_cannot_write_as_recorded_is_handed_back_untouched():
    """Read-only, another dtype or size, a negative or zero stride, F order: nothing is
    written, run() hands back (the caller then runs the recorded steps)."""
    n = 3 * BLOCK + 5
    g, lr = np.ones(n, np.float32), np.asarray(0.5, np.float32)
    step = _simple_step()
    read_only = np.zeros(n, np.float32)
    read_only.flags.writeable = False
    reversed_view = np.zeros(n, np.float32)[::-1]
    zero_stride = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (n,), (0,))
    for target in (read_only, np.zeros(n, np.float64), np.zeros(n + 1, np.float32),
                   reversed_view, zero_stride):
        before = target.copy()
        assert not step.try_run([g, lr, target, None])
        assert _bits(target) == _bits(before)
    assert step.fallbacks == 5 and step.runs == 0
    step2 = _simple_step(shape=(60, 40))
    f_ordered = np.asfortranarray(np.zeros((60, 40), np.float32))
    assert not step2.try_run([np.ones((60, 40), np.float32), lr, f_ordered, None])
    assert not f_ordered.any()
    c_ordered = np.zeros((60, 40), np.float32)
    assert step2.try_run([np.ones((60, 40), np.float32), lr, c_ordered, None])
    assert (c_ordered == -0.5).all()


def test_an_input_overlapping_the_target_at_a_shift_is_handed_back():
    """t = lr * p[:-1]; p[1:] -= t: eager computes t whole first, block by block the later
    blocks would read elements already written. Without the overlap check this gives
    other bits (the test of that is the comparison with NumPy below)."""
    n = 3 * BLOCK + 5
    base = np.random.default_rng(0).standard_normal(n + 1).astype(np.float32)
    expect = base.copy()
    np.subtract(expect[1:], np.asarray(0.5, np.float32) * expect[:-1], out=expect[1:])
    got = base.copy()
    step = _simple_step()
    assert not step.try_run([got[:-1], np.asarray(0.5, np.float32), got[1:], None])
    assert _bits(got) == _bits(base)            # nothing written
    # a broadcast scalar that is an element of the target (p -= p[0] * g)
    got2 = base[:n].copy()
    assert not step.try_run([np.ones(n, np.float32), got2[:1].reshape(()), got2, None])


# -- compiled functions against eager --------------------------------------------------------

def _mlp_step(dtype, shape, lr=0.01):
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal(shape).astype(dtype)
    x = tg.tensor(rng.standard_normal((4, shape[0])).astype(dtype))
    w = tg.tensor(w0.copy(), requires_grad=True)

    def step(x):
        nonlocal w                  # (w -= ...: an in-place update of the same tensor)
        with tg.no_grad():
            w.grad = None
        loss = (tg.tanh(x @ w) ** 2).sum()
        loss.backward()
        with tg.no_grad():
            w -= lr * w.grad
        return loss

    return w, x, step


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(5, 3), (64, 200), (130, 257)])
def test_sgd_update_replays_in_place_with_eager_bits(dtype, shape):
    we, x, eager = _mlp_step(dtype, shape)
    wc, _, plain = _mlp_step(dtype, shape)
    compiled = tg.compile(plain)
    before = _fuse.inplace_runs()
    for _ in range(4):
        le, lc = eager(x), compiled(x)
        assert _bits(le.numpy()) == _bits(lc.numpy())
        assert _bits(we.numpy()) == _bits(wc.numpy())
        assert _bits(we.grad.numpy()) == _bits(wc.grad.numpy())
        assert we._version == wc._version
    steps = _inplace_steps(compiled)
    assert len(steps) == 1 and steps[0].fn.runs == 3 and steps[0].fn.fallbacks == 0
    assert _fuse.inplace_runs() - before == 3


def test_the_w2_benchmark_step_replays_every_update_in_place():
    import benchmarks.workloads.w2_w3_mlp_training as mlp

    eager = mlp._tapegrad_case(mlp.W2.params, compiled=False)
    compiled = mlp._tapegrad_case(mlp.W2.params, compiled=True)
    for _ in range(3):
        (le, pe), (lc, pc) = eager.run(), compiled.run()
        assert le.item() == lc.item()
        for a, b in zip(pe, pc):
            assert _bits(a.numpy()) == _bits(b.numpy())
    fn = next(c.cell_contents for c in compiled.run.__closure__
              if hasattr(c.cell_contents, "programs"))
    steps = _inplace_steps(fn)
    assert len(steps) == 6 and all(st.fn.runs == 2 and st.fn.fallbacks == 0 for st in steps)


def test_a_product_read_after_the_update_is_not_fused_and_matches_eager():
    """u = lr * p.grad kept (returned): the value escapes, so it must be an array."""
    def make():
        p = tg.tensor(np.linspace(-1, 1, 3 * BLOCK + 5), requires_grad=True)

        def step(x):
            nonlocal p
            p.grad = None
            (p * x).sum().backward()
            with tg.no_grad():
                u = 0.5 * p.grad
                p -= u
            return u
        return p, step

    (pe, fe), (pc, fc) = make(), make()
    fc = tg.compile(fc)
    x = tg.tensor(np.full(3 * BLOCK + 5, 2.0))
    for _ in range(3):
        ue, uc = fe(x), fc(x)
        assert _bits(ue.numpy()) == _bits(uc.numpy())
        assert _bits(pe.numpy()) == _bits(pc.numpy())
    assert not _inplace_steps(fc)


def test_the_grad_read_after_the_update_still_has_its_values():
    """p.grad itself (the multiply's input) is read after the update: untouched."""
    def make():
        p = tg.tensor(np.linspace(-1, 1, 2 * BLOCK + 3), requires_grad=True)

        def step(x):
            nonlocal p
            p.grad = None
            (p * p * x).sum().backward()
            with tg.no_grad():
                p -= 0.25 * p.grad
            return p.grad * 1.0
        return p, step

    (pe, fe), (pc, fc) = make(), make()
    fc = tg.compile(fc)
    x = tg.tensor(np.full(2 * BLOCK + 3, 3.0))
    for _ in range(3):
        ge, gc = fe(x), fc(x)
        assert _bits(ge.numpy()) == _bits(gc.numpy())
        assert _bits(pe.numpy()) == _bits(pc.numpy())
    assert _inplace_steps(fc) and _inplace_steps(fc)[0].fn.runs >= 1


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_a_shifted_view_update_falls_back_and_matches_eager(dtype):
    """v = p[1:]; v -= 0.5 * p[:-1]: the write's target overlaps the product's input at a
    shift of one element; a block-by-block write would read already updated elements."""
    n = 3 * BLOCK + 5

    def f(p):
        with tg.no_grad():
            v = p[1:]
            v -= 0.5 * p[:-1]
        return p * 1.0

    compiled = tg.compile(f)
    start = np.random.default_rng(2).standard_normal(n + 1).astype(dtype)
    for _ in range(3):
        pe, pc = tg.tensor(start.copy()), tg.tensor(start.copy())
        assert _bits(f(pe).numpy()) == _bits(compiled(pc).numpy())
        assert _bits(pe.numpy()) == _bits(pc.numpy())
    steps = _inplace_steps(compiled)
    assert steps and all(st.fn.runs == 0 and st.fn.fallbacks == 2 for st in steps)


def test_a_non_contiguous_argument_target_runs_the_recorded_steps():
    """Recorded with a C-ordered argument, replayed with an F-ordered one of the same
    shape: NumPy iterates that in another order, so the recorded steps run."""
    def f(p, g):
        with tg.no_grad():
            p -= 0.5 * g
        return p * 1.0

    compiled = tg.compile(f)
    rng = np.random.default_rng(4)
    a, g = rng.standard_normal((90, 100)), rng.standard_normal((90, 100))
    for layout in (np.ascontiguousarray, np.asfortranarray, np.asfortranarray):
        pe, pc = tg.tensor(layout(a.copy())), tg.tensor(layout(a.copy()))
        assert _bits(f(pe, tg.tensor(g)).numpy()) == _bits(compiled(pc, tg.tensor(g)).numpy())
        assert _bits(pe.numpy()) == _bits(pc.numpy())
    steps = _inplace_steps(compiled)
    assert steps and steps[0].fn.fallbacks >= 1


def test_a_hook_on_the_parameter_is_honoured():
    """A hook registered on p after the recording changes p.grad: the replay must not
    apply the old update (the program records again and runs the hook)."""
    def make():
        p = tg.tensor(np.linspace(-1, 1, 2 * BLOCK + 1), requires_grad=True)

        def step(x):
            nonlocal p
            p.grad = None
            (p * x).sum().backward()
            with tg.no_grad():
                p -= 0.1 * p.grad
            return p * 1.0
        return p, step

    (pe, fe), (pc, fc) = make(), make()
    fc = tg.compile(fc)
    x = tg.tensor(np.full(2 * BLOCK + 1, 2.0))
    fe(x), fc(x), fe(x), fc(x)
    for p in (pe, pc):
        p.register_hook(lambda g: g * 3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.CompileWarning)
        for _ in range(2):
            assert _bits(fe(x).numpy()) == _bits(fc(x).numpy())
            assert _bits(pe.numpy()) == _bits(pc.numpy())


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_flags_warn_as_eager_warns(dtype):
    """An overflow in the product and an invalid inf - inf in the update: the same
    RuntimeWarnings, in the same order, and the same bits; the step still runs fused."""
    big = np.finfo(dtype).max
    start = np.array([np.inf, 1.0, 2.0, -1.0] * 3000, dtype)
    g = tg.tensor(np.array([big, 1.0, -big, 0.5] * 3000, dtype))

    def f(p, g):
        with tg.no_grad():
            p -= 4.0 * g
        return p * 1.0

    fc = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fc(tg.tensor(start.copy()), g)          # (records)
    runs = _fuse.inplace_runs()
    pe, pc = tg.tensor(start.copy()), tg.tensor(start.copy())
    with warnings.catch_warnings(record=True) as we:
        warnings.simplefilter("always")
        f(pe, g)
    with warnings.catch_warnings(record=True) as wc:
        warnings.simplefilter("always")
        fc(pc, g)
    assert _fuse.inplace_runs() == runs + 1
    expect = [(w.category, str(w.message)) for w in we]
    assert expect == [(RuntimeWarning, "overflow encountered in multiply"),
                      (RuntimeWarning, "invalid value encountered in subtract")]
    assert [(w.category, str(w.message)) for w in wc] == expect
    assert _bits(pe.numpy()) == _bits(pc.numpy())


def test_errstate_raise_leaves_the_target_as_eager_leaves_it():
    """Under np.errstate(all='raise') eager's multiply raises before the subtract writes
    p: the replay must raise the same error with p untouched (it runs the recorded steps;
    fused, p would already be written)."""
    n = 2 * BLOCK + 1

    def f(p, g):
        with tg.no_grad():
            p -= 1e30 * g
        return p * 1.0

    fc = tg.compile(f)
    small = tg.tensor(np.full(n, 1e-3, np.float32))
    fc(tg.tensor(np.ones(n, np.float32)), small)              # (records)
    g = tg.tensor(np.full(n, 1e10, np.float32))
    pe, pc = tg.tensor(np.ones(n, np.float32)), tg.tensor(np.ones(n, np.float32))
    for fn, p in ((f, pe), (fc, pc)):
        with np.errstate(all="raise"), pytest.raises(FloatingPointError, match="overflow"):
            fn(p, g)
    assert _bits(pe.numpy()) == _bits(np.ones(n, np.float32))
    assert _bits(pc.numpy()) == _bits(np.ones(n, np.float32))
    # and errstate back to the default: fused again, the same bits
    runs = _fuse.inplace_runs()
    assert _bits(f(pe, small).numpy()) == _bits(fc(pc, small).numpy())
    assert _fuse.inplace_runs() == runs + 1


def test_the_training_step_fuzzer_replays_in_place_steps():
    """Programs of tests/test_compile_fuzz_training_steps.py (optimizers' updates among
    them), through its own comparison: in-place steps must run in some of them."""
    import importlib.util
    import pathlib

    from hypothesis import HealthCheck, given, settings

    path = pathlib.Path(__file__).with_name("test_compile_fuzz_training_steps.py")
    spec_ = importlib.util.spec_from_file_location("_fuzz_training_inplace", path)
    fuzz = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(fuzz)
    counts = []

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(spec=fuzz.program)
    def check(spec):
        before = _fuse.inplace_runs()
        with np.errstate(all="ignore"):
            fuzz.run_program(spec)
        counts.append(_fuse.inplace_runs() - before)

    check()
    assert sum(c > 0 for c in counts) >= 2, counts
