#!/usr/bin/env python3
"""cuweave benchmarks: cuweave beside raw CUDA C++, PyTorch and CuPy, in one run.

    python benchmarks/run.py [--json PATH] [--quick] [--rows name,name] [--gross]

A timing is the median of several repetitions after a warm-up
repetition; host costs are wall time per call over 20,000 calls; pinned copies are timed with CUDA events;
copies from and to ordinary NumPy memory, duplex copies and the prefetch pipeline are wall time including
the final synchronize.
The raw CUDA column comes from benchmarks/raw_cuda.cu, compiled with nvcc and run as a child process
before the in-process measurements. Benchmarks are never part of the test pass/fail.

This file parses the arguments, chooses the rows, prints the table and writes the JSON. The rows live with their
kind, one module each (streams.py, pinned.py, copies.py, numpy_copies.py, duplex.py, pipeline.py, launches.py,
graphs.py, loops.py, graph_functions.py), beside the shared timing.py, in_turn.py, rows.py, libraries.py and
raw_cuda.py. Adding a row: in its module, write one function per library that returns a float (use time_per_call /
gbps_of / wall_ms from timing.py), then add a Row to that module's ROWS. See benchmarks/README.md for what each row
means.
"""


from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import copies
import duplex
import graph_functions
import graphs
import launches
import libraries
import loops
import numpy_copies
import pinned
import pipeline
import streams
import timing
from copies import COPY_BYTES
from duplex import DUPLEX_ROUNDS
from libraries import LIBS, PEERS, load_cuweave, load_peers, machine_info, synchronize
from loops import CUDA_CORE
from numpy_copies import (HOST_COPY_IN_TURN, HOST_COPY_OVER_PINNED, PINNED_H2D_IN_TURN, STAGED_OVER_HOST_COPY,
                          STAGED_OVER_PINNED, describe_copy_thread_tuning, host_memcpy_gbps)
from pinned import BLOCK_BYTES, BLOCK_PAIRS
from pipeline import (PIPELINE_BATCH_BYTES, PIPELINE_BATCHES, PIPELINE_COMPUTE_OVER_COPY, PIPELINE_DEPTH,
                      SPLIT_CALLS, SPLIT_SYNC, SPLIT_TORCH_PIN, SPLIT_TORCH_TO, SPLIT_WALL, copy_split_measured,
                      pipeline_calibration, pipeline_reps)
from raw_cuda import CUPY_HERE, IN_PROCESS_RAW, PAIRED_RATIO, build_raw_helper, paired_ratio, run_raw_helper
from rows import Row
from streams import ONE_CALL_WAIT, PYTHON_FLOOR, RAW_THROUGH_DRIVER, THINNEST_BINDING
from timing import N_CALLS, QUICK_N_CALLS, QUICK_REPS, REPS, Config, calibrate_call_overhead

EXTRA_COLUMNS = (IN_PROCESS_RAW, CUDA_CORE)  # "us" and "ms" rows: lower is better
# Every row, in the table's order; each module defines its own.
ROWS: dict[str, Row] = {**streams.ROWS, **pinned.ROWS, **copies.ROWS, **numpy_copies.ROWS, **duplex.ROWS,
                        **pipeline.ROWS, **launches.ROWS, **graphs.ROWS, **loops.ROWS, **graph_functions.ROWS}


# --------------------------------------------------------------------------- measuring and reporting


@dataclass
class Result:
    values: dict[str, float] = field(default_factory=dict)   # lib (or "raw") -> value
    errors: dict[str, str] = field(default_factory=dict)     # lib -> exception text


def measure_row(row: Row, cfg: Config, usable: set[str], raw: dict | None) -> Result:
    result = Result()
    if raw is not None and raw.get(row.raw_key) is not None:
        result.values["raw"] = raw[row.raw_key]
    for lib, fn in row.measure.items():
        if lib not in usable and lib not in EXTRA_COLUMNS:
            continue
        try:
            value = fn(cfg)
            synchronize(lib)
            # A paired measurement returns its figures by name (paired_with_raw_here).
            result.values.update(value if isinstance(value, dict) else {lib: value})
        except Exception as exc:  # noqa: BLE001 -- report it in the table and keep measuring
            result.errors[lib] = f"{type(exc).__name__}: {exc}"
    return result


def best_peer(row: Row, result: Result) -> tuple[str, float] | None:
    peers = [(lib, result.values[lib]) for lib in PEERS if lib in result.values]
    if not peers:
        return None
    pick = max if row.higher_is_better else min
    return pick(peers, key=lambda item: item[1])


