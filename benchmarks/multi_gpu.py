"""Several GPUs: peer copies, cross-device events, NCCL all-reduce and its overlap with compute, beside raw
CUDA (benchmarks/raw_multi_gpu.cu) and PyTorch, in one run.

    python benchmarks/multi_gpu.py [--quick] [--json PATH] [--timeout S]

Rows (each with its ratio to the reference, the target where one is set, and whether it is met):
  peer_copy_256mb_gbps         cw.copy_async between devices 0 and 1 vs cudaMemcpyPeerAsync (else torch copy_);
                               target >= 0.95x
  through_host_256mb_gbps      the same bytes by hand through pinned host memory: device 0 -> pinned on a stream
                               of device 0, an event, pinned -> device 1 on a stream of device 1 (for reference:
                               what a copy costs without peer access; no target)
  cross_device_record_wait_us  record on a stream of device 0, wait on a stream of device 1 (host µs per pair;
                               no target)
  all_reduce_256mb_busbw_gbps  NCCL all-reduce of 256 MB float32, one process per GPU: cuweave.collectives vs
                               torch.distributed (bus bandwidth = algorithm bandwidth x 2(n-1)/n, as nccl-tests);
                               target >= 0.95x torch.distributed
  overlap_efficiency           an all-reduce on its own stream beside compute (axpy passes) on another:
                               (t_compute + t_allreduce - t_both) / min(t_compute, t_allreduce); 1 = fully
                               hidden, 0 = serialized; vs torch.distributed, no target
The all-reduce rows run again with CUDA_DEVICE_MAX_CONNECTIONS=1.

A row that fails prints its error and the others still run; the exit status is 1 if any measurement failed
(cuweave's, or a reference's that was available: the raw helper built, PyTorch with the GPUs). A reference
that is not there (no nvcc, no PyTorch) is skipped with a note. The all-reduce workers and the raw helper run
as child processes, killed after --timeout seconds (all ranks at once when one fails, since the others would
wait for it forever).

With one GPU the peer rows are skipped and the all-reduce workers run with one rank, which moves no data: a
smoke test of the script, with no figures. On the simulator (CUWEAVE_SIM_DEVICES=2) the script runs end to
end as a smoke test with 16 MB instead of 256 MB; raw CUDA and PyTorch are skipped, the all-reduce runs in
one process driving both simulated devices (the simulator's ranks cannot span processes), and every figure is
a host time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from libraries import gpu_machine_info
from multi_gpu_table import COLUMNS, Row, failed, failures, measure, print_table, skip
from ranks import publish, run_ranks, wait_for_rendezvous

HERE = Path(__file__).resolve().parent
ALL_REDUCE_BYTES = 256 << 20
SIM_BYTES = 16 << 20  # the simulator's smoke test: host memcpys and host reductions


def median(values: list[float]) -> float:
    return float(np.median(values))


def gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9 if ms > 0 else float("nan")


def _events_ms(stream, run) -> float:
    import cuweave as cw

    start, end = cw.Event(timing=True), cw.Event(timing=True)
    start.record(stream)
    run()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end)


# ---- between two devices in this process ---------------------------------------------------------------------

def cuweave_peers(nbytes: int, reps: int, n: int) -> tuple[list[float | None], list[Exception | None], str]:
    """cuweave's (peer copy GB/s, through-host GB/s, record+wait µs), each measured even if one before failed;
    the error of each (None where it worked); and the route cw.copy_async took."""
    import cuweave as cw

    s0, s1 = cw.Stream(device=0), cw.Stream(device=1)
    src = cw.zeros(nbytes, np.uint8, stream=s0)
    dst = cw.empty(nbytes, np.uint8, stream=s1)
    staging = cw.pinned_empty(nbytes, np.uint8)
    s0.synchronize()
    s1.synchronize()

    def peer_copy() -> float:
        cw.copy_async(dst, src, stream=s0)  # warm-up; enables peer access
        s0.synchronize()
        return median([gbps(nbytes, _events_ms(s0, lambda: cw.copy_async(dst, src, stream=s0))) for _ in range(reps)])

    def through_host() -> float:
        def trip():
            cw.copy_async(staging, src, stream=s0)  # device 0 -> pinned
            s1.wait(s0.record())
            cw.copy_async(dst, staging, stream=s1)  # pinned -> device 1
            s0.wait(s1.record())  # the end event on s0 follows both copies

        trip()
        s0.synchronize()
        return median([gbps(nbytes, _events_ms(s0, trip)) for _ in range(reps)])

    def record_wait() -> float:
        per_pair = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(n):
                s1.wait(s0.record())
            per_pair.append((time.perf_counter() - t0) / n * 1e6)
            s1.synchronize()
        return median(per_pair)

    figures: list[float | None] = []
    errors: list[Exception | None] = []
    for run in (peer_copy, through_host, record_wait):
        try:
            figures.append(run())
            errors.append(None)
        except Exception as error:  # noqa: BLE001
            figures.append(None)
            errors.append(error)
        s0.synchronize()
        s1.synchronize()
    try:
        route = cw.copy_async(dst, src, stream=s0).route
        s0.synchronize()
    except Exception as error:  # noqa: BLE001
        route = f"unknown ({type(error).__name__})"
    return figures, errors, route


def torch_peers(nbytes: int, reps: int, n: int) -> list[float]:
    """(peer copy GB/s, through-host GB/s, record+wait µs) with PyTorch."""
    import torch

    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda:0")
    b = torch.empty(nbytes, dtype=torch.uint8, device="cuda:1")
    staging = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    t0s, t1s = torch.cuda.Stream(device=0), torch.cuda.Stream(device=1)
    b.copy_(a)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)

    def timed(queue) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(t0s)
        queue()
        end.record(t0s)
        end.synchronize()
        return gbps(nbytes, start.elapsed_time(end))

    def peer():
        with torch.cuda.stream(t0s):
            b.copy_(a, non_blocking=True)

    def trip():
        with torch.cuda.stream(t0s):
            staging.copy_(a, non_blocking=True)
        t1s.wait_stream(t0s)
        with torch.cuda.stream(t1s):
            b.copy_(staging, non_blocking=True)
        t0s.wait_stream(t1s)

    peer_gbps = median([timed(peer) for _ in range(reps)])
    trip()
    torch.cuda.synchronize(0)
    through_host = median([timed(trip) for _ in range(reps)])
    per_pair = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            ev = torch.cuda.Event()
            ev.record(t0s)
            t1s.wait_event(ev)
        per_pair.append((time.perf_counter() - t0) / n * 1e6)
        t1s.synchronize()
    return [peer_gbps, through_host, median(per_pair)]


def raw_peers(device_name: str, reps: int, n: int, timeout_s: float) -> tuple[dict | None, str]:
    """raw_multi_gpu.cu's JSON, or (None, why): "skipped: ..." when there is no nvcc; else an error."""
    sys.path.insert(0, str(HERE))
    from raw_cuda import build_raw_helper

    exe, note = build_raw_helper(device_name, HERE / "raw_multi_gpu.cu")
    if exe is None:
        return None, ("skipped: " if note.startswith("nvcc not found") else "error: ") + note
    try:
        proc = subprocess.run([str(exe), "--reps", str(reps), "--n", str(n)], capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"error: raw_multi_gpu did not finish in {timeout_s:.0f} s (killed)"
    if proc.returncode != 0:
        return None, f"error: raw_multi_gpu exited {proc.returncode}: {proc.stderr.strip()[-300:]}"
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1]), "ok"
    except (IndexError, ValueError) as error:
        return None, f"error: raw_multi_gpu printed no JSON ({error}): {proc.stdout[-200:]!r}"


