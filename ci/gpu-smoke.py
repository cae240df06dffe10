"""GPU smoke test and small benchmark for tapegrad-cuda, run by ci/gpu-check on a machine
with an NVIDIA GPU (not part of the test suite: the name has a hyphen so pytest never
collects it). Compares every result with NumPy on the CPU and times both.

Exits non-zero when CUDA is not available or any result differs; prints one line per check.
"""

import os
import sys
import time
import traceback

import numpy as np
import tapegrad as tg

# TG_SMOKE_DEVICE=cpu runs the same checks on the CPU (to test this script without a GPU).
DEVICE = os.environ.get("TG_SMOKE_DEVICE", "cuda")
N = 1 << 20            # 1M elements
REPS = 20
failures = []


def check(name, got, want, rtol, atol):
    got = np.asarray(got)
    want = np.asarray(want)
    try:
        assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as e:
        failures.append(name)
        print(f"FAIL {name}: {str(e).strip()[:600]}", flush=True)
        return False
    return True


def sync():
    if DEVICE == "cuda":
        tg.cuda.synchronize()


def timed(fn, sync):
    fn()
    sync()                                     # warm-up (kernel load, first allocation)
    t0 = time.perf_counter()
    for _ in range(REPS):
        r = fn()
    sync()
    return r, (time.perf_counter() - t0) / REPS * 1e3


def run_case(name, cpu_fn, gpu_fn, args_np, rtol, atol):
    """cpu_fn works on NumPy arrays, gpu_fn on cuda tensors; both return one result."""
    try:
        args_tg = [tg.tensor(a, device=DEVICE) for a in args_np]
        got, t_gpu = timed(lambda: gpu_fn(*args_tg), sync)
        want, t_cpu = timed(lambda: cpu_fn(*args_np), lambda: None)
        assert got.device.name == DEVICE, f"result is on {got.device.name}"
        ok = check(name, got.numpy(), np.asarray(want), rtol, atol)
        print(f"{'ok  ' if ok else 'BAD '} {name:<34} {DEVICE} {t_gpu:8.3f} ms   numpy {t_cpu:8.3f} ms"
              f"   x{t_cpu / max(t_gpu, 1e-9):7.1f}", flush=True)
    except Exception:
        failures.append(name)
        print(f"ERROR {name}:\n{traceback.format_exc()}", flush=True)


def main():
    print("tapegrad", tg.__version__, "| cuda available:", tg.cuda.is_available(),
          "| devices:", tg.cuda.device_count(), flush=True)
    if DEVICE == "cuda" and not tg.cuda.is_available():
        print("FAIL: CUDA not available:", tg.cuda.unavailable_reason())
        return 1
    rng = np.random.default_rng(0)
    for dt, rtol, atol in ((np.float32, 2e-5, 1e-6), (np.float64, 1e-12, 1e-14)):
        s = np.dtype(dt).name
        a = rng.standard_normal(N).astype(dt)
        b = rng.standard_normal(N).astype(dt)
        pos = (rng.random(N) + 0.5).astype(dt)
        m = rng.standard_normal((1024, 1024)).astype(dt)
        row = rng.standard_normal(1024).astype(dt)
        cases = [
            ("add", np.add, lambda x, y: x + y, [a, b]),
            ("multiply", np.multiply, lambda x, y: x * y, [a, b]),
            ("subtract", np.subtract, lambda x, y: x - y, [a, b]),
            ("divide", np.divide, lambda x, y: x / y, [a, pos]),
            ("exp", np.exp, tg.exp, [a]),
            ("log", np.log, tg.log, [pos]),
            ("sqrt", np.sqrt, tg.sqrt, [pos]),
            ("tanh", np.tanh, tg.tanh, [a]),
            ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), tg.sigmoid, [a]),
            ("relu", lambda x: np.maximum(x, 0), tg.relu, [a]),
            ("maximum", np.maximum, tg.maximum, [a, b]),
            ("broadcast add (1024x1024 + 1024)", np.add, lambda x, y: x + y, [m, row]),
            ("x*y+exp(x) fused chain", lambda x, y: x * y + np.exp(x),
             lambda x, y: x * y + tg.exp(x), [a, b]),
        ]
        for name, f_cpu, f_gpu, args in cases:
            run_case(f"{name} {s}", f_cpu, f_gpu, args, rtol, atol)
        # Reductions: float32 sums over 1M elements differ from NumPy's pairwise sum by rounding.
        rr = 1e-4 if dt == np.float32 else 1e-10
        run_case(f"sum (1M) {s}", np.sum, tg.sum, [a], rr, 1e-3 if dt == np.float32 else 1e-9)
        run_case(f"max (1M) {s}", np.max, tg.max, [a], 0, 0)
        run_case(f"sum axis=0 (1024x1024) {s}", lambda x: x.sum(axis=0), lambda x: x.sum(axis=0),
                 [m], rr, 1e-4 if dt == np.float32 else 1e-10)
        run_case(f"sum axis=1 (1024x1024) {s}", lambda x: x.sum(axis=1), lambda x: x.sum(axis=1),
                 [m], rr, 1e-4 if dt == np.float32 else 1e-10)
        # Backward through a few ops, gradients on the GPU.
        try:
            x = tg.tensor(a, device=DEVICE, requires_grad=True)
            y = tg.tensor(b, device=DEVICE, requires_grad=True)
            (x * y + tg.tanh(x)).sum().backward()
            sync()
            ok = (check(f"grad x {s}", x.grad.numpy(), (b + (1 - np.tanh(a) ** 2)).astype(dt), rtol * 10, atol)
                  & check(f"grad y {s}", y.grad.numpy(), a, rtol, atol))
            print(f"{'ok  ' if ok else 'BAD '} backward of sum(x*y + tanh(x)) {s}", flush=True)
        except Exception:
            failures.append(f"backward {s}")
            print(f"ERROR backward {s}:\n{traceback.format_exc()}", flush=True)
    if failures:
        print(f"\nFAILED {len(failures)}: {', '.join(failures)}")
        return 1
    print("\nall GPU smoke checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
