"""SM partitions against stream priority and against sharing: the two rows of the SM partition page.

job latency (one GPU)
    A filler kernel fills every SM: --waves waves of 32 one-thread blocks per SM (Hopper's resident limit),
    each block busy for --block-ms. Once it runs, a short job (a one-block spin of --job-us) is queued on
    another stream, five ways: at normal priority (the filler's); at high priority; as a graph captured on a
    high-priority stream and replayed on a normal one, without and with node priorities (Graph.node_priorities);
    and on a partition of its own (cw.Device(0).partition(--reserve)) while the filler fills the rest's SMs. The latency is the CUDA
    event time from just before the job on its stream to just after it: how long the job waited for SMs, plus
    its run. Medians of --reps.

all-reduce beside compute (two GPUs or more)
    One process drives every GPU (cw.collectives.communicators). The all-reduce of --mb MB per rank runs alone,
    a compute that fills every SM runs alone (about as long), then both together; overlap efficiency =
    (all-reduce + compute - together) / the shorter of the two (1: the shorter hid entirely; 0: one after the
    other). Twice: with both on streams of the whole device, and with the all-reduce on a partition of
    --reserve SMs while the compute fills the rest. Wall times, medians of --reps.

On the simulator the script runs end to end (its figures are host times, and the simulator has no SMs to
reserve); it prints so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

import cuweave as cw
from libraries import add_run_arguments, gpu_machine_info

RESIDENT_BLOCKS_PER_SM = 32  # one-thread blocks that fit on an SM at once (Hopper)


def filler(stream: cw.Stream, sms: int, waves: int, block_ms: float) -> None:
    cw.ops.spin(block_ms / 1e3, stream=stream, blocks=waves * sms * RESIDENT_BLOCKS_PER_SM)


def job_latency_us(job: cw.Stream, queue_job: Callable[[cw.Stream], None], fill: Callable[[], None]) -> float:
    start, end = cw.Event(timing=True), cw.Event(timing=True)
    fill()
    time.sleep(0.002)  # the filler is running by now
    start.record(job)
    queue_job(job)
    end.record(job)
    cw.synchronize()
    return start.elapsed_time(end) * 1e3


def captured_job(job_us: float, node_priorities: bool) -> cw.Graph:
    """The job captured on a high-priority stream, for replays on a stream of normal priority."""
    with cw.capture(cw.Stream(priority="high", name="capture (high)")) as cap:
        cw.ops.spin(job_us / 1e6)
    cap.graph.node_priorities = node_priorities
    return cap.graph


def latency_row(args: argparse.Namespace) -> dict[str, float]:
    device = cw.Device(0)
    sms = device.properties.multiprocessor_count
    shared_filler = cw.Stream(name="filler")
    reserved, rest = device.partition(args.reserve)
    rest_filler = cw.Stream(partition=rest, name="filler (rest)")
    def fill_every_sm() -> None:
        filler(shared_filler, sms, args.waves, args.block_ms)

    def spin(stream: cw.Stream) -> None:
        cw.ops.spin(args.job_us / 1e6, stream=stream)

    graphs = {priorities: captured_job(args.job_us, priorities) for priorities in (False, True)}
    ways = {
        "normal priority": (cw.Stream(name="job"), spin, fill_every_sm),
        "high priority": (cw.Stream(priority="high", name="job (high)"), spin, fill_every_sm),
        # the job captured on a high-priority stream, replayed on a normal one: it keeps its priority only with
        # node priorities
        "graph, replayed": (cw.Stream(name="job (graph)"), graphs[False].replay, fill_every_sm),
        "graph, node priorities": (cw.Stream(name="job (graph)"), graphs[True].replay, fill_every_sm),
        "reserved partition": (cw.Stream(partition=reserved, name="job (reserved)"), spin,
                               lambda: filler(rest_filler, rest.sms, args.waves, args.block_ms)),
    }
    for job, queue_job, _ in ways.values():  # warm-up: the graphs are instantiated at their first replay
        queue_job(job)
    cw.synchronize()
    figures: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(args.reps):  # the ways in turn, so that drift hits each alike
        for way, (job, queue_job, fill) in ways.items():
            figures[way].append(job_latency_us(job, queue_job, fill))
    row = {way: statistics.median(values) for way, values in figures.items()}
    print(f"job latency behind a filler of every SM ({args.waves} waves of {args.block_ms} ms blocks, "
          f"{args.job_us:.0f} us job; partition of {reserved.sms} of {sms} SMs), medians of {args.reps}:")
    for way, us in row.items():
        print(f"  {way:24s} {us:10.1f} us")
    return row


def synchronize_devices(devices: list[int]) -> None:
    for device in devices:
        cw.Device(device).synchronize()


def overlap_row(args: argparse.Namespace) -> dict[str, float]:
    devices = list(range(cw.device_count()))
    count = args.mb * 2**20 // 4
    comms = cw.collectives.communicators(devices)

    def measure(partitioned: bool) -> float:
        comm_streams, compute_streams, grads, fill_sms = [], [], [], []
        for device in devices:
            with cw.Device(device):
                if partitioned:
                    reserved, rest = cw.Device(device).partition(args.reserve)
                    comm_streams.append(cw.Stream(partition=reserved, name=f"all-reduce {device}"))
                    compute_streams.append(cw.Stream(partition=rest, name=f"compute {device}"))
                    fill_sms.append(rest.sms)
                else:
                    comm_streams.append(cw.Stream(name=f"all-reduce {device}"))
                    compute_streams.append(cw.Stream(name=f"compute {device}"))
                    fill_sms.append(cw.Device(device).properties.multiprocessor_count)
                grads.append(cw.ones(count, np.float32, stream=comm_streams[-1]))

        def all_reduce() -> None:
            comms.all_reduce(grads, op="sum", streams=comm_streams)

        def timed(*queues: Callable[[], None]) -> float:
            synchronize_devices(devices)
            began = time.perf_counter()
            for queue in queues:
                queue()
            synchronize_devices(devices)
            return (time.perf_counter() - began) * 1e3

        all_reduce()  # warm-up: NCCL connects the ranks on first use
        synchronize_devices(devices)
        alone_ar = statistics.median(timed(all_reduce) for _ in range(args.reps))
        block_s = max(alone_ar / 1e3, 0.002)

        def compute() -> None:
            for stream, sms in zip(compute_streams, fill_sms):
                cw.ops.spin(block_s, stream=stream, blocks=sms * RESIDENT_BLOCKS_PER_SM)

        spans = {"all-reduce": [], "compute": [], "together": []}
        for _ in range(args.reps):
            spans["all-reduce"].append(timed(all_reduce))
            spans["compute"].append(timed(compute))
            spans["together"].append(timed(all_reduce, compute))
        ar, c, both = (statistics.median(spans[k]) for k in ("all-reduce", "compute", "together"))
        efficiency = (ar + c - both) / min(ar, c)
        print(f"  {'partitioned' if partitioned else 'shared':12s} all-reduce {ar:8.2f} ms, compute {c:8.2f} ms, "
              f"together {both:8.2f} ms -> overlap efficiency {efficiency:.2f}")
        return efficiency

    print(f"all-reduce of {args.mb} MB per rank on {len(devices)} devices beside compute that fills every SM "
          f"(partition: {args.reserve} SMs asked for the all-reduce), wall ms, medians of {args.reps}:")
    return {"shared": measure(False), "partitioned": measure(True)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reserve", type=int, default=16, help="SMs asked for the reserved partition")
    parser.add_argument("--waves", type=int, default=4)
    parser.add_argument("--block-ms", type=float, default=5.0)
    parser.add_argument("--job-us", type=float, default=20.0)
    parser.add_argument("--mb", type=int, default=256, help="all-reduce MB per rank")
    add_run_arguments(parser, reps=5)
    args = parser.parse_args()
    if args.quick:
        args.waves, args.block_ms, args.mb, args.reps = 1, 2.0, 4, 2
    resources = cw.Device(0).sm_resources
    args.reserve = min(max(args.reserve, resources.min_partition_sms), resources.sm_count - resources.alignment)
    print(f"cuweave {cw.__version__} on {cw.Device(0).properties.name} ({cw.backend()}): {resources}")
    if cw.backend() != "cuda":
        print("on the simulator: host times, and no SMs to reserve (a partition's streams run like any other)")
    figures: dict[str, dict[str, float]] = {"job_latency_us": latency_row(args)}
    if cw.device_count() >= 2:
        figures["all_reduce_overlap_efficiency"] = overlap_row(args)
    else:
        print("all-reduce beside compute: skipped (needs two devices)")
    if args.json:
        settings = {"reserve_sms": args.reserve, "waves": args.waves, "block_ms": args.block_ms, "job_us": args.job_us,
                    "mb": args.mb, "reps": args.reps, "devices": cw.device_count()}
        Path(args.json).write_text(json.dumps({"machine": gpu_machine_info(cw), "settings": settings, **figures},
                                              indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
