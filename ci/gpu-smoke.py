"""GPU benchmark for tapegrad-cuda, run by ci/gpu-check on a machine with an NVIDIA GPU
(not part of the test suite: the name has a hyphen so pytest never collects it).

1. elementwise add / multiply / tanh on 2**26 float32 elements: GB/s (bytes read + written
   per second), against the device's ~4,300 GB/s copy bandwidth and against PyTorch CUDA;
2. an 8192 x 8192 float32 matmul: TFLOP/s against PyTorch (both FP32 GEMM, no TF32);
3. the W3 training step (MLP 784-2048-2048-10, batch 256, float32, cross-entropy, SGD):
   time per step against PyTorch CUDA, from the same initial weights.

Every tapegrad result is checked (against NumPy, or PyTorch for the big matmul and the
training losses) before its figure is printed. Without PyTorch the ratios are skipped.
TG_SMOKE_DEVICE=cpu runs the same script, at small sizes, on the CPU (TG_SMOKE_SMALL=1: small
sizes on cuda), to test the script
without a GPU. Writes $OUT/gpu-bench.json when OUT is set. Exits non-zero on a failure.
"""

import json
import os
import statistics
import sys
import time
import traceback

import numpy as np
import tapegrad as tg

DEVICE = os.environ.get("TG_SMOKE_DEVICE", "cuda")
SMALL = DEVICE != "cuda" or os.environ.get("TG_SMOKE_SMALL") == "1"
N = 1 << (16 if SMALL else 26)
MM = 256 if SMALL else 8192
REPS = 3 if SMALL else 10
COPY_GBPS = 4300.0                    # measured device-to-device copy bandwidth of the H200
failures, results = [], {}

try:
    import torch
    TORCH = torch.cuda.is_available() or SMALL
    TDEV = "cuda" if torch.cuda.is_available() else "cpu"
except ImportError:
    torch, TORCH, TDEV = None, False, None


def sync():
    if DEVICE == "cuda":
        tg.cuda.synchronize()


def tsync():
    if TDEV == "cuda":
        torch.cuda.synchronize()


def best_time(fn, synchronize, reps=REPS):
    """Median seconds of fn() over reps runs, after one warm-up run."""
    out = fn()
    synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        synchronize()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def fail(name, why):
    failures.append(name)
    print(f"FAIL {name}: {why}", flush=True)


def elementwise():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(N, dtype=np.float32)
    b = rng.standard_normal(N, dtype=np.float32)
    ta, tb = tg.tensor(a, device=DEVICE), tg.tensor(b, device=DEVICE)
    if TORCH:
        pa, pb = torch.from_numpy(a).to(TDEV), torch.from_numpy(b).to(TDEV)
    cases = [("add", lambda: ta + tb, lambda: pa + pb, lambda: a + b, 3),
             ("multiply", lambda: ta * tb, lambda: pa * pb, lambda: a * b, 3),
             ("tanh", lambda: tg.tanh(ta), lambda: torch.tanh(pa), lambda: np.tanh(a), 2)]
    for name, f_tg, f_torch, f_np, arrays in cases:
        out, t = best_time(f_tg, sync)
        want = f_np()
        if not np.allclose(out.numpy(), want, rtol=2e-6, atol=2e-6):
            fail(f"elementwise {name}", "differs from NumPy")
            continue
        gbps = arrays * 4 * N / t / 1e9
        row = {"seconds": t, "GB/s": gbps, "fraction_of_copy_bandwidth": gbps / COPY_GBPS}
        line = (f"{name:<9} 2^{N.bit_length() - 1} f32: tapegrad {t * 1e3:8.3f} ms "
                f"{gbps:8.1f} GB/s ({100 * gbps / COPY_GBPS:5.1f}% of {COPY_GBPS:.0f})")
        if TORCH:
            _, tt = best_time(f_torch, tsync)
            row.update(torch_seconds=tt, torch_GBps=arrays * 4 * N / tt / 1e9,
                       tapegrad_over_torch_time=t / tt)
            line += f" | torch {tt * 1e3:8.3f} ms {row['torch_GBps']:8.1f} GB/s | x{t / tt:5.2f}"
        results[f"elementwise_{name}"] = row
        print(line, flush=True)


