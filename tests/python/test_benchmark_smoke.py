"""The benchmarks run end to end on the simulator (smoke tests of the scripts: their figures are host times; raw
CUDA and PyTorch are skipped there, as they say), and every script's imports of the row modules hold."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

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
    assert set(figures) == {"op_chain", "op_four_chains", "op_new_arrays", "block_us", "wide_dag_ms",
                            "critical_path_ms", "dag_replay_us"}
    assert set(figures["block_us"]) == {"empty_weave", "fork_join"}
    assert set(figures["wide_dag_ms"]) == {"woven", "by_hand", "one_stream"}
    assert set(figures["critical_path_ms"]) == {"woven", "woven_chain_given", "woven_graph", "critical_path_first",
                                                "one_stream"}
    assert all(value > 0 for row in figures.values() for key, value in row.items() if not key.endswith("_over_plain"))
    # Costs over plain are differences (of repetitions in turn), which the simulator's noise may make negative.
    assert {key for key in figures["op_chain"] if key.endswith("_over_plain")} == {
        "woven_over_plain", "sanitized_over_plain", "sanitizer_core_over_plain"}


def run_quick(tmp_path, script: str, devices: str | None = None) -> tuple[dict, str]:
    """`script --quick --json` on the simulator (on `devices` simulated devices when given), unseeded: it times
    its ways. Returns its JSON and what it printed."""
    env = dict(os.environ, CUWEAVE_BACKEND="sim")
    if devices:
        env["CUWEAVE_SIM_DEVICES"] = devices
    env.pop("CUWEAVE_SIM_SEED", None)
    command = [sys.executable, str(BENCHMARKS / script), "--quick", "--json", str(tmp_path / "out.json")]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return json.loads((tmp_path / "out.json").read_text()), run.stdout


def test_the_sm_partition_benchmark_runs_on_two_simulated_devices(tmp_path):
    figures, printed = run_quick(tmp_path, "sm_partitions.py", devices="2")
    assert set(figures["job_latency_us"]) == {"normal priority", "high priority", "graph, replayed",
                                              "graph, node priorities", "reserved partition"}
    # the simulator's ranks cannot span processes: the one-process-per-rank row runs on GPUs only
    assert set(figures["all_reduce_overlap_efficiency"]) == {"one process"}
    assert set(figures["all_reduce_overlap_efficiency"]["one process"]) == {"shared", "partitioned"}
    assert all(value > 0 for value in figures["job_latency_us"].values())
    assert "no SMs to reserve" in printed


def test_the_batched_copy_benchmark_runs_on_the_simulator(tmp_path):
    figures = run_quick(tmp_path, "batched_copies.py")[0]["figures"]
    assert len(figures) == 8 and {"64 x 64 KB, pinned, batched", "8 x 8 MB, pageable, one call each"} <= set(figures)
    assert all(row["host_us"] > 0 and row["gbps"] > 0 for row in figures.values())


def test_the_two_device_weave_benchmark_runs_on_two_simulated_devices(tmp_path):
    figures = run_quick(tmp_path, "weave_devices.py", devices="2")[0]["wall_ms"]
    assert set(figures) == {"woven", "woven, read across", "by hand", "one after the other"}
    assert all(ms > 0 for ms in figures.values())


def test_the_woven_step_benchmark_checks_and_times_every_side_on_the_simulator(tmp_path):
    figures, printed = run_quick(tmp_path, "woven_step.py")
    assert set(figures["per_step"]) == {"woven (cw.woven), replayed", "woven, arrays alternating",
                                        "woven, NumPy inputs", "captured by hand once, replayed",
                                        "eager weave (cw.weave)", "plain, one stream"}
    assert all(side["wall_us"] >= side["host_us"] > 0 for side in figures["per_step"].values())
    assert figures["ratios"]["woven_over_captured_by_hand"] > 0
    assert "PyTorch (torch): skipped" in printed


# benchmarks/run.py on the simulator: load_cuweave() refuses a backend other than CUDA, so the script is driven
# from here with cuweave's simulator module put in its place; the raw CUDA helper is turned off (built without a
# GPU, its in-process library would end the process), and so are the peers (on a GPU machine they would time
# PyTorch and CuPy on the GPU, and under compute-sanitizer instrument their kernels, beside a simulated cuweave).
RUN_ON_THE_SIMULATOR = """
import sys
sys.path.insert(0, sys.argv.pop(1))
import cuweave, libraries, raw_cuda, run
run.load_cuweave = lambda: libraries.set_loaded("cw", cuweave)
run.build_raw_helper = raw_cuda.build_raw_helper = lambda *args, **kwargs: (None, "off in the smoke test")
run.load_peers = lambda versions: {peer: "off in the smoke test" for peer in ("torch", "cupy")}
sys.exit(run.main())
"""
LISTING_THE_ROWS = """
import json, sys
sys.path.insert(0, sys.argv[1])
import run
modules = [run.streams, run.pinned, run.copies, run.numpy_copies, run.duplex, run.pipeline, run.launches, run.graphs,
           run.loops, run.graph_functions]
