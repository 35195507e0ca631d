"""Temporaries as graph memory: a woven function with three large temporaries (--mb each), its memory held beside
the graph (the default) against graph memory (graph_memory=True).

Figures, sides in turn, medians of --reps:
- wall µs per call (replay + synchronize);
- what stays between calls: the bytes of arrays each graph holds beside it (three temporaries and the result), and
  the device's graph memory (used and reserved) with one and with two such functions called in turn, before and
  after Device.trim_graph_memory().
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

import cuweave as cw
from libraries import gpu_machine_info


def step(x):
    """Three temporaries of x's size, then the result."""
    doubled = cw.ops.scale(x, 2.0)
    shifted = cw.ops.add(x, 1.0)
    summed = cw.ops.add(doubled, shifted)
    return cw.ops.add(summed, x)


def per_call_us(function, x, stream, calls: int) -> float:
    with stream:
        function(x)
        stream.synchronize()
        start = time.perf_counter_ns()
        for _ in range(calls):
            function(x)
            stream.synchronize()
        return (time.perf_counter_ns() - start) / calls / 1e3


def mb(value: int) -> float:
    return value / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=64, help="size of each temporary, MB")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    stream = cw.Stream()
    device = cw.Device(stream.device)
    x = cw.ones(args.mb * 2**20 // 4, np.float32, stream=stream)
    functions = {side: cw.woven(step, streams=2, graph_memory=side == "graph memory", copy=False)
                 for side in ("held beside", "graph memory")}
    times = {side: [] for side in functions}
    for _ in range(args.reps):
        for side, function in functions.items():
            times[side].append(per_call_us(function, x, stream, args.calls))
    figures = {"us_per_call": {side: statistics.median(values) for side, values in times.items()}}

    held_bytes = 4 * x.nbytes  # three temporaries and the result, allocated beside the graph and held by it
    one = device.graph_memory()  # after the graph-memory side's calls: its replays' memory, kept mapped
    second = cw.woven(step, streams=2, graph_memory=True, copy=False)
    with stream:
        functions["graph memory"](x)
        second(x)
    stream.synchronize()
    two = device.graph_memory()
    device.trim_graph_memory()
    trimmed = device.graph_memory()
    figures["memory_mb"] = {
        "held beside, one function": mb(held_bytes),
        "held beside, two functions": mb(2 * held_bytes),
        "graph memory reserved, one function": mb(one["reserved"]),
        "graph memory reserved, two functions called in turn": mb(two["reserved"]),
        "graph memory reserved after a trim (two results held)": mb(trimmed["reserved"]),
    }

    machine = gpu_machine_info(cw)
    print(f"cuweave {cw.__version__} on {cw.Device(0).properties.name} ({cw.backend()}): a woven function with "
          f"three {args.mb} MB temporaries; medians of {args.reps}, sides in turn")
    for side, value in figures["us_per_call"].items():
        print(f"  {side:14} {value:9.1f} us per call (replay + synchronize)")
    ratio = figures["us_per_call"]["graph memory"] / figures["us_per_call"]["held beside"]
    print(f"  graph memory / held beside: {ratio:.3f}")
    for name, value in figures["memory_mb"].items():
        print(f"  {name:54} {value:8.1f} MB")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, **figures, "ratio": ratio}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
