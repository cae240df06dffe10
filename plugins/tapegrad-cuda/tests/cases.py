"""Op cases shared by the simulator tests (test_cuda_simulated.py) and the real-GPU tests
(test_cuda_gpu.py): every first-party op on its registered samples and on views,
broadcasting, axes, empty arrays and integer/bool dtypes, compared with the cpu device --
values, dtypes, shapes, raised exception types and every input's gradient."""

import numpy as np
import tapegrad as tg
from tapegrad import _engine
from tapegrad_cuda import kernels

FIRST_PARTY = {"tapegrad", "tapegrad-elementwise", "tapegrad-shape", "tapegrad-linalg",
               "tapegrad-nn"}
OPS = sorted(n for n, op in tg.registry().ops.items() if op.plugin in FIRST_PARTY)
# The ops with a cuda kernel (the others raise NotImplementedError on cuda, by design).
CUDA_OPS = [n for n in OPS if n not in kernels.NO_KERNEL]
RNG = np.random.default_rng(1234)


def op(name):
    """The registered op `name`; the test skips when the plugin defining it is not installed
    (this distribution's tests must pass with only what it declares)."""
    import pytest

    found = tg.registry().ops.get(name)
    if found is None:
        pytest.skip(f"op '{name}' is not registered (its plugin is not installed)")
    return found


def needs(*names):
    """Skip the test unless every op in `names` is registered."""
    for name in names:
        op(name)


def every_op_has_a_kernel_or_refuses():
    """Every first-party op has a cuda kernel or is on kernels.NO_KERNEL; each of those has
    none, and calling it (on its first sample) with cuda tensors raises NotImplementedError
    naming the op and the device."""
    import re

    import pytest

    ops = tg.registry().ops
    missing = [n for n in OPS if "cuda" not in ops[n].kernels and n not in kernels.NO_KERNEL]
    assert not missing, f"no cuda kernel and not on kernels.NO_KERNEL: {missing}"
    if "tapegrad-linalg" in tg.registry().plugins:
        assert [n for n in kernels.NO_KERNEL if n not in ops] == [], "stale NO_KERNEL entries"
    for name in [n for n in kernels.NO_KERNEL if n in ops]:
        op = ops[name]
        assert "cuda" not in op.kernels and op.samples, name
        sample = op.samples[0]
        args = [_place(a, "cuda") for a in sample.args]
        with pytest.raises(NotImplementedError,
                           match=rf"^{re.escape(name)}: no kernel for device 'cuda'"):
            op(*args, **sample.kwargs)


def _place(v, device, dtype=None, grad=False):
    if isinstance(v, np.ndarray):
        if dtype is not None and v.dtype.kind == "f":
            v = v.astype(dtype)
        return tg.tensor(v, device=device, requires_grad=grad and v.dtype.kind == "f")
    if isinstance(v, list) and v and isinstance(v[0], np.ndarray):
        return [_place(x, device, dtype, grad) for x in v]
    return v


def _leaves(args):
    out = []
    for a in args:
        if isinstance(a, list):
            out += [x for x in a if isinstance(x, tg.Tensor) and x.requires_grad]
        elif isinstance(a, tg.Tensor) and a.requires_grad:
            out.append(a)
    return out


def _assert_close(got, want, dtype=np.float64, what="", tol=None):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "biu":
        assert np.array_equal(got, want), what
    else:
        if tol is None:
            tol = 2e-5 if np.dtype(dtype) == np.float32 or want.dtype == np.float32 else 1e-11
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=what)


def _both(fn, args, kwargs=None, dtype=None, grad=False):
    """fn on the cpu and on cuda; the results as host arrays (or the exception type)."""
    kwargs = kwargs or {}
    out = {}
    for dev in ("cpu", "cuda"):
        placed = [_place(a, dev, dtype, grad) for a in args]
        try:
            res = fn(*placed, **kwargs)
        except (ValueError, TypeError, IndexError, RuntimeError) as exc:
            out[dev] = (exc, placed, None)
            continue
        out[dev] = (res, placed, res)
    return out


