"""Does choosing the copy threads as transfers run (Note [Copy threads chosen as transfers run]) stage NumPy ->
device faster than a fixed count, and do the tuner's per-segment rates agree with whole-transfer rates?

Each configuration runs in a fresh process (CUWEAVE_COPY_THREADS is read once; unset, the staged copies choose),
the configurations in turn, twice. A process copies one 256 MB NumPy array into a device array TRANSFERS times
and prints the median GB/s of the second half (after the tuner has settled) and what the tuner measured.

    python3 tools/probes/copy_thread_tuning_probe.py
"""
import json
import os
import statistics
import subprocess
import sys

TRANSFERS, NBYTES, ROUNDS = 24, 256 << 20, 2
CONFIGURATIONS = ["tuned", "16", "12", "8"]

MEASURE = r"""
import json, statistics, time
import numpy as np
import cuweave as cw
host = np.random.default_rng(0).integers(0, 255, size=NBYTES, dtype=np.uint8)
s = cw.Stream()
device = cw.empty(host.shape, host.dtype, stream=s)
rates = []
for _ in range(TRANSFERS):
    t = time.perf_counter()
    cw.copy_async(device, host, stream=s)
    s.synchronize()
    rates.append(NBYTES / 1e9 / (time.perf_counter() - t))
assert np.array_equal(device.to_numpy(stream=s), host)
stats = cw.staging_stats()
print(json.dumps({"rates": rates, "tuning": stats["to_device"], "pool": stats["copy_threads"]}))
""".replace("NBYTES", str(NBYTES)).replace("TRANSFERS", str(TRANSFERS))


def main() -> int:
    for round_index in range(ROUNDS):
        for config in CONFIGURATIONS:
            env = dict(os.environ)
            env.pop("CUWEAVE_COPY_THREADS", None)
            if config != "tuned":
                env["CUWEAVE_COPY_THREADS"] = config
            run = subprocess.run([sys.executable, "-c", MEASURE], env=env, capture_output=True, text=True,
                                 check=False)
            if run.returncode != 0:
                print(f"round {round_index + 1} {config}: failed: {run.stderr.strip()[-400:]}")
                continue
            out = json.loads(run.stdout)
            later = out["rates"][TRANSFERS // 2:]
            tuning = out["tuning"]
            segments = ", ".join(f"{c['threads']}: {c['gb_per_s']:.1f} ({c['samples']})" for c in tuning["candidates"])
            print(f"round {round_index + 1} {config:>5}: {statistics.median(later):.1f} GB/s (median of the last "
                  f"{len(later)}; first {out['rates'][0]:.1f}); uses {tuning['threads']} of {out['pool']}; "
                  f"segment GB/s (samples): {segments}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
