"""Batched copies: a batch of NumPy arrays copied to the device with one call each (cuweave.to_device per array)
against one batch (cuweave.to_device_batch, what prefetch does with a tuple or dict batch).

Batches: 64 arrays of 64 KB and 8 arrays of 8 MB, from pinned and from ordinary (pageable) memory. Figures: host µs
to queue the batch, and GB/s from queuing to the stream finishing; medians of --reps, the two ways in turn.

    python benchmarks/batched_copies.py [--reps 50] [--json PATH]
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
from libraries import add_run_arguments, gpu_machine_info

BATCHES = {"64 x 64 KB": (64, 64 << 10), "8 x 8 MB": (8, 8 << 20)}


def sources(count: int, nbytes: int, pinned: bool) -> list[np.ndarray]:
    made = []
    for i in range(count):
        array = cw.pinned_empty(nbytes // 4, np.float32) if pinned else np.empty(nbytes // 4, np.float32)
        array[:] = i
        made.append(array)
    return made


def one_call_each(arrays: list[np.ndarray], stream: cw.Stream) -> list:
    return [cw.to_device(array, stream=stream) for array in arrays]


def batched(arrays: list[np.ndarray], stream: cw.Stream) -> list:
    return cw.to_device_batch(arrays, stream=stream)


def measure(way, arrays: list[np.ndarray], stream: cw.Stream) -> tuple[float, float]:
    stream.synchronize()
    began = time.perf_counter()
    copied = way(arrays, stream)
    queued = time.perf_counter()
    stream.synchronize()
    ended = time.perf_counter()
    del copied
    total = sum(array.nbytes for array in arrays)
    return (queued - began) * 1e6, total / (ended - began) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser, reps=50)
    args = parser.parse_args()
    if args.quick:
        args.reps = 3
    stream = cw.Stream(name="copies")
    print(f"cuweave {cw.__version__} on {cw.Device(0).properties.name} ({cw.backend()}): host µs to queue a batch, "
          f"GB/s queued to done; medians of {args.reps}")
    figures: dict[str, dict[str, float]] = {}
    ways = {"one call each": one_call_each, "batched": batched}
    for batch, (count, nbytes) in BATCHES.items():
        for memory in ("pinned", "pageable"):
            arrays = sources(count, nbytes, memory == "pinned")
            for way in ways.values():  # warm-up: pools, staging ring, first calls
                way(arrays, stream)
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
            for _ in range(args.reps):
                for name, way in ways.items():
                    samples[name].append(measure(way, arrays, stream))
            for name in ways:
                host_us = statistics.median(us for us, _ in samples[name])
                gbps = statistics.median(rate for _, rate in samples[name])
                figures[f"{batch}, {memory}, {name}"] = {"host_us": host_us, "gbps": gbps}
                print(f"  {batch:11s} {memory:9s} {name:14s} host {host_us:9.1f} µs   {gbps:7.2f} GB/s")
    if args.json:
        settings = {"reps": args.reps, "batches": {name: list(shape) for name, shape in BATCHES.items()}}
        Path(args.json).write_text(json.dumps({"machine": gpu_machine_info(cw), "settings": settings,
                                               "figures": figures}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