# ---- one rank of an all-reduce run, in its own process -------------------------------------------------------

def worker(lib: str, rank: int, world: int, rendezvous: Path, reps: int, nbytes: int, out: Path) -> None:
    """Times `reps` all-reduces of `nbytes` of float32 alone, an axpy compute phase alone, and both at once on
    two streams; rank 0 writes the figures (ms, medians) to `out`. lib "cuweave-one-process": this process
    drives every rank (the simulator's ranks cannot span processes)."""
    count = nbytes // 4

    if lib == "cuweave-one-process":
        import cuweave as cw

        comms = cw.collectives.communicators(range(world))
        comm_streams = [cw.Stream(device=d, name="comm") for d in range(world)]
        compute_streams = [cw.Stream(device=d, name="compute") for d in range(world)]
        grads = [cw.zeros(count, np.float32, stream=s) for s in comm_streams]
        xs = [cw.zeros(count, np.float32, stream=s) for s in compute_streams]
        ys = [cw.zeros(count, np.float32, stream=s) for s in compute_streams]

        def all_reduce():
            comms.all_reduce(grads, streams=comm_streams)

        def compute():
            for x, y, s in zip(xs, ys, compute_streams):
                for _ in range(8):
                    cw.ops.axpy(1.0, x, y, out=y, stream=s)

        streams = comm_streams + compute_streams
    elif lib == "cuweave":
        import cuweave as cw

        with cw.Device(rank):
            if rank == 0:
                publish(rendezvous, cw.collectives.unique_id())
            comm = cw.collectives.Communicator(wait_for_rendezvous(rendezvous, rank), ranks=world, rank=rank,
                                               device=rank)
            comm_stream, compute_stream = cw.Stream(name="comm"), cw.Stream(name="compute")
            grads = cw.zeros(count, np.float32, stream=comm_stream)
            x = cw.zeros(count, np.float32, stream=compute_stream)
            y = cw.zeros(count, np.float32, stream=compute_stream)

            def all_reduce():
                comm.all_reduce(grads, stream=comm_stream)

            def compute():
                for _ in range(8):
                    cw.ops.axpy(1.0, x, y, out=y, stream=compute_stream)

        streams = [comm_stream, compute_stream]
    else:
        import torch
        import torch.distributed as dist

        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
        comm_stream, compute_stream = torch.cuda.Stream(), torch.cuda.Stream()
        grads = torch.zeros(count, dtype=torch.float32, device="cuda")
        x = torch.zeros(count, dtype=torch.float32, device="cuda")
        y = torch.zeros(count, dtype=torch.float32, device="cuda")
        torch.cuda.synchronize()

        def all_reduce():
            with torch.cuda.stream(comm_stream):
                dist.all_reduce(grads)

        def compute():
            with torch.cuda.stream(compute_stream):
                for _ in range(8):
                    y.add_(x)

        streams = [comm_stream, compute_stream]

    def timed(run) -> float:  # both libraries' streams have synchronize()
        for stream in streams:
            stream.synchronize()
        t0 = time.perf_counter()
        run()
        for stream in streams:
            stream.synchronize()
        return (time.perf_counter() - t0) * 1e3

    def both():
        all_reduce()
        compute()

    for _ in range(3):  # warm-up: connections, kernels
        timed(all_reduce)
        timed(compute)
    alone = [timed(all_reduce) for _ in range(reps)]
    computing = [timed(compute) for _ in range(reps)]
    together = [timed(both) for _ in range(reps)]
    if rank == 0:
        out.write_text(json.dumps({"all_reduce_ms": median(alone), "compute_ms": median(computing),
                                   "both_ms": median(together)}))
    if lib == "torch":
        import torch.distributed as dist

        dist.destroy_process_group()


