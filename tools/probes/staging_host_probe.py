"""Why does cuweave's staged NumPy -> device path fall behind torch's pin_memory() + copy on some hosts (H100 lease,
pipeline copy only: cuweave 60.9 ms, torch 31.6 ms for 16 batches of 64 MB; numpy_to_device 16.8 GB/s where 16
threads of NumPy copyto into pinned memory reach 25.5) and not on others (23.5 vs 21.9 ms)?

Each configuration of cuweave's copy threads (CUWEAVE_COPY_THREADS), stores (CUWEAVE_COPY_STREAMING) and staging
slot size (CUWEAVE_STAGING_CHUNK_MB) runs in a fresh process, as all are read once; inside it the variants take
turns per repetition: cw.to_device of the 16
batches, torch's pin_memory() + to("cuda") of them, torch's pin_memory() alone, NumPy copyto into one pinned block
by 16 threads, and that pinned block's H2D alone. GB/s, medians of 5.

Seen on an H100 lease (16 cores) before the staged path overlapped its chunks' host copies: cuweave 28.3 GB/s with
16 threads and 16 MB slots (29.3 with ordinary stores, 23.0 with 8 threads, 13.9 with 4, 32.0 with 64 MB slots,
13.9 with 4 MB slots); torch pin_memory + copy 21-27, torch pin_memory alone 41-47, NumPy copyto by 16 threads 23-25,
pinned H2D 47-48. After (ce8c247), in turn with the build before it, one process each, on a later H100 lease:
cuweave 44.7, 42.4, 42.8 GB/s against 39.3, 43.7, 30.5 before; torch pin_memory + copy 17.6-40.2 in the same
processes.

    python3 tools/probes/staging_host_probe.py
"""
import concurrent.futures
import os
import statistics
import subprocess
import sys
import time

BATCHES, BATCH_BYTES, REPS = 16, 64 << 20, 5
CONFIGURATIONS = [(16, "1", 16), (16, "1", 64), (8, "1", 16)]


def measure() -> None:
    import numpy as np
    import torch

    import cuweave as cw

    batches = [np.full(BATCH_BYTES // 4, i, np.float32) for i in range(BATCHES)]
    s = cw.Stream()
    pinned = cw.pinned_empty(BATCH_BYTES // 4, np.float32)
    device = cw.empty(BATCH_BYTES // 4, np.float32, stream=s)
    pool = concurrent.futures.ThreadPoolExecutor(16)
    bounds = np.linspace(0, BATCH_BYTES // 4, 17).astype(int)
    parts = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    def cw_staged():
        for batch in batches:
            cw.to_device(batch, stream=s)
        s.synchronize()

    def torch_pin_and_copy():
        for batch in batches:
            torch.from_numpy(batch).pin_memory().to("cuda", non_blocking=True)
        torch.cuda.current_stream().synchronize()

    def torch_pin_only():
        for batch in batches:
            torch.from_numpy(batch).pin_memory()

    def numpy_threads_into_pinned():
        for batch in batches:
            list(pool.map(lambda part, b=batch: np.copyto(pinned[part], b[part]), parts))

    def pinned_h2d():
        for _ in batches:
            cw.copy_async(device, pinned, stream=s)
        s.synchronize()

    variants = {"cw.to_device (staged)": cw_staged, "torch pin_memory + to(cuda)": torch_pin_and_copy,
                "torch pin_memory alone": torch_pin_only, "numpy copyto, 16 threads, pinned": numpy_threads_into_pinned,
                "pinned H2D alone": pinned_h2d}
    rates = {name: [] for name in variants}
    for rep in range(REPS + 1):
        for name, run in variants.items():
            t0 = time.perf_counter()
            run()
            seconds = time.perf_counter() - t0
            if rep:
                rates[name].append(BATCHES * BATCH_BYTES / 1e9 / seconds)
    print("  " + "; ".join(f"{name} {statistics.median(r):.1f}" for name, r in rates.items()) + "  GB/s", flush=True)


if len(sys.argv) > 1 and sys.argv[1] == "--one":
    measure()
else:
    print(f"{BATCHES} NumPy float32 batches of {BATCH_BYTES >> 20} MB; os.cpu_count() {os.cpu_count()}", flush=True)
    for threads, streaming, slot_mb in CONFIGURATIONS:
        print(f"CUWEAVE_COPY_THREADS={threads} CUWEAVE_COPY_STREAMING={streaming} CUWEAVE_STAGING_CHUNK_MB={slot_mb}",
              flush=True)
        env = dict(os.environ, CUWEAVE_COPY_THREADS=str(threads), CUWEAVE_COPY_STREAMING=streaming,
                   CUWEAVE_STAGING_CHUNK_MB=str(slot_mb))
        subprocess.run([sys.executable, __file__, "--one"], env=env, check=False, timeout=120)
