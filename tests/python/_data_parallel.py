"""The data-parallel step the collectives tests capture: one rank's part, run by a thread (simulator) or by a
process of its own (GPUs: NCCL recommends one GPU per process for captured collectives)."""

from __future__ import annotations

import numpy as np

import cuweave as cw

STEPS = 100
X = np.arange(1000, dtype=np.float64)


def expected(ranks: int) -> np.ndarray:
    return -STEPS * X * (ranks * (ranks + 1) / 2)


def captured_step(comm, rank: int) -> np.ndarray:
    """This rank's gradient, an all-reduce on a stream of its own forked from the capturing stream through an
    event and joined back, and the update; captured once, replayed STEPS times. Returns the weights."""
    with cw.Device(rank):
        main, side = cw.Stream(name=f"step {rank}"), cw.Stream(name=f"all-reduce {rank}")
        data = cw.to_device(X, stream=main)
        grad = cw.empty(X.shape, np.float64, stream=main)
        weights = cw.zeros(X.shape, np.float64, stream=main)
        main.synchronize()
        with cw.capture(main, mode="thread_local") as step:  # other ranks' threads go on meanwhile
            cw.ops.scale(data, float(rank + 1), out=grad)  # this rank's gradient
            side.wait(main.record())
            comm.all_reduce(grad, stream=side)
            main.wait(side.record())
            cw.ops.axpy(-1.0, grad, weights, out=weights)  # the update
        for _ in range(STEPS):
            step.graph.replay(main)
        result = weights.to_numpy(stream=main)
        for s in (main, side):
            s.synchronize()
            s.close()
    comm.close()
    return result