print(json.dumps({"rows": list(run.ROWS), "by_module": [list(module.ROWS) for module in modules]}))
"""
# Rows that run on the simulator in a few seconds, one or more of each module but the 256 MB copies and the pipeline
# (record_wait and tiny_kernel_launch end in a cuweave error there: raw CUDA and NVRTC need a GPU).
FAST_ROWS = ("record_wait", "with_stream", "pinned_block", "pinned_array", "tiny_kernel_launch", "tiny_builtin_launch",
             "graph_function")


def test_the_benchmark_rows_come_from_their_modules_once_each_in_order():
    run = subprocess.run([sys.executable, "-c", LISTING_THE_ROWS, str(BENCHMARKS)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    listed = json.loads(run.stdout)
    joined = [name for module_rows in listed["by_module"] for name in module_rows]
    assert listed["rows"] == joined
    assert len(set(joined)) == len(joined) == 33


def test_the_benchmark_runner_prints_and_writes_the_chosen_rows_on_the_simulator(tmp_path):
    env = dict(os.environ, CUWEAVE_BACKEND="sim")
    out = tmp_path / "out.json"
    command = [sys.executable, "-c", RUN_ON_THE_SIMULATOR, str(BENCHMARKS), "--quick", "--rows", ",".join(FAST_ROWS),
               "--json", str(out)]
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    said = f"exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    table = [line.split("|")[1].strip() for line in run.stdout.splitlines() if line.startswith("| ")]
    assert table == ["row", *FAST_ROWS], said
    figures = json.loads(out.read_text())
    assert list(figures["rows"]) == list(FAST_ROWS)
    assert set(figures) == {"machine", "settings", "raw_cuda", "staging", "skipped", "rows"}
    failed = {name for name, row in figures["rows"].items() if "cuweave" in row["errors"]}
    assert failed <= {"record_wait", "tiny_kernel_launch"}, figures["rows"]
    assert run.returncode == (1 if failed else 0), said
    assert all(figures["rows"][name]["values"]["cuweave"] > 0 for name in FAST_ROWS if name not in failed)


@pytest.mark.parametrize("script", ["run.py", "multi_gpu.py", "tracing.py", "sanitizer.py", "weave.py", "woven_step.py",
                                    "torch_tools.py", "tune_staging.py"])
def test_every_benchmark_script_imports_what_it_uses(script):
    run = subprocess.run([sys.executable, str(BENCHMARKS / script), "--help"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert "usage:" in run.stdout


def test_a_cost_over_plain_is_the_median_of_the_differences_of_repetitions_in_turn(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import weave

    # The machine slows down over the row: the medians differ by 4.0 (5.0 against 1.0), each repetition by 0.5.
    samples = {"plain": [1.0, 0.5, 5.0, 9.0, 9.5], "sanitized": [1.5, 1.0, 5.5, 9.5, 10.0],
               "woven": [1.2, 0.7, 5.2, 9.2, 20.0], "sanitizer_core": RuntimeError("could not measure")}
    result = weave.with_costs_over_plain(samples)
    assert result["plain"] == 5.0
    assert result["sanitized"] == 5.5
    assert result["sanitized_over_plain"] == pytest.approx(0.5)
    assert result["woven_over_plain"] == pytest.approx(0.2)  # one slow repetition moves no median
    assert isinstance(result["sanitizer_core"], RuntimeError)
    assert "sanitizer_core_over_plain" not in result


def test_the_weave_benchmarks_target_table_takes_each_rounds_difference_and_marks_each_target(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import weave

    def round_of(plain, woven, sanitized, by_hand, dag_woven):
        return {"op_chain": {"plain": plain, "woven": woven, "sanitized": sanitized},
                "op_torch_add": {"plain": 6.0, "woven": None},  # a side that could not measure a mode
                "wide_dag_compiled_ms": {"by_hand": by_hand, "woven": dag_woven}}

    # Medians of the figures would give woven 4.6 - plain 4.1 = +0.5; the rounds' own differences are +0.4, +0.6
    # and +1.2, whose median is +0.6.
    rounds = {"previous": [round_of(4.0, 7.0, 5.0, 0.6, 1.2)],
              "now": [round_of(4.0, 4.4, 4.3, 0.6, 0.62), round_of(4.1, 4.7, 4.9, 0.6, 0.6),
                      round_of(5.0, 6.2, 5.4, 0.6, 0.7)]}
    weave.print_targets(rounds)
    table = {cells[0]: cells[1:] for cells in
             ([c.strip() for c in line.split("|")[1:-1]] for line in capsys.readouterr().out.splitlines()
              if line.startswith("| ") and not line.startswith("| row"))}
    assert table["op_chain woven over plain"] == ["+3.000", "+0.600", "<= 1.00", "yes"]
    assert table["op_chain sanitized over plain"] == ["+1.000", "+0.400", "<= 0.50", "yes"]
    assert table["wide_dag_compiled woven speed / by hand"] == ["0.500", "0.968", ">= 0.95", "yes"]
    assert not any(row.startswith("op_torch_add") for row in table)  # no figure, no row
    rounds["now"] = [round_of(4.0, 5.1, 4.6, 0.6, 0.7)]
    weave.print_targets(rounds)
    out = capsys.readouterr().out
    meets = {line.split("|")[1].strip(): line.split("|")[-2].strip() for line in out.splitlines()
             if line.startswith("| ") and not line.startswith("| row")}
    assert meets == {"op_chain woven over plain": "no", "op_chain sanitized over plain": "no",
                     "wide_dag_compiled woven speed / by hand": "no"}
    # A cost over plain the run paired repetition by repetition is the one taken (a round whose medians differ by
    # +0.9, while its repetitions in turn differ by +0.3 at the median).
    rounds = {"previous": [], "now": [{"op_chain": {"plain": 4.0, "sanitized": 4.9, "sanitized_over_plain": 0.3}}]}
    weave.print_targets(rounds)
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| op_chain sanitized"))
    assert [cell.strip() for cell in row.split("|")[2:-1]] == ["-", "+0.300", "<= 0.50", "yes"]
    # The weave's bound for a slow operation is 0.15x its plain time: the median plain over the rounds (8 us: 1.2),
    # not the last round's (10 us: 1.5), which +1.3 would meet.
    rounds = {"previous": [], "now": [{"op_new_arrays": {"plain": plain, "woven": plain + 1.3}}
                                      for plain in (6.0, 8.0, 10.0)]}
    weave.print_targets(rounds)
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| op_new_arrays"))
    assert [cell.strip() for cell in row.split("|")[2:-1]] == ["-", "+1.300", "<= 1.20", "no"]
