"""Why does the weave benchmark's wide DAG run woven at 0.76x the hand-written speed with compiled spins, but 0.89x
with built-in ones, while a woven compiled launch costs only +0.46 µs over plain on one chain? Found (one H200):
issued alone, compiled spins are woven at 0.91x the hand-written wall speed with 20 µs spins (0.756 ms against
0.687; +0.45 µs an operation) and 0.83x with empty ones (0.788 against 0.657; +0.82 µs); built-in empty spins at
0.92x (0.813 against 0.749). The placement is the same for both kinds: 20 operations on each of 8 streams, 8 records,
14 waits. The benchmark's 0.76x (after its other sides, in turn) was not reproduced alone.

Same DAG as benchmarks/weave.py (8 chains x 20 spins, each chain writing its own slot), with spins of 0 and 20 µs.
Per side: host ms until the last launch returned (issue) and until the device finished (wall), medians of --reps;
and the weave's counts (records, waits, operations per stream) to show the placement.

    python3 tools/probes/wide_dag_issue_probe.py [--reps 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import cuweave as cw

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from weave import CHAINS, SPIN_SOURCE, STEPS, wide_dag_by_hand  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    kernel = cw.compile(SPIN_SOURCE, "spin")
    times = [cw.zeros(1, np.uint64) for _ in range(CHAINS)]
    main_stream = cw.Stream()
    others = [cw.Stream() for _ in range(CHAINS - 1)]
    print(f"cuweave {cw.__version__} ({cw.backend()}): {CHAINS} chains x {STEPS} spins; ms, medians of {args.reps}")
    for spin_s in (0.0, 20e-6):
        for kind in ("built-in", "compiled"):
            if kind == "compiled":
                ns = int(spin_s * 1e9)

                def spin(slot, stream=None, ns=ns):
                    kernel(1, 32, (slot, ns), stream=stream)
            else:

                def spin(slot, stream=None, seconds=spin_s):
                    cw.ops.spin(seconds, start_times=slot, stream=stream)

            def woven(spin=spin):
                with cw.weave(streams=CHAINS) as weave:
                    for _ in range(STEPS):
                        for chain in range(CHAINS):
                            spin(times[chain])
                return weave

            def by_hand(spin=spin):
                wide_dag_by_hand(spin, times, main_stream, others)

            for side, body in (("woven", woven), ("by hand", by_hand)):
                issue, wall = [], []
                result = None
                with main_stream:
                    for _ in range(args.reps + 1):
                        main_stream.synchronize()
                        began = time.perf_counter_ns()
                        result = body()
                        issued = time.perf_counter_ns()
                        main_stream.synchronize()
                        ended = time.perf_counter_ns()
                        issue.append((issued - began) / 1e6)
                        wall.append((ended - began) / 1e6)
                counts = f"   {result.counts}" if side == "woven" else ""
                print(f"  spin {spin_s * 1e6:4.0f} µs {kind:9s} {side:8s} issue {statistics.median(issue[1:]):.3f}  "
                      f"wall {statistics.median(wall[1:]):.3f}{counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
