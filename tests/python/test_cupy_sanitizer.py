"""CuPy programs under cuweave's sanitizer (Note [CuPy under the sanitizer]): the scenarios of
data/cupy_stream_scenarios.py, each a fresh process under `python -m cuweave sanitize`, and a race found inside
this process's own sanitize() block."""

from __future__ import annotations

import ast
import concurrent.futures
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import cuweave as cw

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="needs CuPy"),
]

SCRIPT = pathlib.Path(__file__).parent / "data" / "cupy_stream_scenarios.py"


def _scenarios() -> tuple[list[str], set[str], dict[str, str]]:
    """The script's scenarios (functions of s, t, x), RACES and WARNS, read without importing CuPy."""
    tree = ast.parse(SCRIPT.read_text())
    names = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)
             and [a.arg for a in node.args.args] == ["s", "t", "x"]]
    constants = {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and node.targets[0].id in ("RACES", "WARNS")}
    return names, constants["RACES"], constants["WARNS"]


SCENARIOS, RACES, WARNS = _scenarios()


def _run(arguments: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CUWEAVE_SANITIZE", "CUPY_ACCELERATORS")}
    env["PYTHONWARNINGS"] = ""
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True, cwd=SCRIPT.parent,
                          timeout=600, env=env)


@pytest.fixture(scope="module")
def runs() -> dict[str, subprocess.CompletedProcess]:
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        jobs = {name: pool.submit(_run, ["-m", "cuweave", "sanitize", SCRIPT.name, name]) for name in SCENARIOS}
        return {name: job.result() for name, job in jobs.items()}


@pytest.mark.cupti
@pytest.mark.parametrize("name", SCENARIOS)
def test_cuweave_sanitize_names_the_races_of_cupy_programs_and_passes_the_ordered_ones(runs, name):
    run = runs[name]
    if name in RACES:
        assert run.returncode == 1 and "RaceError" in run.stderr, run.stderr[-3000:]
        assert "done" not in run.stdout  # the race stops the program as the launch returns
        report = run.stderr.split("RaceError")[-1]
        # both operations are CuPy's: its kernels, its copies, its pinned pool handing a block out
        assert len(re.findall(r"cupy \w+|copy \(cudaMemcpy\w*\)|cupy\.cuda\.alloc_pinned_memory", report)) >= 2, report
        assert len(re.findall(rf"{SCRIPT.name}:\d+", report)) >= 2, report  # each at its line in the program
    else:
        assert run.returncode == 0 and "done" in run.stdout, run.stderr[-3000:]
        assert "RaceError" not in run.stderr
    if name in WARNS:
        assert "the sanitizer does not check kernel" in run.stderr and WARNS[name] in run.stderr, run.stderr[-3000:]
    else:
        assert "does not check kernel" not in run.stderr, run.stderr[-3000:]


@pytest.mark.cupti
def test_a_race_between_cupy_streams_is_raised_in_the_block_after_the_racing_call_returns():
    import cupy as cp

    x = cp.zeros(1 << 20, dtype=cp.float32)
    s, t = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    x += 1  # CuPy loads each kernel at its first launch, waiting for the device: done here, before the race
    x * 2
    x -= 1
    cp.cuda.Device().synchronize()
    with cw.sanitize():
        # s is held until the racing launch is checked: CuPy's stream found idle counts as synchronized (CuPy does
        # not report each synchronize), and a spin could end first on a loaded host.
        with cw.HostLatch(cw.Stream.from_external(s.ptr)):
            with s:
                x += 1
            with pytest.raises(cw.RaceError) as raised, t:
                y = x * 2  # noqa: F841 - the launch that races
                reached_after = True  # noqa: F841 - may or may not run: the race is raised at the next instruction
    cp.cuda.Device().synchronize()
    report = str(raised.value)
    assert "cupy cupy_add" in report and "cupy cupy_multiply" in report, report
    assert report.count(pathlib.Path(__file__).name) >= 2, report
    assert raised.value.races, "the report's races travel with it"
    assert float(x[0]) == 1.0  # CuPy's kernels ran: the race is reported, not prevented


def test_cupy_events_order_cupy_streams_in_a_sanitize_block():
    import cupy as cp

    x = cp.zeros(1 << 20, dtype=cp.float32)
    s, t = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()
    with cw.sanitize():
        cw.ops.spin(0.05, stream=cw.Stream.from_external(s.ptr))
        with s:
            x += 1
        t.wait_event(s.record())
        with t:
            y = x * 2
    t.synchronize()
    assert float(y[0]) == 2.0


@pytest.mark.cupti
def test_cupys_synchronize_of_the_stream_an_array_interface_names_orders_what_it_then_reads():
    import cupy as cp

    stream = cw.Stream(name="producer")
    with cw.sanitize():
        cw.ops.spin(0.05, stream=stream)
        d = cw.to_device(np.arange(1024, dtype=np.float32), stream=stream)
        x = cp.asarray(d)  # CuPy synchronizes the stream the interface names before it hands x out
        assert cp.asnumpy(x).tolist() == list(range(1024))  # a copy on CuPy's stream: ordered, no race
