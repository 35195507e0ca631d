"""The multi-GPU benchmark runs end to end on two simulated devices (a smoke test of the script: its
figures are host times; raw CUDA and PyTorch are skipped there, as it says)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "multi_gpu.py"
ROWS = ("peer_copy_256mb_gbps", "through_host_256mb_gbps", "cross_device_record_wait_us",
        "all_reduce_256mb_busbw_gbps", "overlap_efficiency",
        "all_reduce_256mb_busbw_gbps, CUDA_DEVICE_MAX_CONNECTIONS=1",
        "overlap_efficiency, CUDA_DEVICE_MAX_CONNECTIONS=1")


def test_the_multi_gpu_benchmark_runs_on_two_simulated_devices(tmp_path):
    env = dict(os.environ, CUWEAVE_BACKEND="sim", CUWEAVE_SIM_DEVICES="2")
    command = [sys.executable, str(SCRIPT), "--quick", "--timeout", "120", "--json", str(tmp_path / "out.json")]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    table = [line for line in run.stdout.splitlines() if line.startswith("| ")]
    for row in ROWS:
        (line,) = [line for line in table if line.split("|")[1].strip() == row]
        assert line.split("|")[3].strip() not in ("err", "n/a"), line  # cuweave's figure
    assert "skipped: the simulator" in run.stdout
