#!/usr/bin/env python3
"""Host cost of synchronizing an idle stream: cuweave's bookkeeping around the wait, beside CuPy's and PyTorch's
(cudaStreamSynchronize). (GPU only.)   python3 tools/probes/idle_synchronize_probe.py"""

import statistics
import time

import cupy
import torch

import cuweave as cw


def per_call_us(call, n=100_000):
    call()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        call()
    return (time.perf_counter_ns() - t0) / n / 1e3


s = cw.Stream(blocking=False)
cs = cupy.cuda.Stream(non_blocking=True)
ts = torch.cuda.Stream()
variants = {"cuweave Stream.synchronize": s.synchronize, "cuweave Stream.query": s.query,
            "cupy Stream.synchronize": cs.synchronize, "cupy Stream.done": lambda: cs.done,
            "torch Stream.synchronize": ts.synchronize}
runs = {name: [] for name in variants}
for _ in range(5):
    for name, call in variants.items():
        runs[name].append(per_call_us(call))
for name, values in runs.items():
    print(f"{name:32s} {statistics.median(values):.3f} us")
