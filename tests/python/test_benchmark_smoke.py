"""The multi-GPU and weave benchmarks run end to end on the simulator (smoke tests of the scripts: their
figures are host times; raw CUDA and PyTorch are skipped there, as they say)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "multi_gpu.py"
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


def test_the_weave_benchmark_runs_on_the_simulator(tmp_path):
    env = dict(os.environ, CUWEAVE_BACKEND="sim")
    env.pop("CUWEAVE_SIM_SEED", None)  # spins must take time for the wide DAG's figures to mean anything
    command = [sys.executable, str(BENCHMARKS / "weave.py"), "--quick", "--json", str(tmp_path / "out.json")]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    figures = json.loads((tmp_path / "out.json").read_text())
    assert set(figures) == {"op_chain", "op_four_chains", "op_new_arrays", "wide_dag_ms", "dag_replay_us"}
    assert set(figures["wide_dag_ms"]) == {"woven", "by_hand", "one_stream"}
    assert all(value > 0 for row in figures.values() for value in row.values())