def compare(fn, *args, cast=None, grad=True, tol=None, **kwargs):
    """fn's result (and, when grad, every float input's gradient) on cuda equals the cpu's."""
    dtype = cast
    out = _both(fn, args, kwargs, dtype, grad)
    (rc, pc, tc), (rg, pg, tg_) = out["cpu"], out["cuda"]
    if tc is None or tg_ is None:
        assert tc is None and tg_ is None, f"cpu gives {rc!r}, cuda gives {rg!r}"
        assert type(rc) is type(rg), f"cpu raises {rc!r}, cuda raises {rg!r}"
        return
    assert tg_.device == tg.device("cuda")
    _assert_close(tg_.numpy(), tc.numpy(), dtype, f"{getattr(fn, '__name__', fn)} forward", tol)
    leaves_c, leaves_g = _leaves(pc), _leaves(pg)
    if not (grad and leaves_c and tc.requires_grad):
        return
    w = RNG.standard_normal(tc.shape).astype(tc.dtype)
    tc.backward(tg.tensor(w))
    tg_.backward(tg.tensor(w, device="cuda"))
    for i, (a, b) in enumerate(zip(leaves_c, leaves_g)):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            assert b.grad.device == tg.device("cuda")
            _assert_close(b.grad.numpy(), a.grad.numpy(), dtype, f"gradient {i}", tol)


