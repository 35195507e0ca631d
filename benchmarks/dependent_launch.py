"""Programmatic dependent launch: a chain of short dependent kernels, each launched as a programmatic dependent of
the one before (Kernel.programmatic) or as a plain launch, eagerly and as one captured graph replayed.

Each of --kernels kernels waits for the previous one (griddepcontrol.wait), then adds 1 to --n floats of its
output. Figures: wall µs per kernel, the final synchronize included, medians of --reps, sides in turn. Needs a GPU of
compute capability 9.0 or later; prints so and exits 0 elsewhere.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import cuweave as cw
from libraries import gpu_machine_info

STEP = r"""
extern "C" __global__ void dependent_step(const float* previous, float* out, int n) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = previous[i] + 1.0f;
}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, default=100)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    if cw.backend() != "cuda" or cw.Device(0).properties.compute_capability < (9, 0):
        print("programmatic dependent launch: skipped (needs a GPU of compute capability 9.0 or later)")
        return 0
    stream = cw.Stream()
    plain = cw.compile(STEP, "dependent_step")
    programmatic = cw.compile(STEP + "\n// programmatic\n", "dependent_step")
    programmatic.programmatic = True
    buffers = [cw.zeros(args.n, np.float32, stream=stream) for _ in range(2)]
    blocks = (args.n + 255) // 256

    def chain(kernel) -> None:
        for step in range(args.kernels):
            kernel(blocks, 256, (buffers[step % 2], buffers[(step + 1) % 2], args.n), stream=stream)

    graphs = {}
    for name, kernel in (("plain", plain), ("programmatic", programmatic)):
        with cw.capture(stream) as cap:
            chain(kernel)
        graphs[name] = cap.graph
        graphs[name].replay(stream)  # instantiated before the measurement
    stream.synchronize()

    def per_kernel_us(run) -> float:
        began = time.perf_counter()
        run()
        stream.synchronize()
        return (time.perf_counter() - began) / args.kernels * 1e6

    sides = {
        "eager, plain": lambda: chain(plain),
        "eager, programmatic": lambda: chain(programmatic),
        "graph, plain": lambda: graphs["plain"].replay(stream),
        "graph, programmatic": lambda: graphs["programmatic"].replay(stream),
    }
    times: dict[str, list[float]] = {side: [] for side in sides}
    for run in sides.values():
        run()
    stream.synchronize()
    for _ in range(args.reps):
        for side, run in sides.items():
            times[side].append(per_kernel_us(run))
    figures = {side: statistics.median(values) for side, values in times.items()}
    print(f"cuweave {cw.__version__} on {cw.Device(0).properties.name}: a chain of {args.kernels} dependent kernels "
          f"of {args.n} floats, wall µs per kernel (synchronize included), medians of {args.reps}")
    for side, us in figures.items():
        print(f"  {side:22s} {us:8.3f}")
    print(f"  programmatic / plain: eager {figures['eager, programmatic'] / figures['eager, plain']:.3f}, "
          f"graph {figures['graph, programmatic'] / figures['graph, plain']:.3f}")
    if args.json:
        settings = {"kernels": args.kernels, "n": args.n, "reps": args.reps}
        Path(args.json).write_text(json.dumps({"machine": gpu_machine_info(cw), "settings": settings,
                                               "us_per_kernel": figures}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
