"""The overlap recipe of NVIDIA's "How to Overlap Data Transfers in CUDA C/C++", written with views.

One big pinned host buffer and one device buffer, split into n chunks; chunk i's host-to-device copy, kernel and
device-to-host copy go on stream i. Three ways of writing it:

  by hand    n streams, each chunk's three steps on its own stream, chunks as views of the two buffers
  weave      the same loop with no streams named, inside cw.weave(streams=n)
  prefetch   cw.prefetch over the host chunks (its copy stream ahead of the compute), results copied back

The kernel is cw.ops.scale of the chunk plus a spin, calibrated so that the kernels of the whole buffer take
about as long as its host-to-device copy; the spin fills every SM (32 one-thread blocks each, Hopper's resident
limit), so that two chunks' kernels share the GPU as compute-bound kernels would instead of running side by side. The stages' times are measured alone at n = 1 (H2D, kernel, D2H);
with n chunks the ideal is the longest stage plus the others divided by n (the others hide behind it but for
one chunk's worth), and efficiency = ideal / measured. Each figure is the median wall time of `--reps` runs
after a warm-up, the final synchronize included. A check compares the result with NumPy's after each variant.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Callable

import numpy as np

import cuweave as cw

CHUNKS = (1, 2, 4, 8)


def wall_ms(run: Callable[[], None], reps: int) -> float:
    run()  # warm-up: allocations, module loads
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


class Recipe:
    def __init__(self, megabytes: int) -> None:
        self.count = megabytes * 2**20 // 4
        self.host_in = cw.pinned_empty(self.count, np.float32)
        self.host_in[:] = np.arange(self.count, dtype=np.float32) % 1000
        self.host_out = cw.pinned_zeros(self.count, np.float32)
        self.device = cw.empty(self.count, np.float32)
        self.spin_s = 0.0
        self.spin_blocks = cw.current_device().properties.multiprocessor_count * 32
        self.expected = self.host_in * 2.0

    def parts(self, n: int) -> list[slice]:
        size = self.count // n
        return [slice(i * size, self.count if i == n - 1 else (i + 1) * size) for i in range(n)]

    def kernel(self, chunk: cw.DeviceArray, share: float, stream: cw.Stream | None = None) -> None:
        cw.ops.scale(chunk, 2.0, out=chunk, stream=stream)
        if self.spin_s:
            cw.ops.spin(self.spin_s * share, stream=stream, blocks=self.spin_blocks)

    # ---- the stages alone, on one stream
    def h2d(self, s: cw.Stream) -> None:
        cw.copy_async(self.device, self.host_in, stream=s)
        s.synchronize()

    def compute(self, s: cw.Stream) -> None:
        self.kernel(self.device, 1.0, s)
        s.synchronize()

    def d2h(self, s: cw.Stream) -> None:
        cw.copy_async(self.host_out, self.device, stream=s)
        s.synchronize()

    # ---- the recipe, three ways
    def by_hand(self, n: int, streams: list[cw.Stream]) -> None:
        for part, s in zip(self.parts(n), streams, strict=False):
            cw.copy_async(self.device[part], self.host_in[part], stream=s)
            self.kernel(self.device[part], 1 / n, s)
            cw.copy_async(self.host_out[part], self.device[part], stream=s)
        for s in streams[:n]:
            s.synchronize()

    def woven(self, n: int) -> None:
        with cw.weave(streams=n):
            for part in self.parts(n):
                cw.copy_async(self.device[part], self.host_in[part])
                self.kernel(self.device[part], 1 / n)
                cw.copy_async(self.host_out[part], self.device[part])
        cw.current_stream().synchronize()

    def prefetched(self, n: int, s: cw.Stream) -> None:
        with s:
            parts = self.parts(n)
            for part, chunk in zip(parts, cw.prefetch(self.host_in[part] for part in parts), strict=True):
                self.kernel(chunk, 1 / n)
                cw.copy_async(self.host_out[part], chunk)
        s.synchronize()

    def check(self, what: str) -> None:
        if not np.array_equal(self.host_out, self.expected):
            raise SystemExit(f"chunked_overlap: {what} computed wrong values")
        self.host_out[:] = 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=256, help="buffer size (default 256)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)

    recipe = Recipe(args.megabytes)
    s = cw.Stream()
    streams = [cw.Stream() for _ in range(max(CHUNKS))]
    h2d_ms = wall_ms(lambda: recipe.h2d(s), args.reps)
    scale_ms = wall_ms(lambda: recipe.compute(s), args.reps)
    recipe.spin_s = max(h2d_ms - scale_ms, 0.0) / 1e3  # the kernels of the whole buffer about as long as its H2D
    kernel_ms = wall_ms(lambda: recipe.compute(s), args.reps)
    d2h_ms = wall_ms(lambda: recipe.d2h(s), args.reps)
    stages = (h2d_ms, kernel_ms, d2h_ms)
    print(f"chunked overlap on {cw.backend()}: {args.megabytes} MB float32, stages alone (ms): "
          f"H2D {h2d_ms:.3f}, kernel {kernel_ms:.3f}, D2H {d2h_ms:.3f}; median of {args.reps}")
    print(f"{'n':>3} {'ideal ms':>9} | {'by hand':>16} | {'weave':>16} | {'prefetch':>16}")
    rows = []
    for n in CHUNKS:
        ideal = max(stages) + (sum(stages) - max(stages)) / n
        figures = {}
        for name, run in (("by_hand", lambda: recipe.by_hand(n, streams)), ("weave", lambda: recipe.woven(n)),
                          ("prefetch", lambda: recipe.prefetched(n, s))):
            figures[name] = wall_ms(run, args.reps)
            recipe.check(f"{name} with n={n}")
        cells = " | ".join(f"{figures[k]:8.3f} ({ideal / figures[k]:4.2f})" for k in ("by_hand", "weave", "prefetch"))
        print(f"{n:>3} {ideal:9.3f} | {cells}")
        rows.append({"n": n, "ideal_ms": ideal, **{f"{k}_ms": v for k, v in figures.items()},
                     **{f"{k}_efficiency": ideal / v for k, v in figures.items()}})
    print("cells: wall ms (efficiency = ideal / measured; 1.00 is the ideal overlap)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"stages_ms": {"h2d": h2d_ms, "kernel": kernel_ms, "d2h": d2h_ms}, "rows": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
