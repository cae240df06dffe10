"""Train the digits MLP of train_digits.py data-parallel over MPI: every rank trains on its
own shard of each global batch, tg.distributed.DistributedDataParallel averages the
gradients during backward, and the ranks' models stay identical.

    mpiexec -n 2 .venv/bin/python examples/train_digits_ddp.py --epochs 10
    mpiexec -n 4 -hosts node1,node2 .venv/bin/python examples/train_digits_ddp.py
    .venv/bin/python examples/train_digits_ddp.py          # a world of one process

(`.venv/bin/mpiexec` is the MPICH that ci/setup installs.) The global batch
(`--batch-size`, 64 by default) is split evenly over the ranks, so the training follows
the same trajectory whatever the number of processes (up to float rounding; Dropout draws
different masks on each rank).
"""

import argparse
import time

import numpy as np
import tapegrad as tg
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def build_model(hidden=128, dropout=0.1):
    return tg.nn.Sequential(
        tg.nn.Linear(64, hidden, dtype=np.float32), tg.nn.ReLU(), tg.nn.Dropout(dropout),
        tg.nn.Linear(hidden, hidden, dtype=np.float32), tg.nn.ReLU(),
        tg.nn.Linear(hidden, 10, dtype=np.float32),
    )


def accuracy(model, x, y):
    """Accuracy over the whole test set: each rank scores its shard, the counts are summed."""
    world = tg.distributed.init()
    mine = np.arange(world.rank, len(x), world.size)
    model.eval()
    with tg.no_grad():
        predicted = model(tg.tensor(x[mine])).numpy().argmax(axis=1)
    model.train()
    correct = tg.distributed.all_reduce(int((predicted == y[mine]).sum()), op="sum")
    return correct / len(x)


def main(epochs=10, batch_size=64, lr=2e-3, seed=0):
    world = tg.distributed.init()
    say = print if world.rank == 0 else (lambda *a, **k: None)
    if batch_size % world.size:
        raise SystemExit(f"--batch-size {batch_size} does not split evenly over {world.size} ranks")
    tg.manual_seed(seed + world.rank)       # different Dropout masks on each rank
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.25, random_state=seed, stratify=digits.target)
    say(f"digits: {len(x_train)} training and {len(x_test)} test images; {world.size} "
        f"rank(s), global batch {batch_size} = {world.size} x {batch_size // world.size}")

    model = tg.distributed.DistributedDataParallel(build_model())   # rank 0's weights
    optimizer = tg.optim.Adam(model.parameters(), lr=lr)
    loader = tg.distributed.DistributedDataLoader(
        x_train, y_train, batch_size=batch_size // world.size, seed=seed)

    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        total, rows = 0.0, 0
        for xb, yb in loader:                # this rank's shard, reshuffled every epoch
            loss = tg.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()                  # returns with gradients averaged over ranks
            optimizer.step()
            total += loss.item() * len(yb)
            rows += len(yb)
        train_loss = tg.distributed.all_reduce(total, op="sum") / \
            tg.distributed.all_reduce(rows, op="sum")
        acc = accuracy(model, x_test, y_test)
        say(f"epoch {epoch:2d}  train loss {train_loss:.4f}  test accuracy {acc:.4f}  "
            f"{time.perf_counter() - t0:.2f} s/epoch")

    # the ranks must still hold the same model
    flat = np.concatenate([p.numpy().ravel() for p in model.parameters()])
    spread = tg.distributed.all_reduce(flat, op="max") - tg.distributed.all_reduce(flat, op="min")
    if spread.max() != 0:
        raise SystemExit(f"the ranks' models differ by up to {spread.max()}")
    say(f"trained in {time.perf_counter() - start:.1f} s; the {world.size} ranks hold the "
        f"same weights; {model.stats.bytes_per_step} bytes all-reduced per step, "
        f"{model.stats.steps} steps")
    return acc


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64, help="the global batch")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.epochs, args.batch_size, args.lr, args.seed)
