"""Where does a tiny launch's host time go: the benchmark's built-in op (cw.ops.add on one float32), its compiled
kernel (cw.compile's increment) and raw CUDA's <<<>>> loop (benchmarks/raw_cuda.cu, in this process), each side
run with host_sampler.c's wall-clock sampling on. The built-in op costs about 0.9 µs more than the compiled
kernel (5.97 against 5.07 µs, one H200): this tells which frames hold the difference.

    gcc -O2 -shared -fPIC -o /tmp/host_sampler.so tools/probes/host_sampler.c -ldl -lrt
    for side in builtin compiled raw; do
      HOST_SAMPLER_OFF=1 HOST_SAMPLER_WALL=1 SAMPLER_OUT=/tmp/$side.txt \\
          timeout 120 env LD_PRELOAD=/tmp/host_sampler.so python3 tools/probes/launch_sampled_probe.py $side
      python3 tools/probes/host_sampler_report.py /tmp/$side.txt
    done

Build cuweave with -Ccmake.build-type=RelWithDebInfo -Cinstall.strip=false for its frames' names. Sampling slows
each launch: the samples give shares, not times (each side also prints its unsampled µs a launch first).
"""

from __future__ import annotations

import ctypes
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import cuweave as cw

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import libraries  # noqa: E402
from launches import INCREMENT  # noqa: E402
from raw_cuda import raw_in_process  # noqa: E402

LAUNCHES = 20_000  # a round
ROUNDS = 10


def side_loop(side: str):
    """One round of LAUNCHES launches of `side`, returning µs a launch (the final synchronize included)."""
    stream = cw.Stream()
    x = cw.zeros(1, np.float32, stream=stream)
    if side == "raw":
        raw = raw_in_process()
        return lambda: raw.raw_tiny_kernel_launch_us(1, LAUNCHES)
    if side == "builtin":
        add = cw.ops.add

        def launch() -> None:
            add(x, 1.0, out=x, stream=stream)
    elif side == "compiled":
        kernel = cw.compile(INCREMENT, "increment")
        args = (x,)

        def launch() -> None:
            kernel(1, 1, args, stream=stream)
    else:
        raise SystemExit(f"side: builtin, compiled or raw, not {side!r}")

    def loop() -> float:
        start = time.perf_counter_ns()
        for _ in range(LAUNCHES):
            launch()
        stream.synchronize()
        return (time.perf_counter_ns() - start) / LAUNCHES / 1e3

    return loop


def main() -> int:
    side = sys.argv[1] if len(sys.argv) > 1 else "builtin"
    libraries.set_loaded("cw", cw)
    loop = side_loop(side)
    unsampled = [loop() for _ in range(ROUNDS)]
    try:
        set_sampling = ctypes.CDLL(None).host_sampler_set
    except AttributeError:
        print(f"{side}: median {statistics.median(unsampled):.3f} us a launch (host_sampler.so not preloaded: no "
              "samples)")
        return 0
    set_sampling(1)
    sampled = [loop() for _ in range(ROUNDS)]
    set_sampling(0)
    print(f"{side}: median {statistics.median(unsampled):.3f} us a launch unsampled, "
          f"{statistics.median(sampled):.3f} sampled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
