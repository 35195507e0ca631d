"""What does the launch watch cost cuweave's own launches inside a weave? Once CuPy has compiled a kernel cuweave can
read, each weave watches launches through CUPTI (to place CuPy's), and every launch in the block, cuweave's own
included, enters the watch's callback. Host µs per operation of a built-in op chained in place and of a compiled
kernel (2 arrays, 2 scalars) chained in place: plainly, inside a weave before any such CuPy kernel exists, and
inside a weave after one was compiled (the watch on), each the median of 7 rounds of 2,000 calls, rounds of the
three modes taken in turn (the watched ones can only come after: a compiled CuPy kernel stays). Runs with whichever
cuweave Python imports: run it once per build (PYTHONPATH=DIR for one installed with pip install --target DIR).

    python3 tools/probes/own_launches_in_watched_weave.py

Found (one H200, at 2eece14, where cuweave's own launches already skip the watch's verdict; no earlier build run
beside it): built-in chain plain 5.312 µs, woven +0.283, woven with the watch on +0.551; compiled chain plain 5.940,
woven +0.412, with the watch on +0.973. The watch's two CUPTI callbacks still cost each own launch in a weave 0.27 µs
(built-in) and 0.56 µs (compiled). With cuweave's launches through the one launch call the watch leaves off (Note
[cuweave's launches beside the launch watch]; one H200): built-in chain plain 5.789 µs, woven -0.002, with the watch
on -0.038; compiled chain plain 6.396, woven +0.320, with the watch on +0.190.
"""

import contextlib
import statistics
import sys
import time
from pathlib import Path

import cupy
import numpy as np

import cuweave as cw
from cuweave import _cupy_hooks

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from weave import AXPBY_SOURCE  # noqa: E402  (the weave benchmark's compiled kernel)

CALLS, ROUNDS = 2_000, 7


def per_call_us(issue, woven: bool) -> float:
    with cw.weave(streams=4) if woven else contextlib.nullcontext():
        began = time.perf_counter()
        for _ in range(CALLS):
            issue()
        elapsed = time.perf_counter() - began
    cw.synchronize()
    return elapsed / CALLS * 1e6


def main() -> None:
    arrays = [cw.zeros(256, np.float32) for _ in range(2)]
    axpby = cw.compile(AXPBY_SOURCE, "axpby")
    args = (arrays[0], arrays[1], np.float32(1.0), np.float32(0.5))
    rows = {
        "built-in chain": lambda: cw.ops.add(arrays[0], 1.0, out=arrays[0]),
        "compiled chain": lambda: axpby(1, 256, args),
    }
    cw.synchronize()
    samples = {(row, mode): [] for row in rows for mode in ("plain", "woven", "woven, watched")}
    for _ in range(ROUNDS):
        for row, issue in rows.items():
            samples[row, "plain"].append(per_call_us(issue, woven=False))
            samples[row, "woven"].append(per_call_us(issue, woven=True))
    with cupy.cuda.Stream(non_blocking=True):
        kernel = cupy.ElementwiseKernel("float32 x", "float32 y", "y = x + 1.0f", "cuweave_probe_add")
        y = cupy.zeros(256, dtype=np.float32)
        kernel(y, y)  # compiled, and read by cuweave: weaves from now on watch launches
        cupy.cuda.get_current_stream().synchronize()
        assert _cupy_hooks._readable_compiled, "CuPy's kernel was not read: weaves would not watch launches"
        for _ in range(ROUNDS):
            for row, issue in rows.items():
                samples[row, "woven, watched"].append(per_call_us(issue, woven=True))
    print(f"cuweave {cw.__version__} from {Path(cw.__file__).parent}")
    for row in rows:
        plain = statistics.median(samples[row, "plain"])
        woven = statistics.median(samples[row, "woven"])
        watched = statistics.median(samples[row, "woven, watched"])
        print(f"{row}: plain {plain:.3f} µs, woven {woven:.3f} (+{woven - plain:.3f}), "
              f"woven with the watch on {watched:.3f} (+{watched - plain:.3f})")


if __name__ == "__main__":
    main()
