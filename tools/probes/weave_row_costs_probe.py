"""Found (one H200, driver 580, PyTorch and CuPy imported; 5bf3676 and the change after it in turn, two rounds each):
woven over plain, host µs an operation: a chain written in place +0.17 to +0.24; axpy (the general path, no seal)
+0.32 to +0.39; the compiled axpby +0.28 to +0.36, so a compiled launch adds nothing of its own in a weave; a new
array from the last +0.67 to +0.90, one event record an operation (the seal). The sanitizer's core +0.21 to +0.47,
and +0.58 to +0.78 on new arrays. The new arrays took 2 addresses among 2,000 (CUDA's pool hands a block freed on a
stream to that stream's next allocation), where the simulator then gave 951. Earlier the same day, on a slower host,
the new-array row read +1.55 to +1.67 woven: these rows follow the host's speed. Cited by: the weave benchmark's
overhead rows.

Which of the weave benchmark's rows pay the weave's general path, and what does it cost on a GPU? The rows:

- chain: `cw.ops.add(x, 1.0, out=x)`, which the weave continues without a wait or a seal;
- new_arrays: `x = cw.ops.add(x, 1.0)`, a seal (an event record) an operation;
- axpy: `cw.ops.axpy(1.0, x, y, out=y)`, the general path (it reads an array it does not write) and no seal;
- compiled: the benchmark's compiled axpby on the same arrays, the same path through a compiled kernel.

If axpy costs far less woven than compiled, the compiled launch has a cost of its own in a weave; if it costs as
much, the general path does. Plain, woven (4 streams) and the sanitizer's core, in turn in one process: host µs an
operation, medians of --reps rounds of --calls, and the median of each round's difference to plain. Then the
seals (event records) the weave counted an operation, and the distinct addresses the new arrays got (the byte maps
keep a range per address). --peers imports PyTorch and CuPy first, as the benchmark does.

    python3 tools/probes/weave_row_costs_probe.py [--peers] [--reps 11] [--calls 2000]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path

import numpy as np

MODES = ("plain", "woven", "sanitizer_core")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--peers", action="store_true", help="import PyTorch and CuPy first, as the benchmark does")
    args = parser.parse_args()
    imported = []
    if args.peers:
        for name in ("torch", "cupy"):
            try:
                importlib.import_module(name)
                imported.append(name)
            except ImportError:
                pass
    import cuweave as cw

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from weave import AXPBY_SOURCE, in_mode

    x = cw.zeros(256, np.float32)
    y = cw.zeros(256, np.float32)
    state = {"x": cw.zeros(256, np.float32)}

    def new_array() -> None:
        state["x"] = cw.ops.add(state["x"], 1.0)

    rows = {
        "chain": lambda: cw.ops.add(x, 1.0, out=x),
        "new_arrays": new_array,
        "axpy": lambda: cw.ops.axpy(1.0, x, y, out=y),
    }
    if cw.backend() != "sim":
        axpby = cw.compile(AXPBY_SOURCE, "axpby")
        arguments = (y, x, np.float32(1.0), np.float32(0.5))
        rows["compiled"] = lambda: axpby(1, 256, arguments)
    cw.synchronize()

    def round_us(issue, mode: str) -> float:
        with in_mode(cw, mode):
            start = time.perf_counter_ns()
            for _ in range(args.calls):
                issue()
            elapsed = time.perf_counter_ns() - start
        cw.synchronize()
        return elapsed / 1e3 / args.calls

    print(f"cuweave {cw.__version__} ({cw.backend()}); imported: {', '.join(imported) or 'neither PyTorch nor CuPy'}; "
          f"host µs an operation, medians of {args.reps} rounds of {args.calls} in turn")
    print(f"  {'row':11s} " + " ".join(f"{mode:>15s}" for mode in MODES) + "   woven over plain, core over plain")
    for name, issue in rows.items():
        for mode in MODES:
            round_us(issue, mode)  # warm-up
        figures: dict[str, list[float]] = {mode: [] for mode in MODES}
        for _ in range(args.reps):
            for mode in MODES:
                figures[mode].append(round_us(issue, mode))
        added = {mode: statistics.median(f - p for f, p in zip(figures[mode], figures["plain"])) for mode in MODES}
        print(f"  {name:11s} " + " ".join(f"{statistics.median(figures[mode]):15.3f}" for mode in MODES) +
              f"   {added['woven']:+.3f} {added['sanitizer_core']:+.3f}")
    for name, issue in rows.items():
        with cw.weave(streams=4) as weave:
            for _ in range(args.calls):
                issue()
        cw.synchronize()
        counts = weave.counts
        print(f"  {name:11s} woven: {counts.records / args.calls:.3f} event records and {counts.waits / args.calls:.3f} "
              f"waits an operation")
    addresses = set()
    for _ in range(args.calls):
        new_array()
        addresses.add(state["x"].__cuda_array_interface__["data"][0])
    cw.synchronize()
    print(f"  {len(addresses)} distinct addresses among {args.calls} new arrays (plain)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