def _r(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def _t(a):
    """A non-contiguous array with a's values (a transposed copy, transposed back)."""
    return np.ascontiguousarray(a.T).T


NONCONTIG = [
    # elementwise on views, with broadcasting and scalars
    ("add", (_t(_r(3, 4)), _r(4)), {}),
    ("multiply", (_t(_r(3, 4)), _t(_r(3, 1))), {}),
    ("divide", (2.0, _t(_r(4, 3)) + 5), {}),
    ("maximum", (_r(2, 1, 3), _r(4, 1)), {}),
    ("power", (np.abs(_r(3, 4)) + 0.5, _t(_r(4, 3))), {}),
    ("exp", (_t(_r(5, 3)),), {}),
    ("tanh", (_r(0, 3),), {}),
    ("add", (_r(0, 3), _r(3)), {}),
    ("where", (_r(3, 4) > 0, _t(_r(4, 3)), 0.0), {}),
    ("clip", (_r(6),), {"a_max": 0.1}),
    ("sigmoid", (np.array([-800.0, -1.0, 0.0, 1.0, 800.0]),), {}),
    # reductions: axes, keepdims, views, long rows (two passes), empty
    ("sum", (_t(_r(4, 3, 2)),), {"axis": (0, 2), "keepdims": True}),
    ("sum", (_r(5000),), {}),
    ("mean", (_r(3, 3000),), {"axis": None}),
    ("max", (_r(4099),), {}),
    ("min", (_t(_r(3, 5)),), {"axis": 0}),
    ("sum", (_r(0, 3),), {"axis": 0}),
    ("sum", (_r(3, 0),), {"axis": 1}),
    ("mean", (_r(2, 0),), {"axis": 1}),
    ("max", (_r(0, 3),), {"axis": 0}),
    ("sum", (_r(3, 4),), {"axis": 1, "dtype": np.float32}),
    ("sum_to_shape", (_t(_r(4, 3)),), {"shape": (1, 4)}),
    # shapes
    ("reshape", (_t(_r(3, 4)),), {"shape": (2, -1)}),
    ("transpose", (_r(2, 3, 4),), {"axes": (-1, 0, 1)}),
    ("broadcast_to", (_t(_r(1, 3)),), {"shape": (2, 3, 1)}),
    ("concatenate", ([_t(_r(3, 2)), _r(2, 2)],), {"axis": 0}),
    ("concatenate", ([_t(_r(3, 2)), _r(5)],), {"axis": None}),
    ("stack", ([_t(_r(3, 2)), _r(2, 3)],), {"axis": -1}),
    ("copy", (_t(_r(3, 2)),), {}),
    ("astype", (_t(_r(3, 2)),), {"dtype": np.float32}),
    # indexing
    ("getitem", (_r(4, 5),), {"index": (slice(None, None, -2), 1)}),
    ("getitem", (_t(_r(5, 4)),), {"index": (Ellipsis, None, slice(1, 3))}),
    ("getitem", (_r(3, 4, 5),), {"index": (np.array([0, -1, 0]), slice(None), np.array([1, 1, 4]))}),
    ("getitem", (_r(3, 4, 5),), {"index": (slice(None), np.array([[0, 3], [2, 2]]))}),
    ("getitem", (_r(3, 4, 5),), {"index": (1, slice(None), np.array([0, 2]))}),
    ("getitem", (_r(3, 4),), {"index": np.array([[True, False, True, False]] * 3)}),
    ("getitem", (_r(3, 4, 2),), {"index": (Ellipsis, np.array([True, False]))}),
    ("getitem", (_r(3, 4),), {"index": np.array([], dtype=np.int64)}),
    ("getitem", (_r(3, 4),), {"index": (0, 7)}),
    ("getitem", (_r(3, 4),), {"index": np.array([0, 3])}),
    ("setitem", (_t(_r(4, 3)), _r(3)), {"index": (slice(1, None, 2),)}),
    ("setitem", (_r(3, 4), _r(2, 1)), {"index": (np.array([0, 2]), slice(None))}),
    ("_getitem_grad", (_r(2, 3),), {"index": (np.array([1, 1]), slice(None)), "shape": (3, 3)}),
    # linalg
    ("matmul", (_r(3), _r(3)), {}),
    ("matmul", (_t(_r(4, 3)), _r(4, 2)), {}),
    ("matmul", (_r(2, 4), _t(_r(5, 4))), {}),
    ("matmul", (_r(2, 1, 3, 4), _r(5, 4, 2)), {}),
    ("matmul", (np.swapaxes(_r(2, 4, 3), 1, 2), _r(4, 2)), {}),
    ("matmul", (_r(3, 2, 4), np.swapaxes(_r(3, 5, 4), 1, 2)), {}),
    ("matmul", (_r(0, 3), _r(3, 2)), {}),
    ("matmul", (_r(2, 0), _r(0, 3)), {}),
    ("matmul", (_r(2, 3), _r(4, 2)), {}),
    ("_einsum", (_r(2, 3), _r(3, 4)), {"subscripts": "ij,jk->ik"}),
    # nn
    ("softmax", (_t(_r(4, 3)),), {"axis": 0}),
    ("softmax", (np.array([[-np.inf, -np.inf], [0.0, 1.0]]),), {}),
    ("log_softmax", (np.array([[1000.0, 0.0, -1000.0]]),), {"axis": -1}),
    ("_logsumexp", (np.array([[-np.inf, -np.inf], [0.0, 1.0]]),), {"axis": 1}),
    ("_logsumexp", (_r(2, 3, 4),), {"axis": (0, 2), "keepdims": True}),
    ("cross_entropy", (_r(4, 3), np.array([0, 5, 1, 2])), {}),
    ("cross_entropy", (_r(2, 3, 5), RNG.integers(0, 5, (2, 3))), {"reduction": "none"}),
    ("_softmax_minus_one_hot", (_r(2, 3, 5), RNG.integers(0, 5, (2, 3))), {}),
    ("binary_cross_entropy_with_logits", (_t(_r(3, 4)), RNG.uniform(0, 1, (4, 3))),
     {"reduction": "sum"}),
    ("linear", (_r(2, 4, 3), _r(5, 3), _r(5)), {}),
    # issue 14: elementwise, on views, broadcast, at zeros, signs and NaN
    ("arctan2", (_t(_r(3, 4)), _r(4)), {}),
    ("hypot", (_r(3, 1), _t(_r(4, 3))), {}),
    ("logaddexp", (np.array([-np.inf, 0.0, 800.0, np.inf]),
                   np.array([-np.inf, 1.0, 799.0, 3.0])), {}),
    ("remainder", (_t(_r(3, 4)) * 5, np.array([2.0, -2.0, 0.7, -0.3])), {}),
    ("fmod", (_t(_r(3, 4)) * 5, np.array([2.0, -2.0, 0.7, -0.3])), {}),
    ("floor_divide", (_t(_r(3, 4)) * 5, np.array([2.0, -2.0, 0.7, -0.3])), {}),
    ("floor_divide", (np.array([1.0, -1.0, 0.0]), 0.0), {}),
    ("fmax", (np.array([1.0, np.nan, np.nan, -2.0]), np.array([[np.nan], [0.5]])), {}),
    ("fmin", (np.array([1.0, np.nan, np.nan, -2.0]), np.array([[np.nan], [0.5]])), {}),
    ("copysign", (_t(_r(3, 4)), np.array([-0.0, 0.0, -1.0, 2.0])), {}),
    ("heaviside", (np.array([-1.0, 0.0, 2.0, np.nan]), np.array([0.5, 0.25, 0.5, 0.5])), {}),
    ("round", (_t(_r(3, 4)) * 100,), {"decimals": -1}),
    ("round", (np.array([0.125, 2.5, -1.5, 2.675]),), {"decimals": 2}),
    ("rint", (np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]),), {}),
    ("nan_to_num", (np.array([np.nan, np.inf, -np.inf, 1.0]),), {"posinf": 9.0}),
    ("isnan", (np.array([np.nan, 1.0, np.inf]),), {}),
    ("signbit", (np.array([-0.0, 0.0, -1.0, np.nan]),), {}),
    ("sinc", (np.array([0.0, 1.0, -0.5, 2.5]),), {}),
    ("tan", (_t(_r(3, 4)),), {}),
    ("reciprocal", (_t(_r(3, 4)) + 4,), {}),
    # issue 14: scans, sorting and index ops along axes, on views and empty arrays
    ("cumsum", (_t(_r(3, 4)),), {"axis": 0}),
    ("cumsum", (_r(0, 3),), {"axis": 1}),
    ("cumsum", (_r(3, 600),), {"axis": 1}),
    ("cumprod", (_t(_r(3, 4)),), {"axis": 1}),
    ("cumprod", (np.array([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0]]),), {"axis": None}),
    ("sort", (_t(_r(4, 6)),), {"axis": 0}),
    ("sort", (np.array([[3.0, np.nan, 1.0, -np.inf, 0.5]]),), {}),
    ("sort", (_r(300),), {"axis": None}),
    ("argsort", (np.array([[3.0, np.nan, 1.0, 1.0, -np.inf]]),), {"kind": "stable"}),
    ("take_along_axis", (_t(_r(3, 4)), np.array([[0, 3], [1, -1], [2, 2]])), {"axis": 1}),
    ("take", (_t(_r(3, 4)), np.array([[0, 3], [3, -1]])), {"axis": 1}),
    ("take", (_t(_r(3, 4)), np.array([5, -7, 1])), {"axis": 0, "mode": "wrap"}),
    ("pad", (_t(_r(3, 4)), ((1, 2), (3, 0))), {"mode": "reflect"}),
    ("pad", (_t(_r(3, 4)), 1), {"constant_values": 2.0}),
    ("pad", (_t(_r(2, 3)), ((4, 1), (2, 5))), {"mode": "wrap"}),
    ("roll", (_t(_r(3, 4)), (1, -1)), {"axis": (0, 1)}),
    ("roll", (_t(_r(3, 4)), 5), {}),
    ("repeat", (_t(_r(3, 4)), [1, 0, 2]), {"axis": 0}),
    ("tile", (_t(_r(2, 3)), (2, 1, 2)), {}),
    ("tensordot", (_t(_r(4, 3)), _r(4, 2)), {"axes": ([0], [0])}),
    ("tensordot", (_r(2, 3, 4), _t(_r(3, 4))), {"axes": ((-1, -2), (0, 1))}),
    ("ldexp", (_t(_r(3, 4)), np.array([1, -2, 0, 30])), {}),
    ("convolve", (_r(8)[::2], _r(3)), {"mode": "same"}),
    ("convolve", (_r(3), _r(7)), {"mode": "valid"}),
]


