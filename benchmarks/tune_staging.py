"""Measures NumPy<->device copy speed of the staged path under several staging settings, each in a
fresh process (the settings are read at start-up). For choosing defaults on a new kind of machine.

    python benchmarks/tune_staging.py [--threads 4,8,12,16] [--chunk-mb 4,8,16] [--streaming 1,0]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys

MEASURE = r"""
import json, statistics, time
import numpy as np
import cuweave as cw
nbytes = 256 << 20
host = np.random.default_rng(0).standard_normal(nbytes // 8)
s = cw.Stream()
device = cw.empty(host.shape, host.dtype, stream=s)
def h2d():
    t = time.perf_counter()
    cw.copy_async(device, host, stream=s)
    s.synchronize()
    return time.perf_counter() - t
def d2h():
    t = time.perf_counter()
    out = device.to_numpy(stream=s, pinned=False)
    elapsed = time.perf_counter() - t
    del out
    return elapsed
for f in (h2d, d2h):
    f()
result = {name: nbytes / 1e9 / statistics.median(f() for _ in range(7)) for name, f in (("h2d", h2d), ("d2h", d2h))}
assert np.array_equal(device.to_numpy(stream=s), host)
print(json.dumps(result))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="4,8,12,16")
    parser.add_argument("--chunk-mb", default="4,8,16")
    parser.add_argument("--streaming", default="1,0")
    args = parser.parse_args()
    grid = itertools.product(args.threads.split(","), args.chunk_mb.split(","), args.streaming.split(","))
    print("| threads | chunk MB | streaming stores | NumPy->device GB/s | device->NumPy GB/s |")
    print("|--:|--:|--:|--:|--:|")
    for threads, chunk, streaming in grid:
        env = dict(os.environ, CUWEAVE_COPY_THREADS=threads, CUWEAVE_STAGING_CHUNK_MB=chunk,
                   CUWEAVE_COPY_STREAMING=streaming)
        run = subprocess.run([sys.executable, "-c", MEASURE], env=env, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            print(f"| {threads} | {chunk} | {streaming} | failed: {run.stderr.strip().splitlines()[-1]} | |")
            continue
        figures = json.loads(run.stdout)
        print(f"| {threads} | {chunk} | {streaming} | {figures['h2d']:.1f} | {figures['d2h']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