def meets_target(row: Row, result: Result) -> bool | None:
    value = result.values.get("cuweave")
    if value is None or row.target is None:
        return None
    return value >= row.target if row.higher_is_better else value <= row.target


def summarize(row: Row, result: Result) -> dict:
    """The derived numbers of one row: ratios of cuweave to raw and to the best peer, and the target check."""
    cw_value = result.values.get("cuweave")
    raw_value = result.values.get("raw")
    peer = best_peer(row, result)
    return {
        "cuweave_over_raw": cw_value / raw_value if cw_value is not None and raw_value else None,
        "cuweave_over_raw_paired": result.values.get(PAIRED_RATIO),
        "cuweave_over_cupy_paired": result.values.get(paired_ratio(CUPY_HERE)),
        "best_peer": peer[0] if peer else None,
        "cuweave_over_best_peer": cw_value / peer[1] if cw_value is not None and peer and peer[1] else None,
        "meets_target": meets_target(row, result),
    }


def fmt_value(value: float) -> str:
    magnitude = abs(value)
    digits = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 1 else 3
    return f"{value:.{digits}f}"


def cell(row: Row, result: Result, lib: str, unavailable: dict[str, str]) -> str:
    if lib in result.values:
        return fmt_value(result.values[lib])
    if lib in result.errors:
        return "err"
    has_counterpart = row.raw_key is not None if lib == "raw" else lib in row.measure
    if not has_counterpart:
        return "-"
    return "n/a" if lib in unavailable else "-"


