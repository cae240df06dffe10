"""Run under ``mpiexec -n 2``: rank 1 fails in the middle of training, in the way MODE
says; rank 0 must not hang. test_distributed_mpi.py checks the exit status, the time it
took and the messages.

    mpiexec -n 2 python failures.py raise|hang|die
"""

import os
import sys
import time

import numpy as np
import tapegrad as tg


def main(mode):
    world = tg.distributed.init(timeout=3)
    tg.manual_seed(0)
    model = tg.distributed.DistributedDataParallel(
        tg.nn.Sequential(tg.nn.Linear(8, 16), tg.nn.Tanh(), tg.nn.Linear(16, 2)))
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    x, y = tg.random.randn(4, 8), np.array([0, 1, 0, 1])
    for step in range(1000):
        if step == 3 and world.rank == 1:
            print(f"rank 1: failing ({mode}) at step {step}", flush=True)
            if mode == "raise":
                raise ValueError("rank 1 broke on purpose")
            if mode == "hang":
                time.sleep(120)         # alive, but never joins the next all-reduce
            if mode == "die":
                os._exit(17)
        opt.zero_grad()
        tg.cross_entropy(model(x), y).backward()
        opt.step()
    print(f"rank {world.rank}: finished all steps (the failure was not noticed)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
