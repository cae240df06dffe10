"""W3 data-parallel: one training step of the MLP 784-2048-2048-10 (float32, ReLU, mean
cross-entropy, SGD) on a global batch of 256, with 1 rank vs R ranks of
tg.distributed.DistributedDataParallel on this machine, and the bytes communicated.

    .venv/bin/python benchmarks/distributed_w3.py              # 1 vs 2 ranks
    .venv/bin/python benchmarks/distributed_w3.py --ranks 1,2,4 --steps 20

The driver launches ``mpiexec -n R`` on this same file (``--worker``) for each R. Every
rank uses one BLAS thread (so R ranks use R cores); the 1-rank run is also timed with as
many threads as the largest R, the fair single-process comparison. Each run first checks
that its first step's averaged gradients equal a single process's on the whole batch
(float32, rtol 1e-4), then times ``--steps`` steps after ``--warmup``, and reports the
median step, the same step without communication (``no_sync``: the compute alone), the
time spent waiting for all-reduces at the end of backward, the bytes
all-reduced per step, and a bare ``Allreduce`` of that many bytes (what the same traffic
costs with nothing to overlap).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SIZES = (784, 2048, 2048, 10)
GLOBAL_BATCH = 256
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _model(tg, np):
    layers = []
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers.append(tg.nn.Linear(a, b, dtype=np.float32))
        if i < len(SIZES) - 2:
            layers.append(tg.nn.ReLU())
    return tg.nn.Sequential(*layers)


def worker(args):
    import numpy as np
    import tapegrad as tg
    from mpi4py import MPI

    world = tg.distributed.init(timeout=120)
    R = world.size
    if GLOBAL_BATCH % R:
        raise SystemExit(f"the global batch {GLOBAL_BATCH} does not split over {R} ranks")
    b = GLOBAL_BATCH // R
    rng = np.random.default_rng(0)
    x = rng.standard_normal((GLOBAL_BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], GLOBAL_BATCH)
    mine = slice(world.rank * b, (world.rank + 1) * b)

    tg.manual_seed(0)
    model = _model(tg, np)
    reference = _model(tg, np)
    reference.load_state_dict(model.state_dict())
    ddp = tg.distributed.DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
    opt = tg.optim.SGD(ddp.parameters(), lr=0.01)

    # correctness: averaged gradients == one process on the whole batch
    tg.cross_entropy(ddp(x[mine]), y[mine]).backward()
    tg.cross_entropy(reference(x), y).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        if not np.allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6):
            raise SystemExit(f"rank {world.rank}: averaged gradients differ from one process's")
    del reference
    opt.zero_grad()

    xb, yb = tg.tensor(x[mine]), y[mine]
    times, waits, local = [], [], []
    for step in range(args.warmup + args.steps):
        # a synchronized step, then the same step without communication (no_sync), in turn
        tg.distributed.barrier()
        w0 = ddp.stats.wait_seconds
        t0 = time.perf_counter()
        opt.zero_grad()
        tg.cross_entropy(ddp(xb), yb).backward()
        opt.step()
        t1 = time.perf_counter()
        tg.distributed.barrier()
        t2 = time.perf_counter()
        opt.zero_grad()
        with ddp.no_sync():
            tg.cross_entropy(ddp(xb), yb).backward()
        opt.step()
        t3 = time.perf_counter()
        if step >= args.warmup:
            times.append(t1 - t0)
            waits.append(ddp.stats.wait_seconds - w0)
            local.append(t3 - t2)
    # the slowest rank sets the pace
    step_ms = tg.distributed.all_reduce(float(np.median(times)) * 1e3, op="max")
    wait_ms = tg.distributed.all_reduce(float(np.median(waits)) * 1e3, op="max")
    local_ms = tg.distributed.all_reduce(float(np.median(local)) * 1e3, op="max")

    buf = np.ones(ddp.stats.bytes_per_step // 4, np.float32)
    bare = []
    for _ in range(5):
        world.comm.Barrier()
        t0 = time.perf_counter()
        world.comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        bare.append(time.perf_counter() - t0)
    bare_ms = tg.distributed.all_reduce(float(np.median(bare)) * 1e3, op="max")
    if world.rank == 0:
        print(json.dumps({
            "ranks": R, "threads": int(os.environ.get("OPENBLAS_NUM_THREADS", "0")),
            "batch_per_rank": b, "step_ms": step_ms, "wait_ms": wait_ms, "local_ms": local_ms,
            "bytes_per_step": ddp.stats.bytes_per_step, "buckets": len(ddp._buckets),
            "bare_allreduce_ms": bare_ms if R > 1 else 0.0,
        }), flush=True)


def _launch(ranks, threads, args):
    here = Path(sys.executable).parent / "mpiexec"
    mpiexec = str(here) if here.exists() else "mpiexec"
    env = dict(os.environ)
    env.update({v: str(threads) for v in THREAD_VARS})
    cmd = [mpiexec, "-n", str(ranks), sys.executable, __file__, "--worker",
           "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--bucket-cap-mb", str(args.bucket_cap_mb)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout[-2000:]}{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    ranks = [int(r) for r in args.ranks.split(",")]
    runs = [(1, max(ranks))] if max(ranks) > 1 else []
    runs += [(r, 1) for r in ranks]
    results = []
    print(f"W3 data-parallel: MLP {'-'.join(map(str, SIZES))}, float32, global batch "
          f"{GLOBAL_BATCH}, {args.steps} timed steps (median), {os.cpu_count()} cores")
    print(f"{'ranks':>5} {'threads/rank':>12} {'batch/rank':>10} {'step ms':>9} "
          f"{'speed-up':>8} {'no-comm ms':>10} {'wait ms':>8} {'MB/step':>8} "
          f"{'bare allreduce ms':>17}")
    base = None
    for r, t in runs:
        res = _launch(r, t, args)
        results.append(res)
        if r == 1 and t == 1:
            base = res["step_ms"]
    for res in results:
        speed = f"{base / res['step_ms']:.2f}x" if base else "-"
        print(f"{res['ranks']:>5} {res['threads']:>12} {res['batch_per_rank']:>10} "
              f"{res['step_ms']:>9.1f} {speed:>8} {res['local_ms']:>10.1f} {res['wait_ms']:>8.1f} "
              f"{res['bytes_per_step'] / 1e6:>8.2f} {res['bare_allreduce_ms']:>17.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    sys.exit(main())