INTEGER_AND_BOOL = [
    ("less", (np.arange(6).reshape(2, 3), 2.5)),
    ("equal", (np.arange(6).reshape(2, 3), np.array([0, 4, 2]))),
    ("greater_equal", (np.arange(6, dtype=np.int32), np.arange(6)[::-1].copy())),
    ("not_equal", (np.array([True, False]), np.array([[True], [False]]))),
    ("logical_and", (_r(3, 4), _r(4) > 0)),
    ("logical_or", (np.array([0, 1, 2]), False)),
    ("logical_not", (_r(2, 3),)),
    ("add", (np.arange(6), np.int64(3))),
    ("multiply", (np.arange(6, dtype=np.int32), 2)),
    ("divide", (np.arange(6), 4)),
    ("abs", (np.arange(-3, 3),)),
    ("sign", (np.arange(-3, 3),)),
    ("negative", (np.arange(-3, 3, dtype=np.int32),)),
    ("exp", (np.arange(3),)),
    ("sum", (_r(3, 4) > 0,)),
    ("mean", (np.arange(12).reshape(3, 4),)),
    ("max", (np.arange(12).reshape(3, 4),)),
    ("argmax", (np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, 0.0]]),)),
    ("argmax", (np.array([[1.0, 7.0, 7.0], [2.0, 5.0, 5.0]]),)),
    ("argmin", (_r(3, 4),)),
    ("argmin", (_t(_r(3, 5)), 0)),
    ("argmax", (_r(3, 5), -1)),
    ("argmax", (np.arange(0.0),)),
    ("where", (np.array([1.0, 0.0, 2.0]), np.arange(3), np.arange(3) * 10)),
    ("astype", (_r(3, 2) * 5,), ),
    ("getitem", (np.arange(12).reshape(3, 4),)),
    ("concatenate", ([np.arange(3), np.arange(2.0)],)),
    ("clip", (np.arange(6),)),
    ("zeros_like", (np.arange(6) > 2,)),
    ("ones_like", (np.arange(6, dtype=np.int32),)),
    # issue 14: NumPy's integer semantics (sign of the divisor, division by zero gives 0)
    ("remainder", (np.array([7, -7, 7, -7, 5, 0]), np.array([2, 2, -2, -2, 0, 0]))),
    ("floor_divide", (np.array([7, -7, 7, -7, 5, 0]), np.array([2, 2, -2, -2, 0, 0]))),
    ("fmod", (np.array([7, -7, 7, -7, 5, 0], np.int32), np.array([2, 2, -2, -2, 0, 0], np.int32))),
    ("fmax", (np.arange(6), np.arange(6)[::-1].copy())),
    ("fmin", (np.arange(6, dtype=np.int32), 2)),
    ("fmax", (np.array([True, False, False]), np.array([[True], [False]]))),
    ("minimum", (np.array([True, False, True]), np.array([True, True, False]))),
    ("floor", (np.arange(-3, 3),)),
    ("ceil", (np.arange(-3, 3, dtype=np.int32),)),
    ("trunc", (np.array([True, False]),)),
    ("rint", (np.arange(-3, 3),)),
    ("reciprocal", (np.array([1, -1, 2, 5, -3]),)),
    ("isnan", (np.arange(3),)),
    ("isinf", (np.array([True, False]),)),
    ("isfinite", (np.arange(3, dtype=np.int32),)),
    ("signbit", (np.arange(-2, 2),)),
    ("round", (np.array([15, 25, -15, 35, 44]),)),
    ("nan_to_num", (np.arange(3),)),
    ("arctan2", (np.arange(3), np.arange(3) - 1)),
    ("cumsum", (np.arange(6, dtype=np.int32).reshape(2, 3),)),
    ("cumprod", (np.array([True, False, True]),)),
    ("sort", (np.array([[3, 1, 2, 1], [0, -5, 7, 7]], dtype=np.int32),)),
    ("argsort", (np.array([3, 1, 2, 1, 3, 0]),)),
    ("roll", (np.arange(6).reshape(2, 3),)),
    ("repeat", (np.arange(3) > 0,)),
    ("tile", (np.arange(3, dtype=np.int32),)),
    ("pad", (np.arange(3),)),
    ("take", (np.arange(5) * 2,)),
    ("take_along_axis", (np.arange(12).reshape(3, 4), np.array([[3], [0], [-1]]))),
]
INT_KWARGS = {"astype": {"dtype": np.int64}, "getitem": {"index": (slice(None), [1, 3])},
               "clip": {"a_min": 1, "a_max": 4}, "round": {"decimals": -1},
               "argsort": {"kind": "stable"}, "roll": {"shift": 2, "axis": 1},
               "repeat": {"repeats": 2}, "tile": {"reps": (2, 2)},
               "pad": {"pad_width": 2, "mode": "wrap"},
               "take": {"indices": [0, -1, 9], "mode": "clip"}, "take_along_axis": {"axis": 1}}


