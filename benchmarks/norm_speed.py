"""Timing of the normalisation and softmax-family ops, tapegrad eager vs PyTorch CPU.

One forward + backward (``y.backward(G)`` with a fixed G) per sample, float32, one thread
each, interleaved (tapegrad, torch, tapegrad, ...) in one process; prints medians and the
ratio. Shapes: W7's batch norm input (64, 32, 8, 8) and W8's layer norm input
(16, 64, 128); softmax over W8's attention scores (16, 4, 64, 64).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.norm_speed
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _cases(tg, torch):
    F = torch.nn.functional
    tF = tg.nn.functional
    rng = np.random.default_rng(0)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    ln_x, ln_w, ln_b = r(16, 64, 128), r(128), r(128)
    bn_x, bn_w, bn_b = r(64, 32, 8, 8), r(32), r(32)
    sm_x = r(16, 4, 64, 64)
    ce_x, ce_t = r(1024, 128), rng.integers(0, 128, 1024)
    rm, rv = np.zeros(32, np.float32), np.ones(32, np.float32)
    cases = {
        "layer_norm (16,64,128) affine": (
            (ln_x, ln_w, ln_b), lambda L, x, w, b: L[1].layer_norm(x, (128,), w, b)),
        "rms_norm (16,64,128) weight": (
            (ln_x, ln_w), lambda L, x, w: L[1].rms_norm(x, (128,), w)),
        "group_norm (64,32,8,8) G=8 affine": (
            (bn_x, bn_w, bn_b), lambda L, x, w, b: L[1].group_norm(x, 8, w, b)),
        "batch_norm train (64,32,8,8) affine": (
            (bn_x, bn_w, bn_b), lambda L, x, w, b: L[1].batch_norm(
                x, L[2](rm), L[2](rv), w, b, training=True)),
        "batch_norm eval (64,32,8,8) affine": (
            (bn_x, bn_w, bn_b), lambda L, x, w, b: L[1].batch_norm(
                x, L[2](rm), L[2](rv), w, b, training=False)),
        "instance_norm (64,32,8,8)": (
            (bn_x,), lambda L, x: L[1].instance_norm(x)),
        "softmax (16,4,64,64) last axis": (
            (sm_x,), lambda L, x: L[1].softmax(x, -1)),
        "log_softmax (1024,128)": (
            (ce_x,), lambda L, x: L[1].log_softmax(x, -1)),
        "cross_entropy (1024,128) labels": (
            (ce_x,), lambda L, x: L[1].cross_entropy(x, L[3](ce_t))),
    }
    libs = {
        "tapegrad": (tg, tF, lambda a: tg.tensor(a.copy()),
                     lambda t: tg.tensor(t), lambda a: tg.tensor(a, requires_grad=True)),
        "torch": (torch, F, lambda a: torch.tensor(a.copy()),
                  lambda t: torch.tensor(t), lambda a: torch.tensor(a, requires_grad=True)),
    }
    return cases, libs


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", "--rounds", type=int, default=30)
    parser.add_argument("-k", "--only", default="")
    args = parser.parse_args(argv)
    import tapegrad as tg
    import torch
    torch.set_num_threads(1)
    cases, libs = _cases(tg, torch)
    print(f"{'case':40s} {'tapegrad ms':>12s} {'torch ms':>10s} {'ratio':>7s}")
    for name, (arrays, fn) in cases.items():
        if args.only and args.only not in name:
            continue
        runs = {}
        for lib, (mod, F, buf, lab, leaf) in libs.items():
            L = (mod, F, buf, lab)      # library, its functional module, buffer, labels
            xs = [leaf(a) for a in arrays]
            out = fn(L, *xs)
            g = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
            gt = (tg.tensor(g) if lib == "tapegrad" else torch.tensor(g)) if out.ndim else None

            def step(L=L, xs=xs, gt=gt, fn=fn):
                for x in xs:
                    x.grad = None
                y = fn(L, *xs)
                y.backward(gt)
            runs[lib] = step
        times = {lib: [] for lib in runs}
        for lib, step in runs.items():
            for _ in range(3):
                step()
        for _ in range(args.rounds):
            for lib, step in runs.items():
                t0 = time.perf_counter()
                step()
                times[lib].append(time.perf_counter() - t0)
        med = {lib: statistics.median(v) * 1e3 for lib, v in times.items()}
        print(f"{name:40s} {med['tapegrad']:12.3f} {med['torch']:10.3f} "
              f"{med['tapegrad'] / med['torch']:6.2f}x")


if __name__ == "__main__":
    main()
