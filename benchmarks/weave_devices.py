"""A two-device pipeline written in order under cw.weave(), against the same pipeline written by hand with a stream
per device and events, and against its stages one after the other.

Each of --batches batches: stage 1 (--ops passes of a scale over --mb MB) on device 0, a copy to device 1, stage 2
(--ops passes of an add) on device 1; woven a second time with no copy written, stage 2's first add reading device
0's array (the weave copies it). Buffers alternate between two per device, so that batch i's stage 2 and copy
can overlap batch i + 1's stage 1. Figures: wall ms from queuing the first batch to both devices finishing, medians
of --reps, the ways in turn; overlap = (one after the other - pipelined) / one after the other. Needs two devices
(on the simulator: CUWEAVE_SIM_DEVICES=2; its figures are host times).

    python benchmarks/weave_devices.py [--batches 8] [--mb 64] [--ops 4] [--reps 5] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import cuweave as cw
from libraries import add_run_arguments, gpu_machine_info


class Buffers:
    def __init__(self, count: int) -> None:
        self.first = [cw.zeros(count, np.float32, stream=cw.Stream(device=0)) for _ in range(2)]
        with cw.Device(1):
            self.second = [cw.zeros(count, np.float32, stream=cw.Stream(device=1)) for _ in range(2)]
        synchronize_both()


def synchronize_both() -> None:
    for device in (0, 1):
        cw.Device(device).synchronize()


def stage1(x: cw.DeviceArray, ops: int, stream: cw.Stream | None = None) -> None:
    for _ in range(ops):
        cw.ops.scale(x, 1.0001, out=x, stream=stream)


def stage2(y: cw.DeviceArray, ops: int, stream: cw.Stream | None = None) -> None:
    for _ in range(ops):
        cw.ops.add(y, 1.0, out=y, stream=stream)


def woven(buffers: Buffers, batches: int, ops: int, first: cw.Stream) -> None:
    with first, cw.weave(streams=2):
        for i in range(batches):
            x, y = buffers.first[i % 2], buffers.second[i % 2]
            stage1(x, ops)
            cw.copy_async(y, x)
            stage2(y, ops)


def woven_reading_across(buffers: Buffers, batches: int, ops: int, first: cw.Stream) -> None:
    """As woven(), with no copy written: stage 2's first add reads device 0's x, and the weave copies it."""
    with first, cw.weave(streams=2):
        for i in range(batches):
            x, y = buffers.first[i % 2], buffers.second[i % 2]
            stage1(x, ops)
            cw.ops.add(x, 1.0, out=y)
            stage2(y, ops - 1)


def by_hand(buffers: Buffers, batches: int, ops: int, first: cw.Stream, second: cw.Stream) -> None:
    copied: list[cw.Event | None] = [None, None]  # per buffer: its last copy, which read it
    for i in range(batches):
        x, y = buffers.first[i % 2], buffers.second[i % 2]
        if copied[i % 2] is not None:
            first.wait(copied[i % 2])  # x is not written before the copy of two batches ago read it
        stage1(x, ops, first)
        second.wait(first.record())
        cw.copy_async(y, x, stream=second)
        copied[i % 2] = second.record()
        stage2(y, ops, second)


def one_after_the_other(buffers: Buffers, batches: int, ops: int, first: cw.Stream, second: cw.Stream) -> None:
    for i in range(batches):
        x, y = buffers.first[i % 2], buffers.second[i % 2]
        stage1(x, ops, first)
        first.synchronize()
        cw.copy_async(y, x, stream=second)
        stage2(y, ops, second)
        second.synchronize()


def wall_ms(run) -> float:
    synchronize_both()
    began = time.perf_counter()
    run()
    synchronize_both()
    return (time.perf_counter() - began) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--ops", type=int, default=4)
    add_run_arguments(parser, reps=5)
    args = parser.parse_args()
    if args.quick:
        args.batches, args.mb, args.ops, args.reps = 3, 1, 2, 2
    if cw.device_count() < 2:
        print("a two-device pipeline: skipped (needs two devices)")
        return 0
    count = args.mb * 2**20 // 4
    buffers = Buffers(count)
    first, second = cw.Stream(device=0, name="stage 1"), cw.Stream(device=1, name="stage 2")
    ways = {
        "woven": lambda: woven(buffers, args.batches, args.ops, first),
        "woven, read across": lambda: woven_reading_across(buffers, args.batches, args.ops, first),
        "by hand": lambda: by_hand(buffers, args.batches, args.ops, first, second),
        "one after the other": lambda: one_after_the_other(buffers, args.batches, args.ops, first, second),
    }
    for run in ways.values():  # warm-up: streams, peer access, the weave's streams on device 1
        wall_ms(run)
    samples: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(args.reps):
        for way, run in ways.items():
            samples[way].append(wall_ms(run))
    figures = {way: statistics.median(values) for way, values in samples.items()}
    serial = figures["one after the other"]
    print(f"cuweave {cw.__version__} on {cw.Device(0).properties.name} x 2 ({cw.backend()}): {args.batches} batches "
          f"of {args.mb} MB, {args.ops} passes per stage; wall ms, medians of {args.reps}")
    for way, ms in figures.items():
        overlap = "" if way == "one after the other" else f"   overlap {(serial - ms) / serial:.2f}"
        print(f"  {way:20s} {ms:9.2f} ms{overlap}")
    print(f"  woven / by hand      {figures['woven'] / figures['by hand']:.3f}")
    print(f"  read across / by hand {figures['woven, read across'] / figures['by hand']:.3f}")
    if args.json:
        settings = {"batches": args.batches, "mb": args.mb, "ops": args.ops, "reps": args.reps}
        Path(args.json).write_text(json.dumps({"machine": gpu_machine_info(cw), "settings": settings,
                                               "wall_ms": figures}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