def print_table(rows: dict[str, Row], results: dict[str, Result], unavailable: dict[str, str]) -> None:
    header = ["row", "unit", "cuweave", "raw CUDA", "PyTorch", "CuPy", "target",
              "cuweave/raw", "cuweave/raw here", "cuweave/best peer", "meets target"]
    lines = []
    for name, row in rows.items():
        result = results[name]
        derived = summarize(row, result)
        target = "-" if row.target is None else (">= " if row.higher_is_better else "<= ") + f"{row.target:g}"
        ratio_raw = derived["cuweave_over_raw"]
        ratio_paired = derived["cuweave_over_raw_paired"]
        ratio_peer = derived["cuweave_over_best_peer"]
        meets = derived["meets_target"]
        lines.append([
            name, row.unit,
            *(cell(row, result, lib, unavailable) for lib in ("cuweave", "raw", "torch", "cupy")),
            target,
            "-" if ratio_raw is None else f"{ratio_raw:.3g}",
            "-" if ratio_paired is None else f"{ratio_paired:.3g}",
            "-" if ratio_peer is None else f"{ratio_peer:.3g} ({derived['best_peer']})",
            "-" if meets is None else ("yes" if meets else "no"),
        ])
    widths = [max(len(str(r[i])) for r in [header] + lines) for i in range(len(header))]

    def render(cells):
        return "| " + " | ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))) + " |"

    print(render(header))
    print("|" + "|".join(("-" * (w + 2)) if i < 2 else ("-" * (w + 1) + ":") for i, w in enumerate(widths)) + "|")
    for line in lines:
        print(render(line))
    print("us and ms rows: lower is better, a ratio < 1 favours cuweave; "
          "GB/s and ratio rows: higher is better, a ratio > 1 favours cuweave.")
    print("cuweave/raw: against raw_cuda.cu run as a fresh process before; cuweave/raw here: the median of the "
          "per-pair ratios to raw CUDA measured in this process in turn with cuweave (same process state, same "
          "moment; details below the table).")
    for name in rows:
        for lib, error in results[name].errors.items():
            print(f"error: {name} / {lib}: {error}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write every number and the machine info here")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_REPS} reps of {QUICK_N_CALLS} calls: a smoke run, not figures to quote")
    parser.add_argument("--rows", metavar="NAME,NAME", help="only these rows: " + ", ".join(ROWS))
    parser.add_argument("--gross", action="store_true",
                        help="keep the Python call overhead in host costs instead of subtracting it")
    args = parser.parse_args(argv)
    if args.rows:
        args.rows = [name.strip() for name in args.rows.split(",") if name.strip()]
        unknown = [name for name in args.rows if name not in ROWS]
        if unknown or not args.rows:
            parser.error(f"unknown row(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(ROWS)}")
    else:
        args.rows = list(ROWS)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = Config(n=QUICK_N_CALLS, reps=QUICK_REPS) if args.quick else Config(n=N_CALLS, reps=REPS)
    rows = {name: ROWS[name] for name in args.rows}

    load_cuweave()
    cw = libraries.cw
    gpu_name = cw.Device(0).properties.name

    # The raw helper runs first, alone on the GPU, before the in-process measurements.
    raw, raw_note = None, "not needed for these rows"
    if any(row.raw_key for row in rows.values()):
        exe, raw_note = build_raw_helper(gpu_name)
        if exe is not None:
            raw, raw_note = run_raw_helper(exe, cfg)
    unavailable = {} if raw is not None else {"raw": raw_note}

    versions: dict[str, str] = {}
    unavailable.update(load_peers(versions))
    usable = {lib for lib in LIBS if lib not in unavailable}

    overhead = calibrate_call_overhead(10 * cfg.n, cfg.reps)
    timing.call_overhead_us = 0.0 if args.gross else overhead

    results = {name: measure_row(row, cfg, usable, raw) for name, row in rows.items()}

    machine = machine_info(versions)
    print(f"cuweave {machine['cuweave']} on {machine['gpu']} (driver {machine['driver_version']}, "
          f"runtime {machine['runtime_version']}); numpy {machine['numpy']}, torch {versions.get('torch', '-')}, "
          f"cupy {versions.get('cupy', '-')}, python {machine['python']}")
    print(f"{cfg.reps} reps (median, after a warm-up rep) of {cfg.n} calls"
          f"{' -- QUICK RUN, not figures to quote' if args.quick else ''}; "
          f"Python call overhead {overhead * 1e3:.1f} ns/call "
          f"{'kept (--gross)' if args.gross else 'subtracted from host costs'}")
    print(f"raw CUDA: {raw_note if raw is None else 'ok (' + str(raw.get('device')) + ')'}")
    for lib, reason in unavailable.items():
        if lib != "raw":
            print(f"{lib} skipped: {reason}")
    print()
    print_table(rows, results, unavailable)
    for name, result in results.items():
        here, ours = result.values.get(IN_PROCESS_RAW), result.values.get("cuweave")
        if here is not None and ours is not None:
            print(f"{name}: raw CUDA measured in this process in turn with cuweave, {cfg.reps} pairs: {here:.3f} us; "
                  f"cuweave {ours:.3f} us; median of the per-pair ratios {result.values[PAIRED_RATIO]:.3f}x raw "
                  "(the table's raw column is a fresh process run before)")
        cupy_here = result.values.get(CUPY_HERE)
        if cupy_here is not None and ours is not None:
            print(f"{name}: CuPy's nearest kernel measured in this process in turn with cuweave and raw CUDA: "
                  f"{cupy_here:.3f} us; median of the per-round ratios {result.values[paired_ratio(CUPY_HERE)]:.3f}x "
                  "CuPy (the table's CuPy column is a run of its own)")
        floor = result.values.get(PYTHON_FLOOR)
        if floor is not None and here is not None:
            print(f"{name}: two C method calls that do next to nothing (dict.get, dict.__contains__) cost {floor:.3f} "
                  f"us in the same loop; raw + that = {here + floor:.3f} us = {(here + floor) / here:.3f}x raw, the "
                  "least a Python binding of the pair can reach here")
        thinnest = result.values.get(THINNEST_BINDING)
        if thinnest is not None and here is not None:
            print(f"{name}: the same two CUDA calls through CuPy's Cython runtime functions (eventRecord, "
                  f"streamWaitEvent; handles as ints, no objects): {thinnest:.3f} us = {thinnest / here:.3f}x raw")
        one_call = result.values.get(ONE_CALL_WAIT)
        if one_call is not None and here is not None:
            print(f"{name}: cuweave's one-call form b.wait(a) (records a pooled event on a, b waits for it): "
                  f"{one_call:.3f} us = {one_call / here:.3f}x raw")
        through_driver = result.values.get(RAW_THROUGH_DRIVER)
        if through_driver is not None and here is not None and ours is not None:
            print(f"{name}: raw CUDA's loop through the driver (cuEventRecord, cuStreamWaitEvent, as cuweave "
                  f"calls them): {through_driver:.3f} us = {through_driver / here:.3f}x raw; "
                  f"cuweave = {ours / through_driver:.3f}x that")
        core = result.values.get(CUDA_CORE)
        if core is not None and ours is not None:
            print(f"{name}: cuda.core {core:.3f} us; cuweave {ours:.3f} us = {ours / core:.3f}x cuda.core")
        elif CUDA_CORE in result.errors:
            print(f"{name}: cuda.core not measured: {result.errors[CUDA_CORE]}")
    if any(name.startswith("numpy_to_device") for name in rows) and cw is not None:
        stats = cw.staging_stats()
        threads = stats["copy_threads"]
        print(f"staging (NumPy<->device through pinned slots): {threads} copy threads, {stats['slots']} slots of "
              f"{stats['slot_bytes'] >> 20} MB; this host copies NumPy into pinned memory at "
              f"{host_memcpy_gbps():.1f} GB/s with one thread (measured now)")
        for direction in ("to_device", "to_host"):
            print(f"staging {describe_copy_thread_tuning(direction, stats[direction], threads)}")
    in_turn = results.get("numpy_to_device", Result()).values
    if HOST_COPY_IN_TURN in in_turn and "cuweave" in in_turn:
        reach = in_turn[HOST_COPY_OVER_PINNED]
        print(f"numpy_to_device: in turn with it, {cfg.reps} repetitions: this host's NumPy -> pinned copy "
              f"{in_turn[HOST_COPY_IN_TURN]:.1f} GB/s (the faster of the pool's and the chosen thread count; bounds "
              f"the staged path), pinned -> device {in_turn[PINNED_H2D_IN_TURN]:.1f} GB/s (wall, bounds the link); "
              f"cuweave {in_turn['cuweave']:.1f} GB/s = {in_turn[STAGED_OVER_HOST_COPY]:.3f}x the host's copy, "
              f"{in_turn[STAGED_OVER_PINNED]:.3f}x pinned (medians of per-repetition ratios); the host's copy "
              f"reaches {reach:.3f}x pinned, so 0.8x pinned is {'within' if reach >= 0.8 else 'beyond'} this "
              "host's reach")
    if pipeline_calibration:
        print(f"pipeline: {PIPELINE_BATCHES} NumPy float32 batches of {PIPELINE_BATCH_BYTES >> 20} MB; one batch's "
              f"cw.to_device + sync took {pipeline_calibration['batch_copy_ms']:.3f} ms, so per-batch compute "
              f"(cw.ops.spin) is {pipeline_calibration['compute_ms']:.3f} ms ({PIPELINE_COMPUTE_OVER_COPY}x); "
              f"{pipeline_reps(cfg)} reps; cuweave prefetch depth {PIPELINE_DEPTH}")
    if copy_split_measured:
        parts = []
        for lib, split in copy_split_measured.items():
            inside = (f"{split[SPLIT_TORCH_PIN]:.1f} inside pin_memory(), {split[SPLIT_TORCH_TO]:.1f} inside "
                      ".to(non_blocking=True)" if lib == "torch" else f"{split[SPLIT_CALLS]:.1f} inside cw.to_device")
            parts.append(f"{lib} {split[SPLIT_WALL]:.1f} ms wall, {inside}, {split[SPLIT_SYNC]:.1f} inside the final "
                         "synchronize")
        print(f"pipeline: the {PIPELINE_BATCHES} copies alone in a measuring pass of their own (perf_counter around "
              f"each call, medians of {pipeline_reps(cfg)}): {'; '.join(parts)}. pin_memory() is the host's copy and "
              ".to(non_blocking=True) from pinned memory only queues the DMA, which the synchronize waits for; "
              "cw.to_device returns once its bytes are staged, its host copies overlapping the DMAs of earlier chunks "
              "and waiting for a free slot when the link lags, so its time holds both (numpy_to_device gives the "
              "host's and the link's bounds)")

    if args.json:
        report = {
            "machine": machine,
            "settings": {"reps": cfg.reps, "n_calls": cfg.n, "quick": args.quick,
                         "call_overhead_us": overhead, "call_overhead_subtracted": not args.gross,
                         "block_bytes": BLOCK_BYTES, "block_pairs": BLOCK_PAIRS, "copy_bytes": COPY_BYTES,
                         "duplex_rounds": DUPLEX_ROUNDS,
                         "pipeline": {"batches": PIPELINE_BATCHES, "batch_bytes": PIPELINE_BATCH_BYTES,
                                      "compute_over_copy": PIPELINE_COMPUTE_OVER_COPY, "depth": PIPELINE_DEPTH,
                                      "reps": pipeline_reps(cfg), **pipeline_calibration}},
            "raw_cuda": {"note": raw_note, "results": raw},
            "staging": cw.staging_stats() if cw is not None else None,
            "skipped": unavailable,
            "rows": {
                name: {"title": row.title, "unit": row.unit, "higher_is_better": row.higher_is_better,
                       "target": row.target, "values": results[name].values, "errors": results[name].errors,
                       **summarize(row, results[name])}
                for name, row in rows.items()
            },
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nwrote {args.json}")

    return 1 if any("cuweave" in result.errors for result in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
