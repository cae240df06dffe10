"""Recurrent layers' training-step time against PyTorch CPU (issue 15): a small script,
not a registered workload.

``python -m benchmarks.rnn_speed [--rounds N] [--dtype float32]``: for LSTM, GRU and
RNN (tanh) at seq 50, batch 32, input 16, hidden 64, in four configurations (1 and 2
layers, uni- and bidirectional), times forward + backward of ``sum(output * G)`` in
tapegrad and in torch with the same weights, interleaved round by round in ONE process
(one BLAS/torch thread each), checks that both give the same loss and input gradient,
and prints the medians and the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

SEQ, BATCH, INPUT, HIDDEN = 50, 32, 16, 64
CONFIGS = [(1, False), (2, False), (1, True), (2, True)]      # (num_layers, bidirectional)
KINDS = ("LSTM", "GRU", "RNN")


def _pair(kind, layers, bidirectional, dtype):
    """(tapegrad step, torch step), each returning (loss, grad of x) as NumPy."""
    import tapegrad as tg
    import torch

    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((SEQ, BATCH, INPUT)).astype(dtype)
    d = 2 if bidirectional else 1
    g_np = rng.standard_normal((SEQ, BATCH, d * HIDDEN)).astype(dtype)
    tm = getattr(torch.nn, kind)(INPUT, HIDDEN, num_layers=layers, bidirectional=bidirectional)
    tm = tm.to(getattr(torch, np.dtype(dtype).name))
    gm = getattr(tg.nn, kind)(INPUT, HIDDEN, num_layers=layers, bidirectional=bidirectional,
                              dtype=dtype)
    gm.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    tx, tgrad = torch.from_numpy(x_np).requires_grad_(), torch.from_numpy(g_np)
    gx, ggrad = tg.tensor(x_np, requires_grad=True), tg.tensor(g_np)

    def run_torch():
        tx.grad = None
        tm.zero_grad()
        loss = (tm(tx)[0] * tgrad).sum()
        loss.backward()
        return loss.item(), tx.grad.numpy()

    def run_tapegrad():
        gx.grad = None
        for p in gm.parameters():
            p.grad = None
        loss = (gm(gx)[0] * ggrad).sum()
        loss.backward()
        return loss.item(), gx.grad.numpy()

    return run_tapegrad, run_torch


def _time(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    parser.add_argument("--kinds", default=",".join(KINDS))
    args = parser.parse_args(argv)
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    dtype = np.dtype(args.dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-9
    print(f"seq {SEQ}, batch {BATCH}, input {INPUT}, hidden {HIDDEN}, {dtype}, forward + "
          f"backward, median of {args.rounds} interleaved rounds, 1 thread")
    print(f"{'layer':6} {'layers':>6} {'bidir':>6} {'tapegrad ms':>12} {'torch ms':>9} "
          f"{'ratio':>6}")
    with threadpool_limits(1):
        for kind in args.kinds.split(","):
            for layers, bidirectional in CONFIGS:
                ours, theirs = _pair(kind, layers, bidirectional, dtype)
                (la, ga), (lb, gb) = ours(), theirs()       # warm-up and check
                scale = max(1.0, abs(lb))
                if abs(la - lb) > tol * scale or not np.allclose(ga, gb, rtol=tol * 10,
                                                                 atol=tol):
                    raise SystemExit(f"{kind} layers={layers} bidirectional={bidirectional}: "
                                     f"tapegrad and torch differ (loss {la} vs {lb})")
                a, b = [], []
                for _ in range(args.rounds):
                    a.append(_time(ours))
                    b.append(_time(theirs))
                ratio = statistics.median(x / y for x, y in zip(a, b))
                print(f"{kind:6} {layers:>6} {str(bidirectional):>6} "
                      f"{statistics.median(a) * 1e3:>12.1f} {statistics.median(b) * 1e3:>9.1f} "
                      f"{ratio:>5.2f}x")


if __name__ == "__main__":
    main()