def check_forward_on_device(op, sample, where, report):
    """tapegrad.testing._check_forward, comparing with the CPU kernel too.

    The kit checks the op's result against its own device's kernel; on cuda the question
    that matters more is whether that kernel agrees with the cpu one (within rounding:
    GPU reductions sum in another order)."""
    dev = _engine.default_device()
    args = tg.testing._tensors(sample, np.float64, ())
    out = op(*args, **sample.kwargs)
    arrays = [[t._data for t in a] if isinstance(a, list) else
              (a._data if isinstance(a, tg.Tensor) else a) for a in args]
    if op.seq_input:
        arrays = list(arrays[0]) + list(arrays[1:])
    expected = dev.to_numpy(dev.asarray(op.kernels[dev.name](*arrays, **sample.kwargs)))
    _assert_close(out.numpy(), expected, what=where)
    host = [[np.asarray(t) for t in a] if isinstance(a, list) else a for a in sample.args]
    cpu = tg.registry().ops[op.name].kernels["cpu"]
    want = cpu(*(list(host[0]) + host[1:] if op.seq_input else host), **sample.kwargs)
    if op.n_aux and type(want) is tuple:    # (out, aux...): register_op(aux=)
        want = want[0]
    want = np.asarray(want)
    _assert_close(out.numpy(), want, what=where + " vs the cpu kernel")
    report.checks.append("forward")