def matmul():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((MM, MM), dtype=np.float32)
    b = rng.standard_normal((MM, MM), dtype=np.float32)
    ta, tb = tg.tensor(a, device=DEVICE), tg.tensor(b, device=DEVICE)
    out, t = best_time(lambda: ta @ tb, sync)
    got = out.numpy()
    # Check against a float64 product on a few rows (the whole one is slow on the host).
    rows = rng.integers(0, MM, 8)
    want = a[rows].astype(np.float64) @ b.astype(np.float64)
    err = np.max(np.abs(got[rows] - want)) / np.max(np.abs(want))
    if not err < 1e-4:
        fail("matmul", f"relative error {err:.2e} against float64")
        return
    flops = 2.0 * MM ** 3
    row = {"seconds": t, "TFLOP/s": flops / t / 1e12, "relative_error_vs_f64": float(err)}
    line = f"matmul {MM}^2 f32: tapegrad {t * 1e3:8.2f} ms {row['TFLOP/s']:7.2f} TFLOP/s"
    if TORCH:
        if TDEV == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False      # FP32 against FP32
        pa, pb = torch.from_numpy(a).to(TDEV), torch.from_numpy(b).to(TDEV)
        _, tt = best_time(lambda: pa @ pb, tsync)
        row.update(torch_seconds=tt, torch_TFLOPs=flops / tt / 1e12,
                   tapegrad_over_torch_time=t / tt)
        line += f" | torch {tt * 1e3:8.2f} ms {row['torch_TFLOPs']:7.2f} TFLOP/s | x{t / tt:5.2f}"
    results["matmul"] = row
    print(line, flush=True)


def w3():
    rng = np.random.default_rng(2)
    sizes = [784, 2048, 2048, 10]
    batch, lr, steps = 256, 0.01, (3 if SMALL else 20)
    init = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1 / np.sqrt(fan_in)
        init += [rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                 rng.uniform(-bound, bound, fan_out).astype(np.float32)]
    x = rng.standard_normal((batch, 784), dtype=np.float32)
    y = rng.integers(0, 10, batch)

    ps = [tg.tensor(p, device=DEVICE, requires_grad=True) for p in init]
    tx, ty = tg.tensor(x, device=DEVICE), tg.tensor(y, device=DEVICE)

    def tg_step():
        h = tg.relu(tg.linear(tx, ps[0], ps[1]))
        h = tg.relu(tg.linear(h, ps[2], ps[3]))
        loss = tg.cross_entropy(tg.linear(h, ps[4], ps[5]), ty)
        for p in ps:
            p.grad = None
        loss.backward()
        with tg.no_grad():
            for p in ps:
                p -= lr * p.grad
        return loss

    tg_losses = [tg_step().item() for _ in range(2)]
    _, t = best_time(tg_step, sync, steps)
    row = {"seconds_per_step": t, "first_losses": tg_losses}
    line = f"W3 step (784-2048-2048-10, batch 256, f32): tapegrad {t * 1e3:8.3f} ms"
    if TORCH:
        F = torch.nn.functional
        qs = [torch.from_numpy(p).to(TDEV).requires_grad_() for p in init]
        qx, qy = torch.from_numpy(x).to(TDEV), torch.from_numpy(y).to(TDEV)

        def torch_step():
            h = F.relu(F.linear(qx, qs[0], qs[1]))
            h = F.relu(F.linear(h, qs[2], qs[3]))
            loss = F.cross_entropy(F.linear(h, qs[4], qs[5]), qy)
            for q in qs:
                q.grad = None
            loss.backward()
            with torch.no_grad():
                for q in qs:
                    q -= lr * q.grad
            return loss

        torch_losses = [torch_step().item() for _ in range(2)]
        if not np.allclose(tg_losses, torch_losses, rtol=1e-4):
            fail("W3", f"losses {tg_losses} differ from PyTorch's {torch_losses}")
            return
        _, tt = best_time(torch_step, tsync, steps)
        row.update(torch_seconds_per_step=tt, tapegrad_over_torch_time=t / tt,
                   torch_first_losses=torch_losses)
        line += f" | torch {tt * 1e3:8.3f} ms | x{t / tt:5.2f}"
    results["w3_step"] = row
    print(line, flush=True)


def main():
    print("tapegrad", tg.__version__, "| device:", DEVICE, "| cuda available:",
          tg.cuda.is_available(), "| torch:", torch.__version__ if torch else "not installed",
          flush=True)
    if DEVICE == "cuda" and not tg.cuda.is_available():
        print("FAIL: CUDA not available:", tg.cuda.unavailable_reason())
        return 1
    for part in (elementwise, matmul, w3):
        try:
            part()
        except Exception:
            fail(part.__name__, "\n" + traceback.format_exc())
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "gpu-bench.json"), "w") as f:
            json.dump({"device": DEVICE, "results": results, "failures": failures}, f, indent=2)
    if failures:
        print(f"\nFAILED {len(failures)}: {', '.join(failures)}")
        return 1
    print("\nall GPU benchmark checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
