"""Does choosing the copy threads as transfers run (Note [Copy threads chosen as transfers run]) stage NumPy ->
device faster than a fixed count, and do the tuner's per-segment rates agree with whole-transfer rates?

Each configuration runs in a fresh process (CUWEAVE_COPY_THREADS is read once; unset, the staged copies choose),
the configurations in turn, twice. A process copies one 256 MB NumPy array into a device array TRANSFERS times
and prints the median GB/s of the second half (after the tuner has settled) and what the tuner measured.

    python3 tools/probes/copy_thread_tuning_probe.py [--baseline-site DIR] [--only-tuned]

--baseline-site adds the cuweave installed in DIR (pip install --target DIR), its copies choosing their threads
too, in turn with this tree's.

Seen on an H100 lease (16 cores), 2 rounds: tuned 42.3 and 42.0 GB/s, fixed 16 threads (the earlier default) 41.4
and 41.2, 12 threads 42.4 and 44.1, 8 threads 37.0 and 37.7; the tuner chose 12, then 16, whose segment medians
were 52.7/50.3 and 54.8/58.8 GB/s (segments time the host copies alone; a whole transfer adds the first chunk's
copy, the last chunk's DMA and the synchronize). In the full benchmark's process, with torch and CuPy loaded,
16 threads' segments fell to 8.9-9.2 GB/s where 12 reached 41-45, and the tuner chose 12 (numpy_to_device 40.8
and 41.3 GB/s). A quarter-slot first chunk, to start the DMA sooner, made no difference (3 rounds in turn:
40.5, 42.8, 40.2 against 41.6, 42.5, 39.6 GB/s) and was not kept.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

TRANSFERS, NBYTES, ROUNDS = 24, 256 << 20, 3
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-site", help="a directory with another cuweave build, run in turn with this one")
    parser.add_argument("--only-tuned", action="store_true", help="no fixed thread counts")
    args = parser.parse_args()
    configurations = ["tuned"] if args.only_tuned else list(CONFIGURATIONS)
    if args.baseline_site:
        configurations.append("baseline")
    for round_index in range(ROUNDS):
        for config in configurations:
            env = dict(os.environ)
            env.pop("CUWEAVE_COPY_THREADS", None)
            if config == "baseline":
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.baseline_site, env.get("PYTHONPATH")]))
            elif config != "tuned":
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
            print(f"round {round_index + 1} {config:>8}: {statistics.median(later):.1f} GB/s (median of the last "
                  f"{len(later)}; first {out['rates'][0]:.1f}); uses {tuning['threads']} of {out['pool']}; "
                  f"segment GB/s (samples): {segments}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
