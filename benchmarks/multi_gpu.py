"""Several GPUs: peer copies, cross-device events, NCCL all-reduce and its overlap with compute, beside raw
CUDA (benchmarks/raw_multi_gpu.cu) and PyTorch, in one run.

    python benchmarks/multi_gpu.py [--quick] [--json PATH]

Rows (each with its ratio to the reference):
  peer_copy_256mb_gbps         cw.copy_async between devices 0 and 1 vs cudaMemcpyPeerAsync and torch copy_
  cross_device_record_wait_us  record on a stream of device 0, wait on a stream of device 1 (host µs per pair)
  all_reduce_256mb_busbw_gbps  NCCL all-reduce of 256 MB float32, one process per GPU: cuweave.collectives vs
                               torch.distributed (bus bandwidth = algorithm bandwidth x 2(n-1)/n, as nccl-tests)
  overlap_efficiency           an all-reduce on its own stream beside compute (axpy passes) on another:
                               (t_compute + t_allreduce - t_both) / min(t_compute, t_allreduce); 1 = fully
                               hidden, 0 = serialized; again with CUDA_DEVICE_MAX_CONNECTIONS=1
With one GPU the peer rows are skipped and the all-reduce workers run with one rank, which moves no data: a
smoke test of the script, with no figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ALL_REDUCE_BYTES = 256 << 20


def median(values: list[float]) -> float:
    return float(np.median(values))


def _events_ms(stream, run) -> float:
    import cuweave as cw

    start, end = cw.Event(timing=True), cw.Event(timing=True)
    start.record(stream)
    run()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end)


def peer_rows(reps: int, n: int) -> dict:
    import cuweave as cw

    s0, s1 = cw.Stream(device=0), cw.Stream(device=1)
    src = cw.zeros(ALL_REDUCE_BYTES, np.uint8, stream=s0)
    dst = cw.empty(ALL_REDUCE_BYTES, np.uint8, stream=s1)
    s0.synchronize()
    s1.synchronize()
    route = cw.copy_async(dst, src, stream=s0).route  # warm-up; enables peer access
    s0.synchronize()
    gbps = [ALL_REDUCE_BYTES / (_events_ms(s0, lambda: cw.copy_async(dst, src, stream=s0)) * 1e-3) / 1e9
            for _ in range(reps)]
    per_pair = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            s1.wait(s0.record())
        per_pair.append((time.perf_counter() - t0) / n * 1e6)
        s1.synchronize()
    result = {"cuweave": {"peer_copy_256mb_gbps": median(gbps), "cross_device_record_wait_us": median(per_pair),
                          "route": route}}
    try:
        import torch
    except ImportError:
        return result
    a = torch.empty(ALL_REDUCE_BYTES, dtype=torch.uint8, device="cuda:0")
    b = torch.empty(ALL_REDUCE_BYTES, dtype=torch.uint8, device="cuda:1")
    t0s, t1s = torch.cuda.Stream(device=0), torch.cuda.Stream(device=1)
    b.copy_(a)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    gbps = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(t0s):
            start.record(t0s)
            b.copy_(a, non_blocking=True)
            end.record(t0s)
        end.synchronize()
        gbps.append(ALL_REDUCE_BYTES / (start.elapsed_time(end) * 1e-3) / 1e9)
    per_pair = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            ev = torch.cuda.Event()
            ev.record(t0s)
            t1s.wait_event(ev)
        per_pair.append((time.perf_counter() - t0) / n * 1e6)
        t1s.synchronize()
    result["torch"] = {"peer_copy_256mb_gbps": median(gbps), "cross_device_record_wait_us": median(per_pair)}
    return result


# ---- one rank of an all-reduce run, in its own process -------------------------------------------------------

def worker(lib: str, rank: int, world: int, rendezvous: Path, reps: int, out: Path) -> None:
    """Times `reps` all-reduces of 256 MB float32 alone, an axpy compute phase alone, and both at once on two
    streams; rank 0 writes the figures (ms, medians) to `out`."""
    count = ALL_REDUCE_BYTES // 4
    if lib == "cuweave":
        import cuweave as cw

        with cw.Device(rank):
            if rank == 0:
                tmp = rendezvous.with_suffix(".tmp")
                tmp.write_bytes(cw.collectives.unique_id())
                tmp.rename(rendezvous)
            while not rendezvous.exists():
                time.sleep(0.01)
            comm = cw.collectives.Communicator(rendezvous.read_bytes(), ranks=world, rank=rank, device=rank)
            comm_stream, compute_stream = cw.Stream(name="comm"), cw.Stream(name="compute")
            grads = cw.zeros(count, np.float32, stream=comm_stream)
            x = cw.zeros(count, np.float32, stream=compute_stream)
            y = cw.zeros(count, np.float32, stream=compute_stream)

            def all_reduce():
                comm.all_reduce(grads, stream=comm_stream)

            def compute():
                for _ in range(8):
                    cw.ops.axpy(1.0, x, y, stream=compute_stream)

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

    def timed(run) -> float:  # both libraries' streams have synchronize()
        comm_stream.synchronize()
        compute_stream.synchronize()
        t0 = time.perf_counter()
        run()
        comm_stream.synchronize()
        compute_stream.synchronize()
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


def run_ranks(lib: str, world: int, reps: int, extra_env: dict[str, str]) -> dict | str:
    """All ranks of one all-reduce run as child processes; rank 0's figures, or why there are none."""
    with tempfile.TemporaryDirectory() as folder:
        rendezvous, out = Path(folder) / "rendezvous", Path(folder) / "out.json"
        env = dict(os.environ, **extra_env)
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", lib, "--rank", str(r), "--world", str(world),
                                   "--rendezvous", str(rendezvous), "--reps", str(reps), "--out", str(out)],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in range(world)]
        errors = []
        for p in procs:
            _, err = p.communicate(timeout=600)
            if p.returncode != 0:
                errors.append(err.strip()[-800:])
        if errors:
            return f"{lib} ranks failed: {errors[0]}"
        return json.loads(out.read_text())


