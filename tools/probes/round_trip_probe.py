#!/usr/bin/env python3
"""The graph-function round trip (benchmarks/run.py's graph_function rows) beside the hand-written CuPy and
PyTorch graphs, measured in turn within each round so that drift of the shared host weighs on all alike.
(GPU only.)

    python3 tools/probes/round_trip_probe.py [--rounds 7] [--sizes 1024,1048576]

Prints per size and library: the median µs per round trip over the rounds, and the median of the per-round
ratio of cuweave to the best peer of that round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import graph_functions  # noqa: E402
import libraries  # noqa: E402
import timing  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sizes", default="1024,65536,1048576")
    args = parser.parse_args()
    libraries.load_cuweave()
    libraries.load_peers({})
    cfg = timing.Config(n=timing.N_CALLS, reps=1)
    measures = {"cuweave": graph_functions.cw_graph_function, "torch": graph_functions.torch_graph_function,
                "cupy": graph_functions.cupy_graph_function}
    print(f"device: {libraries.cw.Device(0).properties.name}; {args.rounds} rounds")
    for nbytes in (int(v) for v in args.sizes.split(",")):
        elements = nbytes // 4
        runs = {lib: [] for lib in measures}
        for _ in range(args.rounds):
            for lib, measure in measures.items():
                runs[lib].append(measure(cfg, elements=elements))
        best_peer = [min(runs["torch"][r], runs["cupy"][r]) for r in range(args.rounds)]
        ratios = [c / p for c, p in zip(runs["cuweave"], best_peer)]
        line = "  ".join(f"{lib} {statistics.median(v):8.2f}" for lib, v in runs.items())
        print(f"{nbytes:>9} B  {line} us   cuweave / best peer: median {statistics.median(ratios):.3f} "
              f"(range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
