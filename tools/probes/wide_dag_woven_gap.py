"""Where does the woven wide DAG of compiled spins lose to the same DAG written by hand on 8 streams? The weave
benchmark's row (8 chains x 20 spins of 20 us) is host-bound: both sides queue 160 launches, and the woven one is
slower by more than the weave's cost per operation in a chain. Each variant runs in a process of its own (nothing
imported beside cuweave; PyTorch imported; PyTorch and CuPy imported) and prints, for built-in and compiled spins:
the host µs to queue the block (no synchronize), the wall ms with its synchronize, and the woven block's counts.

Found (one H200, at 2eece14; the variant with nothing imported was not kept): the woven block's counts are the
fewest (160 operations, 8 records, 14 waits, 20 per stream), and each woven spin costs more host time than one by
hand: compiled 6.097 against 5.715 µs (PyTorch imported; wall 1.067 against 0.967 ms), 4.444 against 4.181 (PyTorch
and CuPy imported; wall 0.904 against 0.891). The gap is the weave's cost per launch, not its waits or its streams.
"""

import subprocess
import sys
from pathlib import Path

VARIANTS = {"cuweave alone": "", "PyTorch imported": "import torch", "PyTorch and CuPy imported": "import torch, cupy"}

CHILD = r"""
import statistics
import sys
import time
import numpy as np
import cuweave as cw

sys.path.insert(0, "../../benchmarks")
import weave as bench  # the weave benchmark's DAG: its spin kernel, and its hand-written streams

CHAINS, STEPS = bench.CHAINS, bench.STEPS
SPIN_NS = int(bench.SPIN_S * 1e9)
kernel = cw.compile(bench.SPIN_SOURCE, "spin")
slots = [cw.zeros(1, np.uint64) for _ in range(CHAINS)]
main = cw.Stream()
others = [cw.Stream() for _ in range(CHAINS - 1)]
spins = {
    "compiled": lambda slot, stream=None: kernel(1, 32, (slot, SPIN_NS), stream=stream),
    "built-in": lambda slot, stream=None: cw.ops.spin(bench.SPIN_S, start_times=slot, stream=stream),
}


def woven(spin):
    with cw.weave(streams=CHAINS) as w:
        bench.each_step(spin, slots)
    return w


def by_hand(spin):
    bench.wide_dag_by_hand(spin, slots, main, others)


def one_stream_given(spin):
    bench.each_step(lambda slot: spin(slot, stream=main), slots)


def measure(queue, spin, reps=21):
    queued, wall = [], []
    for _ in range(reps):
        main.synchronize()
        with main:
            began = time.perf_counter_ns()
            queue(spin)
            queued.append((time.perf_counter_ns() - began) / 1e3)
            main.synchronize()
            wall.append((time.perf_counter_ns() - began) / 1e6)
    return statistics.median(queued), statistics.median(wall)


for name, spin in spins.items():
    for queue in (woven, by_hand, one_stream_given):
        measure(queue, spin, 3)
    rows = {}
    for turn in range(3):  # sides in turn
        for queue in (woven, by_hand, one_stream_given):
            rows.setdefault(queue.__name__, []).append(measure(queue, spin))
    for side, figures in rows.items():
        queued = statistics.median(f[0] for f in figures)
        wall = statistics.median(f[1] for f in figures)
        print(f"  {name:8} {side:17} queue {queued:8.1f} us ({queued / (CHAINS * STEPS):6.3f} per spin)   "
              f"wall {wall:6.3f} ms")
    with main:
        print(f"  {name:8} woven counts: {woven(spin).counts}")
    main.synchronize()
    # Each spin timed alone, in a woven block and by hand: every spin slower, or a few much slower?
    for side in ("woven", "by hand"):
        each = []
        for _ in range(11):
            main.synchronize()
            with main:
                timed = []

                def timed_spin(slot, stream=None):
                    began = time.perf_counter_ns()
                    spin(slot, stream=stream)
                    timed.append((time.perf_counter_ns() - began) / 1e3)

                began = time.perf_counter_ns()
                (woven if side == "woven" else by_hand)(timed_spin)
                block = (time.perf_counter_ns() - began) / 1e3
                main.synchronize()
            each.append((block, sorted(timed)))
        block = statistics.median(b for b, _ in each)
        spins_sum = statistics.median(sum(t) for _, t in each)
        median = statistics.median(statistics.median(t) for _, t in each)
        slowest = statistics.median(sum(t[-8:]) for _, t in each)
        print(f"  {name:8} {side:8} each spin timed: median {median:6.3f} us, 8 slowest together {slowest:7.1f} us, "
              f"spins {spins_sum:7.1f} us of the block's {block:7.1f} us")
"""

for variant, setup in VARIANTS.items():
    print(f"{variant}:", flush=True)
    subprocess.run([sys.executable, "-c", setup + "\n" + CHILD], check=True, cwd=Path(__file__).parent)
