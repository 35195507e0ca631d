# Found (H200, 2026-12-01). In a process of its own, one library after the other: after a first pass of 106 ms
# (PyTorch's: 156), cuweave's passes took 24.0 to 30.3 ms and PyTorch's 23.2 to 34.2. In alternating rounds,
# cuweave's pass took 26.8 to 30.6 ms right after PyTorch's and 23.5 to 27.9 half a second later: each library's host
# copy slows the other's next pass. The benchmark's own passes, in its order, five rounds: the copies alone right
# after the serial pass took 31.8, 46.7, 54.1, 55.3, 57.9 ms, growing round by round. Cause: in the serial pass each
# batch's DMAs queue behind the previous batch's compute, so its host copies wait for slots, and the copy-thread
# tuner counted those waits as a slow host copy (Note [Copy threads chosen as transfers run]). With each chunk timed over the copy
# threads' busy time (TunedChunks), the same five rounds took 27.8, 30.1, 26.6, 28.3, 25.9 ms, the tuner staying at
# 16 threads (42-46 GB/s there; once 12), and benchmarks/run.py read 43.7 ms against PyTorch's 54.5.
# Cited by: benchmarks/pipeline.py (the pipeline's copies alone: cuweave 36.9 ms, PyTorch 22.9 ms on an H200, while
# the measuring pass of the same copies, run later in the same process, took 25.6 ms).
"""Why are the pipeline's copies alone slower in cuweave than in PyTorch (16 NumPy batches of 64 MB to the device,
one pass: 36.9 ms against 22.9), while a measuring pass of the same copies, later in the same process, takes 25.6?
Suspect: the staged path's copy-thread count, which is tuned as transfers run (found: its samples counted slot waits).
This runs the cuweave pass 12 times in a row from a fresh process, printing each pass's wall ms and the
tuner's state after it, then PyTorch's pass (pin_memory, then .to(non_blocking=True)) 6 times, then cuweave's again.

    python3 tools/probes/pipeline_copies_probe.py
"""
import gc
import time

import numpy as np

import cuweave as cw

BATCHES, BATCH_BYTES = 16, 64 << 20
batches = [np.full(BATCH_BYTES // 4, i, dtype=np.float32) for i in range(BATCHES)]
consumer = cw.Stream()


def cw_pass() -> float:
    start = time.perf_counter()
    for batch in batches:
        cw.to_device(batch, stream=consumer)
    consumer.synchronize()
    return (time.perf_counter() - start) * 1e3


def tuner() -> str:
    tuning = cw.staging_stats()["to_device"]
    rates = ", ".join(f"{c['threads']}:{c['gb_per_s']:.0f}" for c in tuning["candidates"] if c["samples"])
    return f"threads {tuning['threads']} ({'settled' if tuning['settled'] else 'trying'}; GB/s by count {rates})"


gc.disable()
for i in range(12):
    print(f"cuweave pass {i + 1}: {cw_pass():.1f} ms; {tuner()}", flush=True)
try:
    import torch

    main = torch.cuda.current_stream()

    def torch_pass() -> float:
        start = time.perf_counter()
        for batch in batches:
            torch.from_numpy(batch).pin_memory().to("cuda", non_blocking=True)
        main.synchronize()
        return (time.perf_counter() - start) * 1e3

    for i in range(6):
        print(f"torch pass {i + 1}: {torch_pass():.1f} ms", flush=True)
except ImportError:
    print("no PyTorch here")
for i in range(4):
    print(f"cuweave pass again {i + 1}: {cw_pass():.1f} ms; {tuner()}", flush=True)
# Right after PyTorch's pass, or half a second later: PyTorch's host copy runs on its thread pool, whose threads may
# still spin on the cores when cuweave's copy threads start.
try:
    for i in range(6):
        torch_ms = torch_pass()
        right_after = cw_pass()
        torch_pass()
        time.sleep(0.5)
        later = cw_pass()
        print(f"round {i + 1}: torch {torch_ms:.1f} ms; cuweave right after it {right_after:.1f} ms, "
              f"0.5 s after it {later:.1f} ms", flush=True)
except NameError:
    pass
# The benchmark's own passes (benchmarks/pipeline.py), in its order: is the copies-alone pass slower after the others?
import pathlib  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import libraries  # noqa: E402

libraries.set_loaded("cw", cw)
import pipeline  # noqa: E402

compute_s = pipeline.pipeline_compute_s(pipeline.Config(n=20000, reps=5))
passes = pipeline.cw_pipeline_passes(compute_s)
for i in range(5):
    ms = {}
    for name in ("serial", "copy_only", "compute_only", "prefetched", "copy_only_again"):
        start = time.perf_counter()
        passes[name.removesuffix("_again")]()
        ms[name] = (time.perf_counter() - start) * 1e3
    print(f"benchmark's passes, round {i + 1}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in ms.items()) +
          f"; standalone pass {cw_pass():.1f} ms; {tuner()}", flush=True)
