"""Run under ``mpiexec -n R``: the checks of test_distributed_mpi.py that need several
ranks. Each rank writes what it found to ``<out>/rank<r>.json``; the test reads them.

    mpiexec -n 2 python ddp_checks.py OUT [--only equivalence]
"""

import argparse
import json
import sys
import time

import numpy as np
import tapegrad as tg
from sklearn.datasets import load_digits

STEPS = 5
GLOBAL_BATCH = 64


def digits():
    data = load_digits()
    return (data.data / 16.0).astype(np.float64), data.target


def digits_mlp(seed):
    """The digits MLP of examples/train_digits.py, in float64, without dropout."""
    tg.manual_seed(seed)
    return tg.nn.Sequential(
        tg.nn.Linear(64, 128, dtype=np.float64), tg.nn.ReLU(),
        tg.nn.Linear(128, 128, dtype=np.float64), tg.nn.ReLU(),
        tg.nn.Linear(128, 10, dtype=np.float64))


def params(model):
    return [p.numpy().copy() for p in model.parameters()]


def max_diff(a, b):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


def check_equivalence(world, report):
    """DDP on R ranks with GLOBAL_BATCH / R rows each == one process on GLOBAL_BATCH rows."""
    x, y = digits()
    R = world.size
    # The ranks start from different weights: the wrap must give everyone rank 0's.
    local = digits_mlp(seed=100 + world.rank)
    ddp = tg.distributed.DistributedDataParallel(local, bucket_cap_mb=0.05)
    reference = digits_mlp(seed=100)
    report["start_equal_to_rank0"] = max_diff(params(local), params(reference)) == 0.0
    report["buckets"] = len(ddp._buckets)
    opt = tg.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    ref_opt = tg.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    shard = tg.distributed.DistributedDataLoader(x, y, batch_size=GLOBAL_BATCH // R, seed=7)
    whole = tg.distributed.DistributedDataLoader(x, y, batch_size=GLOBAL_BATCH, seed=7,
                                                 num_replicas=1, rank=0)
    for step, ((xb, yb), (xg, yg)) in enumerate(zip(shard, whole)):
        if step == STEPS:
            break
        opt.zero_grad()
        tg.cross_entropy(ddp(xb), yb).backward()
        opt.step()
        ref_opt.zero_grad()
        tg.cross_entropy(reference(xg), yg).backward()
        ref_opt.step()
    report["steps"] = ddp.stats.steps
    report["max_param_diff"] = max_diff(params(local), params(reference))
    report["moved"] = max_diff(params(reference), params(digits_mlp(seed=100)))
    report["bytes_per_step"] = ddp.stats.bytes_per_step
    report["n_params"] = sum(p.size for p in reference.parameters())


def check_no_sync(world, report):
    """Two micro-batches, the first under no_sync: one all-reduce of the accumulated sum."""
    x, y = digits()
    R, b = world.size, 8
    ddp = tg.distributed.DistributedDataParallel(digits_mlp(seed=1))
    reference = digits_mlp(seed=1)
    rows = [np.arange(i * R * b, (i + 1) * R * b) for i in range(2)]   # two global batches
    with ddp.no_sync():
        mine = rows[0][world.rank::R]
        tg.cross_entropy(ddp(x[mine]), y[mine]).backward()
    report["no_sync_allreduces"] = ddp.stats.allreduces
    mine = rows[1][world.rank::R]
    tg.cross_entropy(ddp(x[mine]), y[mine]).backward()
    for r in rows:
        tg.cross_entropy(reference(x[r]), y[r]).backward()
    report["no_sync_grad_diff"] = max_diff([p.grad.numpy() for p in ddp.module.parameters()],
                                           [p.grad.numpy() for p in reference.parameters()])
    report["no_sync_steps"] = ddp.stats.steps


class Mark(tg.Function):
    """Identity that records when backward reaches it (the bottom of the network)."""

    log = None

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        Mark.log.append((time.perf_counter(), "bottom_reached", None))
        return g


def check_overlap(world, report):
    """With one bucket per layer, the last layers' all-reduces start (and some finish)
    while backward is still computing the first layers' gradients."""
    tg.manual_seed(3)
    width, depth = 512, 8
    layers = []
    for _ in range(depth):
        layers += [tg.nn.Linear(width, width, dtype=np.float32), tg.nn.Tanh()]
    net = tg.nn.Sequential(*layers)
    # a layer's weight is 1 MiB: a cap of 1.1 MiB gives one bucket per layer
    ddp = tg.distributed.DistributedDataParallel(net, bucket_cap_mb=1.1)
    x = tg.random.randn(256, width, dtype=np.float32)
    x.requires_grad = True          # so the Mark node has a gradient to pass on
    for _attempt in range(3):       # the first step also warms up the MPI connections
        events = []
        ddp.trace = Mark.log = events
        out = ddp(Mark.apply(x)).sum()
        events.append((time.perf_counter(), "backward_called", None))
        out.backward()
        events.append((time.perf_counter(), "backward_returned", None))
    kinds = [(k, w) for _, k, w in events]
    report["overlap_events"] = [[round(t - events[0][0], 6), k, w] for t, k, w in events]
    report["n_buckets_overlap"] = len(ddp._buckets)
    first_grad = kinds.index(("grad_ready", "0.weight")) if ("grad_ready", "0.weight") in kinds \
        else kinds.index(("grad_ready", "0.bias"))
    last_grad = max(i for i, (k, _) in enumerate(kinds) if k == "grad_ready")
    report["starts_before_last_grad"] = sum(1 for k, _ in kinds[:last_grad] if k == "allreduce_start")
    report["done_before_last_grad"] = sum(1 for k, _ in kinds[:last_grad] if k == "allreduce_done")
    report["bucket0_start_index"] = kinds.index(("allreduce_start", 0))
    report["bottom_index"] = kinds.index(("bottom_reached", None))
    report["first_layer_grad_index"] = first_grad
    report["returned_index"] = kinds.index(("backward_returned", None))


def check_sampler(world, report):
    s = tg.distributed.DistributedSampler(103, seed=5)
    shards = []
    for epoch in range(2):
        s.set_epoch(epoch)
        shards.append(s.indices().tolist())
    report["sampler_epochs"] = shards


def check_bad_inputs(world, report):
    """Errors every rank raises the same way (so nobody is left waiting)."""
    tg.manual_seed(0)
    try:
        tg.distributed.DistributedDataParallel(tg.nn.Linear(4, 3 + world.rank % 2))
    except ValueError as exc:
        report["mismatch_error"] = str(exc)
    try:
        tg.distributed.DistributedDataParallel(
            tg.nn.Sequential(*[tg.nn.Linear(4, 4) for _ in range(1 + world.rank % 2)]))
    except ValueError as exc:
        report["count_mismatch_error"] = str(exc)

    class TwoHeads(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = tg.nn.Linear(4, 2)
            self.b = tg.nn.Linear(4, 2)

        def forward(self, x, head):
            return self.a(x) if head == "a" else self.b(x)

    x = tg.ones((3, 4))
    ddp = tg.distributed.DistributedDataParallel(TwoHeads(), bucket_cap_mb=1e-5)
    ddp(x, "a").sum().backward()
    try:
        ddp(x, "a")
    except RuntimeError as exc:
        report["unused_error"] = str(exc)
    ddp = tg.distributed.DistributedDataParallel(TwoHeads(), find_unused_parameters=True)
    ddp(x, "a" if world.rank == 0 else "b").sum().backward()   # each rank uses one head
    ddp(x, "a").sum().backward()                               # and the next step works
    report["unused_grads"] = {n: p.grad.numpy().tolist() for n, p in ddp.named_parameters()}
    out = ddp(x, "a")
    for p in ddp.parameters():      # zero_grad between forward and backward is respected
        p.grad = None
    out.sum().backward()
    report["unused_grads_after_zero"] = {n: p.grad.numpy().tolist()
                                         for n, p in ddp.named_parameters()}


def check_tg_grad(world, report):
    """tg.grad under DDP: this rank's own gradients, .grad untouched, the next backward
    still reduces (the hooks used to run: one parameter averaged, .grad written)."""
    x, y = digits()
    ddp = tg.distributed.DistributedDataParallel(digits_mlp(seed=3), bucket_cap_mb=0.05)
    reference = digits_mlp(seed=3)
    mine = np.arange(16)[world.rank::world.size]
    params = list(ddp.module.parameters())
    grads = tg.grad(tg.cross_entropy(ddp(x[mine]), y[mine]), params)
    local = tg.grad(tg.cross_entropy(reference(x[mine]), y[mine]), list(reference.parameters()))
    report["tg_grad_local_diff"] = max_diff([g.numpy() for g in grads], [g.numpy() for g in local])
    report["tg_grad_left_grad_none"] = all(p.grad is None for p in params)
    report["tg_grad_steps"] = ddp.stats.steps
    tg.cross_entropy(ddp(x[mine]), y[mine]).backward()
    tg.cross_entropy(reference(x[:16]), y[:16]).backward()   # the whole batch: the average
    report["tg_grad_then_backward_diff"] = max_diff(
        [p.grad.numpy() for p in params], [p.grad.numpy() for p in reference.parameters()])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    world = tg.distributed.init(timeout=60)
    report = {"rank": world.rank, "size": world.size}
    checks = [check_equivalence, check_no_sync, check_overlap, check_sampler, check_bad_inputs,
              check_tg_grad]
    for check in checks:
        if args.only and check.__name__ != "check_" + args.only:
            continue
        check(world, report)
    with open(f"{args.out}/rank{world.rank}.json", "w") as f:
        json.dump(report, f)
    tg.distributed.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
