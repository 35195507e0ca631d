"""The weave benchmark's wide DAG of compiled 20 µs spins, one side (woven or by hand) run 400 times with
host_sampler.c's sampling on, for a profile of where its host time goes. Found (one H200, 50 µs wall-clock
samples of the main thread, 400 runs a side, a RelWithDebInfo build): woven 15,892 samples against 15,001
by hand (+5.9%); cuLaunchKernel's the same on both sides (11,299 against 11,686); placement 7.1% of the woven
samples (Weave::place 4.5%, place_in's own work around it 2.3%), more than the whole difference. Sampling slows
each run about 2x (1.99 and 1.88 ms a run sampled): shares, not times.

    gcc -O2 -shared -fPIC -o /tmp/host_sampler.so tools/probes/host_sampler.c -ldl -lrt
    HOST_SAMPLER_OFF=1 HOST_SAMPLER_WALL=1 SAMPLER_OUT=/tmp/woven.txt \\
        timeout 90 env LD_PRELOAD=/tmp/host_sampler.so python3 tools/probes/wide_dag_sampled_probe.py woven
    python3 tools/probes/host_sampler_report.py /tmp/woven.txt

(`env LD_PRELOAD=...` after `timeout`: with LD_PRELOAD set before it, the run wrote no samples.)
"""

from __future__ import annotations

import ctypes
import statistics
import sys
from pathlib import Path

import cuweave as cw

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from weave import wide_dag_setups  # noqa: E402


def main() -> int:
    side = sys.argv[1] if len(sys.argv) > 1 else "woven"
    run = wide_dag_setups(cw, compiled=True)[side]()
    for _ in range(30):
        run()
    sampler = ctypes.CDLL(None)
    sampler.host_sampler_set(1)
    times = [run() for _ in range(400)]
    sampler.host_sampler_set(0)
    print(f"{side}: median {statistics.median(times):.3f} ms a run (sampled)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
