"""Where do the 267 µs of a woven step repointed at every call go (benchmarks/woven_step.py, "woven, arrays
alternating", two H200s)? Found: the walk, 161.6 µs of 236.3 (update 6.6, replay 68.1; one H200), and
graph_walk_cost.cu showed why (a kernel's parameter count, asked once per node). With each kernel's layout asked
once per walk: walk 39.6 µs, update 9.2, replay 8.4 (one H200, a host 1.8x slower than the first run's: a replay with
nothing repointed took 7.10 µs against 3.88).

The step's graph (5 chains x 10 built-in operations, 50 kernel nodes) is taken from cw.woven, then repointed
between two sets of input arrays in turn. Times, per repointing, medians of --rounds rounds of --calls calls, host
µs: Graph.rebind (it walks every node of the template and rewrites those that read an old array), instantiate()
(the whole executable's update), and the replay after them; beside a replay with nothing repointed.

    python3 tools/probes/rebind_cost_probe.py [--calls 200] [--rounds 7]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

import cuweave as cw

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from probe_timing import per_call_us  # noqa: E402
from woven_step import CHAINS, STREAMS, cuweave_step  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=1 << 14)
    args = parser.parse_args()
    stream = cw.Stream()
    sets = [[cw.to_device(np.full(args.n, k + i, np.float32), stream=stream) for i in range(CHAINS)] for k in (0, 1)]
    woven = cw.woven(cuweave_step, streams=STREAMS, copy=False)
    with stream:
        graph = woven.graph_for(*sets[0])
    graph.replay(stream)
    stream.synchronize()
    turn = [0]

    def mapping() -> dict:
        old, new = sets[turn[0]], sets[1 - turn[0]]
        turn[0] ^= 1
        return dict(zip(old, new))

    rows = {
        "replay, nothing repointed": lambda: graph.replay(stream),
        "rebind (the template's walk)": lambda: graph.rebind(mapping()),
    }
    figures = {name: per_call_us(step, args.calls, args.rounds) for name, step in rows.items()}
    stream.synchronize()

    def rebind_then_instantiate() -> None:
        graph.rebind(mapping())
        graph.instantiate()

    figures["rebind + instantiate() (the update)"] = per_call_us(rebind_then_instantiate, args.calls, args.rounds)

    def rebind_instantiate_replay() -> None:
        rebind_then_instantiate()
        graph.replay(stream)

    figures["rebind + instantiate() + replay"] = per_call_us(rebind_instantiate_replay, args.calls, args.rounds)
    stream.synchronize()
    kinds = graph.kinds
    print(f"cuweave {cw.__version__} ({cw.backend()}): a woven step of {sum(kinds.values())} nodes {dict(kinds)}, "
          f"{args.n} floats a chain; host µs, medians of {args.rounds} rounds of {args.calls}")
    for name, us in figures.items():
        print(f"  {name:40s} {us:9.2f}")
    print(f"  last refresh: {graph.last_refresh}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