def summarize(figures: dict, world: int) -> dict:
    algbw = ALL_REDUCE_BYTES / (figures["all_reduce_ms"] * 1e-3) / 1e9
    shorter = min(figures["all_reduce_ms"], figures["compute_ms"])
    hidden = figures["all_reduce_ms"] + figures["compute_ms"] - figures["both_ms"]
    return dict(figures, algbw_gbps=algbw, busbw_gbps=algbw * 2 * (world - 1) / world,
                overlap_efficiency=hidden / shorter)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--worker", choices=["cuweave", "torch"], help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--world", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rendezvous", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--reps", type=int, default=10, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.rank, args.world, args.rendezvous, args.reps, args.out)
        return

    sys.path.insert(0, str(HERE))
    import run as single_gpu  # the raw helper's build and the table's formatting

    import cuweave as cw

    if cw.backend() != "cuda":
        raise SystemExit("multi_gpu.py measures GPUs; the active backend is " + cw.backend())
    world = cw.device_count()
    reps, n = (3, 2000) if args.quick else (10, 20000)
    names = [cw.Device(d).properties.name for d in range(world)]
    print(f"devices: {world} ({', '.join(names)})")
    print(f"CUDA_DEVICE_MAX_CONNECTIONS={os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS', '(unset)')}, "
          f"NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE', '(unset)')}")
    results: dict = {"devices": names}
    lines = []
    if world >= 2:
        exe, note = single_gpu.build_raw_helper(names[0], HERE / "raw_multi_gpu.cu")
        raw = None
        if exe is not None:
            proc = subprocess.run([str(exe), "--reps", str(reps), "--n", str(n)], capture_output=True, text=True,
                                  timeout=600)
            raw = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
            note = "ok" if raw else f"raw_multi_gpu exited {proc.returncode}: {proc.stderr[-300:]}"
        print(f"raw CUDA helper: {note}")
        peers = peer_rows(reps, n)
        results.update(raw=raw, peers=peers)
        for key, unit, better in (("peer_copy_256mb_gbps", "GB/s", "higher"),
                                  ("cross_device_record_wait_us", "µs", "lower")):
            ours = peers["cuweave"][key]
            reference = raw[key] if raw else None
            torch_value = peers.get("torch", {}).get(key)
            ratio = f"{ours / reference:.2f}" if reference else "-"
            lines.append(f"| {key} ({unit}, {better} is better) | {ours:.3f} | "
                         f"{reference if reference is not None else '-'} | {torch_value or '-'} | {ratio} |")
        print(f"peer route: {peers['cuweave']['route']}")
    else:
        print("peer rows: skipped (one device)")
    for connections in (None, "1"):
        extra = {} if connections is None else {"CUDA_DEVICE_MAX_CONNECTIONS": connections}
        label = "" if connections is None else ", CUDA_DEVICE_MAX_CONNECTIONS=1"
        per_lib = {}
        for lib in ("cuweave", "torch"):
            figures = run_ranks(lib, world, reps, extra)
            per_lib[lib] = summarize(figures, world) if isinstance(figures, dict) else figures
            if isinstance(figures, str):
                print(figures)
        results[f"all_reduce{label}"] = per_lib
        ours, theirs = per_lib["cuweave"], per_lib["torch"]
        if world == 1:  # the ranks' workers ran (a smoke test of this script), but one rank moves no data
            print(f"all-reduce{label}: one rank, nothing to move; no bandwidth or overlap to report")
            continue
        if isinstance(ours, dict):
            bw_key = "busbw_gbps"
            theirs_bw = theirs.get(bw_key) if isinstance(theirs, dict) else None
            ratio = f"{ours[bw_key] / theirs_bw:.2f}" if theirs_bw else "-"
            lines.append(f"| all_reduce_256mb_{bw_key}{label} | {ours[bw_key]:.1f} | - | "
                         f"{f'{theirs_bw:.1f}' if theirs_bw else '-'} | {ratio} |")
            theirs_eff = theirs.get("overlap_efficiency") if isinstance(theirs, dict) else None
            lines.append(f"| overlap_efficiency{label} (compute {ours['compute_ms']:.2f} ms, all-reduce "
                         f"{ours['all_reduce_ms']:.2f} ms, both {ours['both_ms']:.2f} ms) | "
                         f"{ours['overlap_efficiency']:.2f} | - | "
                         f"{f'{theirs_eff:.2f}' if theirs_eff is not None else '-'} | - |")
    print("\n| row | cuweave | raw CUDA | PyTorch | ratio (cuweave / raw, else / PyTorch) |")
    print("|---|--:|--:|--:|--:|")
    for line in lines:
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
