"""Do the wide DAG's streams share hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default), so that a woven
block whose streams were made 8 apart from the current one serializes two chains? Found (one H200): no. By hand,
8 chains of 20 compiled 20 µs spins take 0.88-0.94 ms whichever 7 streams (made 1 to 16 after the current one) join
it, alike with 4, 8 and 32 connections: the row is bound by the host's launches (160 of them, about 5.6 µs
each), not by the GPU. Cited by: the weave benchmark's wide-DAG rows.

    python3 tools/probes/hardware_queue_probe.py
    CUDA_DEVICE_MAX_CONNECTIONS=32 python3 tools/probes/hardware_queue_probe.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import cuweave as cw

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import weave as weave_benchmark  # noqa: E402

main = cw.Stream()
made_after = [cw.Stream() for _ in range(16)]  # made_after[i]: the (i+1)-th stream made after `main`
kernel = cw.compile(weave_benchmark.SPIN_SOURCE, "spin")
slots = [cw.zeros(1, np.uint64) for _ in range(weave_benchmark.CHAINS)]


def spin(slot, stream) -> None:
    kernel(1, 32, (slot, 20_000), stream=stream)


def wall_ms(others: list) -> float:
    with main:
        start = time.perf_counter_ns()
        weave_benchmark.wide_dag_by_hand(spin, slots, main, others)
        main.synchronize()
        return (time.perf_counter_ns() - start) / 1e6


offsets = range(10)
walls: dict[int, list[float]] = {k: [] for k in offsets}
for _ in range(12):
    for k in offsets:
        walls[k].append(wall_ms(made_after[k : k + 7]))
connections = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "8 (default)")
for k in offsets:
    print(f"connections {connections}: streams made {k + 1}..{k + 7} after the current one: median "
          f"{statistics.median(walls[k][2:]):.3f} ms")