# Sizes that take every kernel through its multi-block paths (grid-stride loops, rows past
# 65535 blocks, two-pass reductions, long softmax rows, many atomics on one address): too
# big for the simulator's Python loops, so only test_cuda_gpu.py runs them.
LARGE = [
    ("add", (_r(1_000_003), _r(1_000_003)), {}),
    ("tanh", (_r(300_001),), {}),
    ("sum", (_r(3_000_001),), {"tol": 1e-3}),
    ("mean", (_r(2000, 3000),), {"axis": 0, "tol": 1e-4}),
    ("max", (_r(1000, 1000),), {"axis": 1}),
    ("argmax", (_r(300, 5000),), {"axis": 1}),
    ("softmax", (_r(64, 5000),), {}),
    ("log_softmax", (_r(70_000, 10),), {}),
    ("_logsumexp", (_r(100, 3000),), {"axis": 1}),
    ("cross_entropy", (_r(70_000, 10), RNG.integers(0, 10, 70_000)), {"tol": 1e-4}),
    ("getitem", (_r(1000, 50),), {"index": RNG.integers(0, 1000, 100_000)}),
    ("getitem", (_r(3, 4),), {"index": np.zeros(200_000, np.int64)}),
    ("matmul", (_r(8, 64, 128), _r(128, 96)), {"tol": 1e-4}),
    ("copy", (_t(_r(2000, 3000)),), {}),
    ("concatenate", ([_r(1000, 300), _r(500, 300)],), {}),
    ("where", (_r(1000, 1000) > 0, _r(1000, 1000), 0.0), {}),
    # issue 14: rows scanned in many chunks, more rows than blocks, long bitonic sorts
    ("cumsum", (_r(200, 5000),), {"axis": 1, "tol": 1e-3}),
    ("cumsum", (_r(70_000, 3),), {"axis": 0, "tol": 1e-2}),
    ("cumprod", (1 + _r(70_000, 4) / 1000,), {"axis": 1, "tol": 1e-4}),
    ("sort", (_r(1000, 1000),), {}),
    ("sort", (_r(300_000),), {}),
    ("sort", (_r(70_000, 5),), {"axis": 0}),
    ("take_along_axis", (_r(1000, 300), RNG.integers(0, 300, (1000, 500))), {"axis": 1}),
    ("pad", (_r(1000, 1000), 50), {"mode": "reflect"}),
    ("tile", (_r(1000, 100), (3, 2)), {}),
    ("roll", (_r(1000, 1000), 7), {"axis": 1}),
    ("remainder", (_r(1_000_003) * 10, 0.7), {}),
    ("tensordot", (_r(64, 32, 48), _r(48, 32, 16)), {"axes": ([1, 2], [1, 0]), "tol": 1e-4}),
    ("convolve", (_r(100_000), _r(301)), {"mode": "same", "tol": 1e-4}),
    ("_interp_segment", (_r(1_000_003), np.sort(_r(5000))), {}),
]


