"""Where an all-reduce waits when it runs beside compute, one process driving every GPU: for each device, the
kernels of one "together" run (all-reduce queued, then compute), with starts and ends relative to the first
kernel, on streams of the whole device and on SM partitions (all-reduce on a reserved partition, compute on the
rest). Prints the overlap efficiency of each way, as notebook 08 measures it from traces.

    python tools/probes/allreduce_beside_compute_probe.py [--mb 256] [--blocks 1] [--reserve 16]
    CUDA_DEVICE_MAX_CONNECTIONS=32 python tools/probes/allreduce_beside_compute_probe.py
    python tools/probes/allreduce_beside_compute_probe.py --skew

Seen on 2 x H200: under cw.trace(all_threads=True), NCCL's thread launched device 0's all-reduce kernel 3.9 ms
after device 1's, in every trace, where untraced the whole all-reduce takes 1.15 ms. --skew tells whether that
is a cost of each trace's start (CUPTI attaching afresh, then meeting NCCL's kernels on each device for the
first time) or of tracing itself: the skew between the devices' kernel starts, for all-reduces each in a trace
of its own, and for several in one trace.
"""

from __future__ import annotations

import argparse
import os
import time
from statistics import median

import numpy as np

import cuweave as cw


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=256)
    parser.add_argument("--blocks", type=int, default=1, help="blocks of the compute spin")
    parser.add_argument("--reserve", type=int, default=16, help="SMs asked for the all-reduce's partition")
    parser.add_argument("--skew", action="store_true", help="only the launch skew between devices, per trace")
    args = parser.parse_args()
    devices = list(range(cw.device_count()))
    print(f"{len(devices)} devices; CUDA_DEVICE_MAX_CONNECTIONS={os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS')}; "
          f"{args.mb} MB per rank; compute: spin of {args.blocks} block(s)")
    comms = cw.collectives.communicators(devices)
    count = args.mb * 2**20 // 4

    def synchronize_all() -> None:
        for device in devices:
            cw.Device(device).synchronize()

    if args.skew:
        skew(comms, devices, count, synchronize_all)
        return
    for way in ("shared", "partitioned"):
        comm_streams, compute_streams, grads = [], [], []
        for device in devices:
            with cw.Device(device):
                if way == "partitioned":
                    reserved, rest = cw.Device(device).partition(args.reserve)
                    comm_streams.append(cw.Stream(partition=reserved, name=f"all-reduce {device}"))
                    compute_streams.append(cw.Stream(partition=rest, name=f"compute {device}"))
                else:
                    comm_streams.append(cw.Stream(name=f"all-reduce {device}"))
                    compute_streams.append(cw.Stream(name=f"compute {device}"))
                grads.append(cw.ones(count, np.float32, stream=comm_streams[-1]))

        def all_reduce() -> None:
            comms.all_reduce(grads, op="avg", streams=comm_streams)

        def compute(seconds: float) -> None:
            for stream in compute_streams:
                cw.ops.spin(seconds, stream=stream, blocks=args.blocks)

        def traced(*queues):
            with cw.trace(all_threads=True) as trace:
                for queue in queues:
                    queue()
                synchronize_all()
            kernels = trace.select("kernel")
            span = (max(k.end_ns for k in kernels) - min(k.start_ns for k in kernels)) / 1e6 if kernels else 0.0
            return span, trace

        all_reduce()
        compute(0.001)
        synchronize_all()
        alone_ar = median(traced(all_reduce)[0] for _ in range(3))
        seconds = max(alone_ar / 1e3, 0.002)
        alone_c = median(traced(lambda: compute(seconds))[0] for _ in range(3))
        runs = [traced(all_reduce, lambda: compute(seconds)) for _ in range(3)]
        both = median(span for span, _ in runs)
        efficiency = (alone_ar + alone_c - both) / min(alone_ar, alone_c)
        print(f"{way}: all-reduce {alone_ar:.2f} ms, compute {alone_c:.2f} ms, together {both:.2f} ms "
              f"-> overlap efficiency {efficiency:.2f}")
        trace = runs[-1][1]
        kernels = trace.select("kernel")
        t0 = min(k.start_ns for k in kernels)
        for k in sorted(kernels, key=lambda k: (k.device, k.start_ns)):
            print(f"   device {k.device} lane {k.lane.label!r:28s} {k.name[:48]:48s} "
                  f"{(k.start_ns - t0) / 1e6:8.3f} .. {(k.end_ns - t0) / 1e6:8.3f} ms thread {k.thread}")


def skew(comms, devices: list[int], count: int, synchronize_all) -> None:
    grads, streams = [], []
    for device in devices:
        with cw.Device(device):
            streams.append(cw.Stream(name=f"all-reduce {device}"))
            grads.append(cw.ones(count, np.float32, stream=streams[-1]))

    def all_reduce() -> None:
        comms.all_reduce(grads, op="avg", streams=streams)

    def starts_ms(trace) -> list[list[float]]:
        # per all-reduce (in order), each device's first kernel start, in ms after the earliest
        kernels = sorted(trace.select("kernel"), key=lambda k: k.start_ns)
        per_device = {device: [k.start_ns for k in kernels if k.device == device] for device in devices}
        rounds = min(len(v) for v in per_device.values())
        t0 = min(k.start_ns for k in kernels)
        return [[(per_device[d][i] - t0) / 1e6 for d in devices] for i in range(rounds)]

    all_reduce()
    synchronize_all()
    for attempt in range(3):
        with cw.trace(all_threads=True) as trace:
            all_reduce()
            synchronize_all()
        print(f"a trace of its own, #{attempt}: device kernel starts (ms) {starts_ms(trace)}")
    with cw.trace(all_threads=True) as trace:
        for _ in range(3):
            all_reduce()
            synchronize_all()
    print(f"three in one trace: device kernel starts (ms) per all-reduce {starts_ms(trace)}")
    began = time.perf_counter()
    all_reduce()
    synchronize_all()
    print(f"untraced: {1e3 * (time.perf_counter() - began):.2f} ms queued to done")


if __name__ == "__main__":
    main()
