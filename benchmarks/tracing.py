#!/usr/bin/env python3
"""What tracing costs: cuweave's hot paths with tracing built in but no trace open, beside the previous
tree (built without it) and raw CUDA, and the cost per operation while a trace records.

    python benchmarks/tracing.py [--baseline-site DIR] [--json PATH] [--quick] [--rounds N]

Each side runs in a fresh child process, so that no side inherits another's state (CUPTI once attached,
pools, caches): "now" (this build, no trace open), "traced" (this build, each row inside cuweave.trace())
and, with --baseline-site, "previous" (an earlier cuweave installed with ``pip install --target DIR``,
first on sys.path). The sides take turns for ``--rounds`` rounds (default 5), in an order rotated each
round. Seen on an H100 machine: a process lands in a fast or a slow mode for its whole life (record + wait
0.42 or 0.75 us, the same build), so the table gives each side's best round and, beside it, the median;
both come from the same rounds. Row functions and methods are those of benchmarks/run.py's rows (streams.py, launches.py,
graphs.py; timing.py: the targets' methods).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import graphs
import launches
import libraries
import side_runs
import streams
import timing
from raw_cuda import build_raw_helper, run_raw_helper
from run import ROWS

HOT_PATHS = {  # row name in run.py's table -> the cuweave measurement
    "record_wait": streams.cw_record_wait,
    "with_stream": streams.cw_with_stream,
    "tiny_kernel_launch": launches.cw_tiny_kernel_launch,
    "tiny_builtin_launch": launches.cw_tiny_builtin_launch,
    "graph_replay": graphs.cw_graph_replay,
    "graph_node": graphs.cw_graph_node,
}
# Operations each measured call issues, to give the tracing overhead per operation.
OPERATIONS_PER_CALL = {"record_wait": 2, "with_stream": 0, "tiny_kernel_launch": 1, "tiny_builtin_launch": 1,
                       "graph_replay": 1, "graph_node": 1}
SIDES = ("previous", "now", "traced")


def measure_side(side: str, quick: bool) -> dict[str, float]:
    """In this process: µs per call of each hot path (each row inside its own trace for "traced")."""
    libraries.load_cuweave()
    cfg = timing.Config(n=timing.QUICK_N_CALLS, reps=timing.QUICK_REPS) if quick else timing.Config(
        n=timing.N_CALLS, reps=timing.REPS)
    timing.call_overhead_us = timing.calibrate_call_overhead(10 * cfg.n, cfg.reps)
    results: dict[str, float] = {}
    for name, fn in HOT_PATHS.items():
        if side == "traced":
            with libraries.cw.trace() as trace:
                results[name] = fn(cfg)
            results[f"{name}_events"] = len(trace._session.activities())
        else:
            results[name] = fn(cfg)
    results["cuweave_file"] = libraries.cw.__file__
    return results


def run_side(side: str, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ)
    if side == "previous":
        env["PYTHONPATH"] = os.pathsep.join([args.baseline_site, env.get("PYTHONPATH", "")])
    result = side_runs.run_child(__file__, side, args.quick, env)
    print(f"  {side}: cuweave from {result.pop('cuweave_file')}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = side_runs.parser_for(__doc__, SIDES)
    parser.add_argument("--baseline-site", metavar="DIR", help="an earlier cuweave installed with pip --target")
    args = parser.parse_args(argv)
    if args.side:
        Path(args.json).write_text(json.dumps(measure_side(args.side, args.quick)))
        return 0

    libraries.load_cuweave()
    gpu = libraries.cw.Device(0).properties.name
    cfg = timing.Config(n=timing.QUICK_N_CALLS, reps=timing.QUICK_REPS) if args.quick else timing.Config(
        n=timing.N_CALLS, reps=timing.REPS)
    raw = None
    exe, raw_note = build_raw_helper(gpu)
    if exe is not None:
        raw, raw_note = run_raw_helper(exe, cfg)
    sides = [side for side in SIDES if side != "previous" or args.baseline_site]
    rounds = side_runs.rounds_of(sides, args.rounds, lambda side: run_side(side, args))

    def figure(side: str, name: str, pick=min) -> float | None:
        values = [r[name] for r in rounds.get(side, []) if name in r]
        return pick(values) if values else None

    def median(side: str, name: str) -> float | None:
        return figure(side, name, statistics.median)

    print(f"\ncuweave {libraries.cw.__version__} on {gpu}; {cfg.reps} reps of {cfg.n} calls per side and round, best of "
          f"{max(1, args.rounds)} rounds (median in brackets){' -- QUICK RUN, not figures to quote' if args.quick else ''}"
          f"; raw CUDA: {raw_note}")
    header = ["row (us per call)", "raw CUDA", "previous tree", "now, no trace open", "now/previous", "now/raw",
              "traced", "overhead per op", "events"]
    lines, table = [], {}

    def show(value: float | None, digits: int = 3) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    for name in HOT_PATHS:
        raw_key = ROWS[name].raw_key
        raw_value = raw.get(raw_key) if raw and raw_key else None
        ops = OPERATIONS_PER_CALL[name]
        cells = {}
        for pick, label in ((min, "best"), (statistics.median, "median")):
            now, previous, traced = (figure(side, name, pick) for side in ("now", "previous", "traced"))
            cells[label] = {"previous": previous, "now": now, "traced": traced,
                            "overhead_per_operation_us": (traced - now) / ops if ops else None}
        events = median("traced", f"{name}_events")
        table[name] = {"raw": raw_value, **cells, "events_per_traced_row": events}
        best, mid = cells["best"], cells["median"]

        def both(key: str) -> str:
            return f"{show(best[key])} ({show(mid[key])})"

        lines.append([name, show(raw_value), both("previous"), both("now"),
                      f"{show(ratio(best['now'], best['previous']))} ({show(ratio(mid['now'], mid['previous']))})",
                      show(ratio(best["now"], raw_value)), both("traced"), both("overhead_per_operation_us"),
                      show(events, 0)])
    side_runs.print_table(header, lines)
    print("previous tree: the cuweave in --baseline-site (no tracing built in); traced: each row inside an open "
          "cuweave.trace(); overhead per op = (traced - now) / operations per call; events: recorded per traced row")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": table, "rounds": rounds, "raw": raw, "raw_note": raw_note,
                                               "settings": {"n": cfg.n, "reps": cfg.reps}}, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
