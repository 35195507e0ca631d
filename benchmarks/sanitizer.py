#!/usr/bin/env python3
"""What the stream-race sanitizer costs: cuweave's hot paths with the sanitizer off (its default) and on,
the overhead per operation, how an operation's cost grows with the number of tracked byte ranges, and what
checking host writes under a copy from pinned memory costs (two passes over its bytes: Note [Host writes
under a copy]).

    python benchmarks/sanitizer.py [--json PATH] [--quick] [--rounds N]

Each side ("off", "sanitized") runs in a fresh child process, taking turns for ``--rounds`` rounds in an
order rotated each round; the table gives each side's best round and the median in brackets (a process
lands in a fast or a slow mode for its whole life on the shared GPU machines). The "off" side is the figure
to compare with benchmarks/run.py's rows of the same run: the sanitizer is built in and must cost nothing
while off. Row functions are those of benchmarks/run.py's rows (streams.py, launches.py). The growth rows run in the parent: an operation on
one array while the sanitizer tracks N other ranges (each written once, on streams that never synchronize).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import launches
import libraries
import side_runs
import streams
import timing

HOT_PATHS = {  # row name in run.py's table -> the cuweave measurement
    "record_wait": streams.cw_record_wait,
    "with_stream": streams.cw_with_stream,
    "tiny_builtin_launch": launches.cw_tiny_builtin_launch,
}
# Operations each measured call issues that the sanitizer checks or orders.
OPERATIONS_PER_CALL = {"record_wait": 2, "with_stream": 0, "tiny_builtin_launch": 1}
SIDES = ("off", "sanitized")
GROWTH_RANGES = (0, 1_000, 10_000, 100_000)


def measure_side(side: str, quick: bool) -> dict[str, float]:
    """In this process: µs per call of each hot path, sanitized or not."""
    libraries.load_cuweave()
    cfg = timing.Config(n=timing.QUICK_N_CALLS, reps=timing.QUICK_REPS) if quick else timing.Config(
        n=timing.N_CALLS, reps=timing.REPS)
    timing.call_overhead_us = timing.calibrate_call_overhead(10 * cfg.n, cfg.reps)
    results: dict[str, float] = {}
    for name, fn in HOT_PATHS.items():
        if side == "sanitized":
            with libraries.cw.sanitize():
                results[name] = fn(cfg)
        else:
            results[name] = fn(cfg)
    return results


def run_side(side: str, quick: bool) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "CUWEAVE_SANITIZE"}  # the side decides
    return side_runs.run_child(__file__, side, quick, env)


def growth(quick: bool) -> dict[int, dict[str, float]]:
    """µs per ops.add on one array beside N other live arrays: with the sanitizer off, then on while it
    tracks each of them (written once, on four streams that never synchronize)."""
    cw = libraries.cw
    calls = 2_000 if quick else 20_000

    def per_add(x, stream, count: int = calls) -> float:
        start = time.perf_counter()
        for _ in range(count):
            cw.ops.add(x, 1.0, out=x, stream=stream)
        return (time.perf_counter() - start) / count * 1e6

    def sanitized_add(x, streams, keep, count: int = calls) -> tuple[float, int]:
        with cw.sanitize():
            for i, array in enumerate(keep):
                cw.ops.fill(array, 1.0, stream=streams[i % 4])
            us = per_add(x, streams[0], count)
            tracked = cw._core.sanitizer.shadow_ranges()
        cw.synchronize()
        return us, tracked

    figures: dict[int, dict[str, float]] = {}
    for ranges in GROWTH_RANGES[:3] if quick else GROWTH_RANGES:
        streams = [cw.Stream() for _ in range(4)]
        keep = [cw.empty(4, np.float32, stream=streams[i % 4]) for i in range(ranges)]
        x = cw.zeros(256, np.float32, stream=streams[0])
        cw.synchronize()
        # Warm-up of both sides (the first sanitized block also starts the sanitizer), then medians of three in
        # turn: a single first measurement read +3.3 us at no other arrays, more than with 1,000 of them.
        per_add(x, streams[0], calls // 10)
        sanitized_add(x, streams, keep, calls // 10)
        offs, ons = [], []
        for _ in range(3):
            cw.synchronize()
            offs.append(per_add(x, streams[0]))
            cw.synchronize()
            on, tracked = sanitized_add(x, streams, keep)
            ons.append(on)
        off, on = statistics.median(offs), statistics.median(ons)
        del keep
        figures[ranges] = {"off": off, "sanitized": on, "tracked_ranges": tracked}
        print(f"  {ranges:>7} other live arrays ({tracked} ranges tracked): ops.add {off:.3f} us off, "
              f"{on:.3f} us sanitized (+{on - off:.3f})", flush=True)
    return figures


PINNED_COPY_MB = (1, 64)


def pinned_copies(quick: bool) -> dict[int, dict[str, float]]:
    """ms per host-to-device copy from pinned memory, waited for, with the sanitizer off and on (best of
    several): the sanitized side checksums the source when the copy is queued and again at the wait."""
    cw = libraries.cw
    stream = cw.Stream()
    repeats = 3 if quick else 10
    figures: dict[int, dict[str, float]] = {}
    for mb in PINNED_COPY_MB:
        host = cw.pinned_empty((mb << 20) // 4, np.float32)
        host[:] = 1.0
        device = cw.empty(host.shape, host.dtype, stream=stream)
        cw.copy_async(device, host, stream=stream).wait()  # first use: pools, staging

        def best_ms() -> float:
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                cw.copy_async(device, host, stream=stream).wait()
                times.append(time.perf_counter() - start)
            return min(times) * 1e3

        off = best_ms()
        with cw.sanitize():
            on = best_ms()
        figures[mb] = {"off_ms": off, "sanitized_ms": on}
        print(f"  {mb:>3} MB copy from pinned memory + wait: {off:.3f} ms off ({mb / 1024 / off * 1e3:.1f} GB/s), "
              f"{on:.3f} ms sanitized (+{on - off:.3f} ms)", flush=True)
    stream.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    args = side_runs.parser_for(__doc__, SIDES).parse_args(argv)
    if args.side:
        Path(args.json).write_text(json.dumps(measure_side(args.side, args.quick)))
        return 0

    libraries.load_cuweave()
    device = libraries.cw.Device(0).properties.name
    rounds = side_runs.rounds_of(SIDES, args.rounds, lambda side: run_side(side, args.quick))

    def figure(side: str, name: str, pick=min) -> float:
        return pick(r[name] for r in rounds[side])

    quick_note = " -- QUICK RUN, not figures to quote" if args.quick else ""
    print(f"\ncuweave {libraries.cw.__version__} on {device} (backend {libraries.cw.backend()}); best of "
          f"{max(1, args.rounds)} rounds (median in brackets){quick_note}")
    header = ["row (us per call)", "sanitizer off", "sanitized", "overhead per op"]
    lines, table = [], {}
    for name in HOT_PATHS:
        ops = OPERATIONS_PER_CALL[name]
        cells = {}
        for pick, label in ((min, "best"), (statistics.median, "median")):
            off, on = figure("off", name, pick), figure("sanitized", name, pick)
            cells[label] = {"off": off, "sanitized": on, "overhead_per_operation_us": (on - off) / ops if ops else None}
        table[name] = cells

        def both(key: str) -> str:
            values = [cells[label][key] for label in ("best", "median")]
            return "-" if values[0] is None else f"{values[0]:.3f} ({values[1]:.3f})"

        lines.append([name, both("off"), both("sanitized"), both("overhead_per_operation_us")])
    side_runs.print_table(header, lines)
    print("overhead per op = (sanitized - off) / operations per call (record + wait: 2; with stream: none)")
    print("\ngrowth with tracked ranges:")
    grown = growth(args.quick)
    print("\nhost writes under pinned copies (checksums):")
    copies = pinned_copies(args.quick)
    if args.json:
        figures = {"rows": table, "rounds": rounds, "growth_us": grown, "pinned_copy_ms": copies}
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