def run_lib_ranks(lib: str, world: int, reps: int, nbytes: int, extra_env: dict[str, str], timeout_s: float) -> dict:
    """All ranks of one all-reduce run as child processes (one for "cuweave-one-process"); rank 0's figures."""
    def worker_args(rank: int, rendezvous: Path, out: Path) -> list[str]:
        return ["--worker", lib, "--rank", str(rank), "--world", str(world), "--rendezvous", str(rendezvous),
                "--reps", str(reps), "--bytes", str(nbytes), "--out", str(out)]

    ranks = 1 if lib == "cuweave-one-process" else world
    return run_ranks(__file__, lib, ranks, worker_args, extra_env, timeout_s)


def summarize(figures: dict, world: int, nbytes: int) -> dict:
    algbw = gbps(nbytes, figures["all_reduce_ms"])
    shorter = min(figures["all_reduce_ms"], figures["compute_ms"])
    hidden = figures["all_reduce_ms"] + figures["compute_ms"] - figures["both_ms"]
    return dict(figures, algbw_gbps=algbw, busbw_gbps=algbw * 2 * (world - 1) / world,
                overlap_efficiency=hidden / shorter if shorter > 0 else float("nan"))


def torch_usable(world: int) -> str | None:
    """None if PyTorch can drive `world` GPUs here, else why not."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return "skipped: PyTorch is not installed"
    if torch.cuda.device_count() < world:
        return f"skipped: PyTorch sees {torch.cuda.device_count()} GPU(s), not {world}"
    if not dist.is_available() or not dist.is_nccl_available():
        return "skipped: this PyTorch has no NCCL backend"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 reps of 2,000 pairs: a smoke run")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="seconds each child process (all-reduce ranks, raw helper) may take (default 300)")
    parser.add_argument("--worker", choices=["cuweave", "cuweave-one-process", "torch"], help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rendezvous", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--reps", type=int, default=10, help=argparse.SUPPRESS)
    parser.add_argument("--bytes", type=int, default=ALL_REDUCE_BYTES, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.rank, args.world, args.rendezvous, args.reps, args.bytes, args.out)
        return

    import cuweave as cw

    on_gpu = cw.backend() == "cuda"
    world = cw.device_count()
    if world < 1:
        raise SystemExit(f"multi_gpu.py: no device on the {cw.backend()} backend")
    nbytes = ALL_REDUCE_BYTES if on_gpu else SIM_BYTES
    reps, n = (3, 2000) if args.quick else (10, 20000)
    names = [cw.Device(d).properties.name for d in range(world)]
    print(f"devices: {world} ({', '.join(names)}), {cw.backend()} backend")
    print(f"CUDA_DEVICE_MAX_CONNECTIONS={os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS', '(unset)')}, "
          f"NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE', '(unset)')}")
    if not on_gpu:
        warnings.simplefilter("ignore", cw.SimulatorTimingWarning)  # said here once
        print(f"simulator: a smoke test of this script, with {nbytes >> 20} MB instead of 256 MB; every figure is a "
              "host time, not to be quoted")
    no_torch = torch_usable(world) if on_gpu else "skipped: the simulator (PyTorch needs the GPUs)"
    if no_torch:
        print(f"PyTorch: {no_torch}")

    peer = Row("peer_copy_256mb_gbps", "GB/s", True, ("raw", "torch"), target=0.95)
    through_host = Row("through_host_256mb_gbps", "GB/s", True, ("raw", "torch"))
    record_wait = Row("cross_device_record_wait_us", "µs", False, ("raw", "torch"))
    rows = [peer, through_host, record_wait]
    results: dict = {"devices": names, "backend": cw.backend(), "bytes": nbytes}
    if on_gpu:
        results["machine"] = gpu_machine_info(cw)  # the first GPU's, the versions and the date, as run.py records them
    if world >= 2:
        if on_gpu:
            raw, note = raw_peers(names[0], reps, n, args.timeout)
            print(f"raw CUDA helper: {note}")
            results["raw"] = raw
            if raw is not None:
                for row in rows:
                    if row.key in raw:
                        row.values["raw"] = raw[row.key]
            elif note.startswith("skipped"):
                skip(rows, "raw", note)
            else:
                for row in rows:
                    failed(row, "raw", note[len("error: "):])
        else:
            skip(rows, "raw", "skipped: the simulator (raw CUDA needs the GPUs)")
        try:
            figures, errors, route = cuweave_peers(nbytes, reps, n)
            for row, value, error in zip(rows, figures, errors):
                if error is not None:
                    failed(row, "cuweave", error)
                else:
                    row.values["cuweave"] = value
            peer.detail = f"cw.copy_async's route: {route}"
            results["route"] = route
        except Exception as error:  # noqa: BLE001  (the set-up failed: every row of cuweave's)
            for row in rows:
                failed(row, "cuweave", error)
        if no_torch:
            skip(rows, "torch", no_torch)
        else:
            measure(rows, "torch", lambda: torch_peers(nbytes, reps, n))
    else:
        for column in COLUMNS:
            skip(rows, column, "skipped: one device")
        print("peer rows: skipped (one device)")

    ours_lib = "cuweave" if on_gpu else "cuweave-one-process"
    for connections in (None, "1"):
        extra = {} if connections is None else {"CUDA_DEVICE_MAX_CONNECTIONS": connections}
        label = "" if connections is None else ", CUDA_DEVICE_MAX_CONNECTIONS=1"
        busbw = Row(f"all_reduce_256mb_busbw_gbps{label}", "GB/s", True, ("torch",), target=0.95)
        overlap = Row(f"overlap_efficiency{label}", "ratio", True, ("torch",))
        pair = [busbw, overlap]
        rows += pair
        per_lib: dict = {}
        for lib, column in ((ours_lib, "cuweave"), ("torch", "torch")):
            if column == "torch" and no_torch:
                skip(pair, column, no_torch)
                continue
            try:
                figures = summarize(run_lib_ranks(lib, world, reps, nbytes, extra, args.timeout), world, nbytes)
            except Exception as error:  # noqa: BLE001
                for row in pair:
                    failed(row, column, error)
                continue
            per_lib[column] = figures
            if world == 1:  # the ranks' workers ran (a smoke test of this script), but one rank moves no data
                skip(pair, column, "one rank: nothing to move, no bandwidth or overlap to report")
                continue
            busbw.values[column] = figures["busbw_gbps"]
            overlap.values[column] = figures["overlap_efficiency"]
            if column == "cuweave":
                overlap.detail = (f"cuweave: compute {figures['compute_ms']:.2f} ms, all-reduce "
                                  f"{figures['all_reduce_ms']:.2f} ms, both {figures['both_ms']:.2f} ms")
        results[f"all_reduce{label}"] = per_lib

    print_table(rows)
    results["rows"] = {row.key: {"values": row.values, "notes": row.notes, "ratio": row.ratio(),
                                 "target": row.target, "meets_target": row.meets()} for row in rows}
    results["failures"] = failures
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    if failures:
        print(f"\n{len(failures)} measurement(s) failed:")
        for failure in failures:
            print(f"  {failure[:400]}")
        sys.exit(1)


if __name__ == "__main__":
    main()
