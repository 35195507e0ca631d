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
    The all-reduce of --mb MB per rank runs alone, a compute that fills every SM runs alone (about as long),
    then both together; overlap efficiency = (all-reduce + compute - together) / the shorter of the two (1: the
    shorter hid entirely; 0: one after the other). With both on streams of the whole device, and with the
    all-reduce on a partition of --reserve SMs while the compute fills the rest. Wall times, medians of --reps.
    All of it twice: with one process per rank (a cw.collectives.Communicator each, lined up by a small
    all-reduce before each timed run; rank 0's figures), and with one process driving every GPU
    (cw.collectives.communicators).

On the simulator the script runs end to end (its figures are host times, and the simulator has no SMs to
reserve; its ranks cannot span processes, so only the one-process row runs); it prints so.
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
from ranks import publish, run_ranks, wait_for_rendezvous

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


AllReduceOf = Callable[[list[cw.DeviceArray], list[cw.Stream]], Callable[[], None]]


def overlap_figures(devices: list[int], all_reduce_of: AllReduceOf, barrier: Callable[[], None],
                    args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """For this process's `devices`: the all-reduce alone, the compute alone and both, shared and partitioned
    (wall ms, medians), and their overlap efficiency. `barrier` lines up the ranks of other processes before each
    timed run (a no-op when one process drives every rank)."""

    def measure(partitioned: bool) -> dict[str, float]:
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
                grads.append(cw.ones(args.mb * 2**20 // 4, np.float32, stream=comm_streams[-1]))
        all_reduce = all_reduce_of(grads, comm_streams)

        def timed(*queues: Callable[[], None]) -> float:
            synchronize_devices(devices)
            barrier()
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

        spans: dict[str, list[float]] = {"all_reduce_ms": [], "compute_ms": [], "together_ms": []}
        for _ in range(args.reps):
            spans["all_reduce_ms"].append(timed(all_reduce))
            spans["compute_ms"].append(timed(compute))
            spans["together_ms"].append(timed(all_reduce, compute))
        row = {name: statistics.median(values) for name, values in spans.items()}
        row["efficiency"] = (row["all_reduce_ms"] + row["compute_ms"] - row["together_ms"]) / min(
            row["all_reduce_ms"], row["compute_ms"])
        return row

    return {"shared": measure(False), "partitioned": measure(True)}


def one_process_overlap(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    devices = list(range(cw.device_count()))
    comms = cw.collectives.communicators(devices)

    def all_reduce_of(grads: list[cw.DeviceArray], streams: list[cw.Stream]) -> Callable[[], None]:
        return lambda: comms.all_reduce(grads, op="sum", streams=streams)

    return overlap_figures(devices, all_reduce_of, lambda: None, args)


def rank_overlap(args: argparse.Namespace) -> None:
    """One rank of the overlap row in a process of its own (--rank); rank 0 writes the figures to --out."""
    rank = args.rank
    with cw.Device(rank):
        if rank == 0:
            publish(args.rendezvous, cw.collectives.unique_id())
        comm = cw.collectives.Communicator(wait_for_rendezvous(args.rendezvous, rank), ranks=args.world, rank=rank,
                                           device=rank)
        token = cw.zeros(1, np.float32)

        def barrier() -> None:  # every rank starts its timed run within an all-reduce's latency of the others
            comm.all_reduce(token)
            cw.Device(rank).synchronize()

        def all_reduce_of(grads: list[cw.DeviceArray], streams: list[cw.Stream]) -> Callable[[], None]:
            return lambda: comm.all_reduce(grads[0], op="sum", stream=streams[0])

        figures = overlap_figures([rank], all_reduce_of, barrier, args)
        comm.close()
    if rank == 0:
        args.out.write_text(json.dumps(figures))


def process_per_rank_overlap(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    world = cw.device_count()

    def worker_args(rank: int, rendezvous: Path, out: Path) -> list[str]:
        return ["--rank", str(rank), "--world", str(world), "--rendezvous", str(rendezvous), "--out", str(out),
                "--reserve", str(args.reserve), "--mb", str(args.mb), "--reps", str(args.reps)]

    return run_ranks(__file__, "all-reduce beside compute", world, worker_args, {}, args.timeout)


def overlap_rows(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """The all-reduce beside compute, one process per rank (on GPUs) and one process driving every rank."""
    ways = {"one process per rank": process_per_rank_overlap} if cw.backend() == "cuda" else {}
    ways["one process"] = one_process_overlap  # the simulator's ranks cannot span processes
    print(f"all-reduce of {args.mb} MB per rank on {cw.device_count()} devices beside compute that fills every SM "
          f"(partition: {args.reserve} SMs asked for the all-reduce), wall ms, medians of {args.reps}:")
    rows = {}
    for way, run in ways.items():
        figures = run(args)
        for streams, row in figures.items():
            print(f"  {way:21s} {streams:12s} all-reduce {row['all_reduce_ms']:8.2f} ms, compute "
                  f"{row['compute_ms']:8.2f} ms, together {row['together_ms']:8.2f} ms -> overlap efficiency "
                  f"{row['efficiency']:.2f}")
        rows[way] = {streams: row["efficiency"] for streams, row in figures.items()}
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reserve", type=int, default=16, help="SMs asked for the reserved partition")
    parser.add_argument("--waves", type=int, default=4)
    parser.add_argument("--block-ms", type=float, default=5.0)
    parser.add_argument("--job-us", type=float, default=20.0)
    parser.add_argument("--mb", type=int, default=256, help="all-reduce MB per rank")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="seconds the ranks of the one-process-per-rank row may take (default 300)")
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rendezvous", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    add_run_arguments(parser, reps=5)
    args = parser.parse_args()
    if args.rank is not None:
        rank_overlap(args)
        return 0
    if args.quick:
        args.waves, args.block_ms, args.mb, args.reps = 1, 2.0, 4, 2
    resources = cw.Device(0).sm_resources
    args.reserve = min(max(args.reserve, resources.min_partition_sms), resources.sm_count - resources.alignment)
    print(f"cuweave {cw.__version__} on {cw.Device(0).properties.name} ({cw.backend()}): {resources}")
    if cw.backend() != "cuda":
        print("on the simulator: host times, and no SMs to reserve (a partition's streams run like any other)")
    figures: dict[str, dict[str, float]] = {"job_latency_us": latency_row(args)}
    if cw.device_count() >= 2:
        figures["all_reduce_overlap_efficiency"] = overlap_rows(args)
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