def _mlp_sgd_step(ps, x, labels, lr=0.1):
    """One SGD step of linear-relu-linear with cross_entropy; the loss (before the step)."""
    loss = tg.cross_entropy(tg.linear(tg.relu(tg.linear(x, ps[0], ps[1])), ps[2], ps[3]),
                            labels)
    for p in ps:
        p.grad = None
    loss.backward()
    with tg.no_grad():
        for p in ps:
            p -= lr * p.grad
    return loss


def compiled_steps_and_replayed_hessians_on_cuda():
    """tg.compile on cuda: a replayed SGD step equals the eager cuda step bit for bit (the
    same kernels); tg.hessian's replayed passes equal eager passes and the cpu result."""
    for name in ("linear", "relu", "cross_entropy", "tanh", "sum", "matmul"):
        op(name)
    rng = np.random.default_rng(2)
    data = tg.tensor(rng.standard_normal((16, 8)), device="cuda")
    labels = tg.tensor(rng.integers(0, 4, 16), device="cuda")
    init = [rng.standard_normal(s) * 0.3 for s in ((12, 8), (12,), (4, 12), (4,))]
    runs = {}
    for compiled in (False, True):
        ps = [tg.tensor(p, device="cuda", requires_grad=True) for p in init]

        def step(x):
            return _mlp_sgd_step(ps, x, labels)

        run = tg.compile(step) if compiled else step
        runs[compiled] = [run(data).numpy() for _ in range(4)] + [p.numpy() for p in ps]
        if compiled:
            assert run.cache_info().hits == 3
    for a, b in zip(runs[True], runs[False]):
        assert np.array_equal(a, b)
    if "tapegrad-higher" not in tg.registry().plugins:
        return
    import tapegrad_higher.functional as functional

    w = rng.standard_normal((9, 9)) / 3
    x0 = rng.standard_normal(9)
    hessians = {}
    for dev in ("cpu", "cuda"):
        W, x = tg.tensor(w, device=dev), tg.tensor(x0, device=dev)
        hessians[dev] = tg.hessian(lambda v: tg.sum(tg.tanh(W @ v)), x).numpy()
        if dev == "cuda":
            saved, functional._REPLAY_FROM = functional._REPLAY_FROM, 10 ** 9
            try:
                eager = tg.hessian(lambda v: tg.sum(tg.tanh(W @ v)), x).numpy()
            finally:
                functional._REPLAY_FROM = saved
            assert np.array_equal(hessians[dev], eager)
    _assert_close(hessians["cuda"], hessians["cpu"])


def training_steps_match_cpu():
    """Three SGD steps of a small MLP (linear, relu, cross_entropy) agree on cpu and cuda."""
    for name in ("linear", "relu", "cross_entropy"):
        op(name)
    rng = np.random.default_rng(0)
    data = rng.standard_normal((16, 8)).astype(np.float32)
    labels = rng.integers(0, 4, 16)
    params = [rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((12, 8), (12,), (4, 12), (4,))]
    losses = {}
    for dev in ("cpu", "cuda"):
        ps = [tg.tensor(p, device=dev, requires_grad=True) for p in params]
        x, y = tg.tensor(data, device=dev), tg.tensor(labels, device=dev)
        losses[dev] = []
        for _ in range(3):
            losses[dev].append(_mlp_sgd_step(ps, x, y).item())
        losses[dev + "-params"] = [p.numpy() for p in ps]
    np.testing.assert_allclose(losses["cuda"], losses["cpu"], rtol=1e-5)
    for a, b in zip(losses["cuda-params"], losses["cpu-params"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
