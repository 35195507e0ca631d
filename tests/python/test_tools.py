"""`python -m cuweave trace` and `python -m cuweave sanitize` around programs written without cuweave's
tools in mind: run as Python would run them (argv, __main__, exit code), with the timeline written however
the program ends and races named with both call sites. Every backend (CI: the simulator)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import textwrap

import numpy as np
import pytest

import cuweave as cw
from cuweave import _tools

from _support import UNDER_HOST_SANITIZER, svg_lanes

RACY = """
import sys
import time
import numpy as np
import cuweave as cw

a, b = cw.Stream(), cw.Stream()
x = cw.zeros(1024, np.float32, stream=a)
a.synchronize()
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1):
    cw.ops.fill(x, 1.0, stream=a)  # WRITE
    cw.ops.sum(x, stream=b)  # READ: nothing orders it after the fill
    cw.synchronize()
print("done")
"""

CLEAN = """
import sys
import time
import numpy as np
import cuweave as cw

print("argv", sys.argv[1:], "main", __name__)
s = cw.Stream()
x = cw.to_device(np.arange(4096, dtype=np.float32), stream=s)
y = cw.ops.add(x, 1.0, stream=s)
other = cw.Stream()
other.wait(s.record())
z = cw.ops.scale(y, 2.0, out=cw.empty(4096, np.float32, stream=other), stream=other)
assert (z.to_numpy(stream=other) == 2 * (np.arange(4096) + 1)).all()
if len(sys.argv) > 1 and sys.argv[1] == "fail":
    raise RuntimeError("the program failed")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 0)
"""


def line_of(source: str, marker: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if marker in line)


def cuweave_cli(*arguments: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cuweave", *arguments], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env=dict(os.environ, PYTHONWARNINGS=""))


@pytest.fixture
def scripts(tmp_path):
    (tmp_path / "racy.py").write_text(RACY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_sanitize_stops_at_the_first_race_naming_both_call_sites(scripts):
    run = cuweave_cli("sanitize", "racy.py", "3", cwd=scripts)
    assert run.returncode == 1
    assert "RaceError" in run.stderr
    assert f"racy.py:{line_of(RACY, '# WRITE')}" in run.stderr and f"racy.py:{line_of(RACY, '# READ')}" in run.stderr
    assert "done" not in run.stdout


def test_sanitize_warn_reports_each_pair_of_call_sites_once_and_counts_every_race(scripts):
    run = cuweave_cli("sanitize", "--warn", "racy.py", "3", cwd=scripts)
    assert run.returncode == 1  # the program ended well, but raced
    assert "done" in run.stdout
    assert run.stderr.count("cuweave sanitize: race ") == 1
    assert "3 races at 1 distinct pair of call sites" in run.stderr


def test_a_clean_program_runs_as_python_would_with_its_arguments_and_exit_code(scripts):
    run = cuweave_cli("sanitize", "clean.py", "7", cwd=scripts)
    assert run.returncode == 7, run.stderr
    assert "argv ['7'] main __main__" in run.stdout
    assert cuweave_cli("sanitize", "clean.py", cwd=scripts).returncode == 0


def test_a_module_runs_with_dash_m(scripts):
    (scripts / "mypackage").mkdir()
    (scripts / "mypackage" / "__init__.py").write_text("")
    (scripts / "mypackage" / "job.py").write_text(CLEAN)
    run = cuweave_cli("sanitize", "-m", "mypackage.job", "5", cwd=scripts)
    assert run.returncode == 5, run.stderr
    assert "argv ['5'] main __main__" in run.stdout


def test_an_uncaught_exception_is_printed_without_the_runners_frames(scripts):
    run = cuweave_cli("sanitize", "clean.py", "fail", cwd=scripts)
    assert run.returncode == 1
    frames = re.findall(r'File "([^"]+)", line (\d+)', run.stderr)
    assert frames == [("clean.py", str(line_of(CLEAN, "raise RuntimeError")))], run.stderr  # as `python clean.py`
    assert run.stderr.rstrip().endswith("RuntimeError: the program failed")


def test_a_race_is_printed_without_the_frames_between_the_users_call_and_the_check(scripts):
    # The second operation is cw.ops.fill, a function of cuweave's Python layer: its frame is left out, and said.
    (scripts / "racy_write.py").write_text(textwrap.dedent("""
        import numpy as np
        import cuweave as cw
        a, b = cw.Stream(), cw.Stream()
        x = cw.zeros(1024, np.float32, stream=a)
        a.synchronize()
        cw.ops.sum(x, stream=a)
        cw.ops.fill(x, 2.0, stream=b)  # nothing orders it after the sum
        """))
    run = cuweave_cli("sanitize", "racy_write.py", cwd=scripts)
    assert run.returncode == 1 and "RaceError" in run.stderr
    frames = [file for file, _ in re.findall(r'File "([^"]+)", line (\d+)', run.stderr)]
    assert frames == ["racy_write.py"], run.stderr
    assert "(1 frame inside cuweave, PyTorch or CuPy left out of the traceback" in run.stderr


@pytest.mark.cupti
@pytest.mark.parametrize("ending", ["exit code", "exception"])
def test_trace_writes_the_timeline_however_the_program_ends(scripts, ending):
    out = scripts / "out"
    run = cuweave_cli("trace", "--out", str(out), "clean.py", "3" if ending == "exit code" else "fail", cwd=scripts)
    assert run.returncode == (3 if ending == "exit code" else 1), run.stderr
    if ending == "exception":
        assert "RuntimeError: the program failed" in run.stderr
    events = json.loads((out / "trace.json").read_text())["traceEvents"]
    # The add on `s` and the scale on `other` (named "add" and "scale" on the simulator, by their CUDA kernels
    # on a GPU): two kernels on two streams.
    kernels = [event for event in events if event.get("ph") == "X" and event.get("cat") == "kernel"]
    assert len(kernels) == 2 and len({kernel["tid"] for kernel in kernels}) == 2, kernels
    assert "stream" in (out / "summary.txt").read_text().lower()
    assert (out / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert f"wrote {out / 'trace.json'}" in run.stderr
    lanes = svg_lanes(out / "timeline.svg")
    assert sorted(kernels for _, kernels in lanes if kernels) == [1, 1], lanes  # one kernel on each stream
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "<svg" in page and 'href="trace.json"' in page and "stream" in page.lower()


MILLION_EVENTS = """
import numpy as np
import cuweave as cw

s = cw.Stream()
x = cw.zeros(16, np.float32, stream=s)
with s, cw.capture(s) as cap:  # a graph of 1,000 kernels, replayed 1,000 times: over 1M events
    for i in range(1000):
        cw.ops.fill(x, float(i))
statm = lambda: int(open("/proc/self/statm").read().split()[1]) * 4096
before = statm()
for _ in range(1000):
    cap.graph.replay(s)
s.synchronize()
print("grew", statm() - before)
"""


@pytest.mark.cupti
@pytest.mark.parametrize("keep", ["first", "last"])
def test_trace_with_a_limit_keeps_a_million_event_program_within_memory(tmp_path, keep):
    (tmp_path / "long.py").write_text(MILLION_EVENTS)
    out = tmp_path / "out"
    run = cuweave_cli("trace", "--limit", "1000", "--keep", keep, "--out", str(out), "long.py", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    # the zeros' memset, 1,000 graph replays and their 1,000,000 kernels, less the 1,000 kept
    assert f"kept the {keep} 1000 events (--limit 1000); 1000001 more ran" in run.stderr
    events = [e for e in json.loads((out / "trace.json").read_text())["traceEvents"] if e.get("ph") == "X"]
    assert len(events) == 1000
    earliest_or_latest = "earliest" if keep == "last" else "latest"
    assert f"the 1,000,001 {earliest_or_latest} are not counted" in (out / "summary.txt").read_text()
    if sys.platform == "linux" and not UNDER_HOST_SANITIZER:
        grew = int(run.stdout.split("grew")[1])
        assert grew < 40e6, f"the process grew by {grew / 1e6:.0f} MB over 1M events"  # unlimited: about 160 MB


@pytest.mark.cupti
def test_the_limit_keeps_the_first_or_the_last_events_in_order_and_counts_the_others():
    s = cw.Stream()
    # Ten copies of 1 to 10 bytes: the bytes of a kept event say which of the ten it was (correlation ids do not
    # order the two traces: on a GPU, CUPTI may number each trace's calls afresh).
    pairs = [(cw.zeros(n, np.uint8, stream=s), cw.zeros(n, np.uint8, stream=s)) for n in range(1, 11)]
    s.synchronize()
    kept = {}
    for keep in ("first", "last"):
        with cw.trace(limit=3, keep=keep) as t:
            for destination, source in pairs:
                cw.copy_async(destination, source, stream=s)
        kept[keep] = t
        assert (len(t.events), t.dropped, t.limit, t.keep) == (3, 7, 3, keep)
        assert "7 more not kept (limit 3)" in repr(t)
        earliest_or_latest = "earliest" if keep == "last" else "latest"
        assert f"kept the {keep} events: the 7 {earliest_or_latest} are not counted" in str(t.summary())
    assert sorted(e.bytes for e in kept["first"].events) == [1, 2, 3]
    assert sorted(e.bytes for e in kept["last"].events) == [8, 9, 10]
    for t in kept.values():  # in issue order within a trace
        assert [e.bytes for e in sorted(t.events, key=lambda e: e.correlation)] == sorted(e.bytes for e in t.events)
    with cw.trace() as unlimited:
        cw.copy_async(*pairs[0], stream=s)
    assert (unlimited.limit, unlimited.dropped) == (None, 0)


@pytest.mark.parametrize("limit", [0, -5, 2.5, True])
def test_a_limit_must_be_a_positive_count(limit):
    with pytest.raises(ValueError, match="limit must be a positive number of events"):
        cw.trace(limit=limit)
    with pytest.raises(ValueError, match='keep must be "first" or "last"'):
        cw.trace(limit=10, keep="middle")


def test_the_command_refuses_a_limit_that_is_not_a_positive_count(scripts):
    run = cuweave_cli("trace", "--limit", "0", "clean.py", cwd=scripts)
    assert run.returncode == 2 and "expected a positive number of events, not '0'" in run.stderr


def test_without_a_program_the_command_shows_its_usage(scripts):
    run = cuweave_cli("trace", cwd=scripts)
    assert run.returncode == 0 and "TARGET" in run.stdout
    missing = cuweave_cli("sanitize", "no_such_script.py", cwd=scripts)
    assert missing.returncode == 2 and "no such file" in missing.stderr


@pytest.mark.cupti
def test_the_picture_of_a_long_trace_shows_its_busiest_stretch(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(_tools, "PICTURE_EVENTS", 50)
    s = cw.Stream()
    x = cw.zeros(256, np.float32, stream=s)
    with cw.trace() as t:
        for _ in range(200):
            cw.ops.add(x, 1.0, out=x, stream=s)
        s.synchronize()
    assert len(t.events) > 50
    assert _tools._picture(t, tmp_path / "timeline.png") is None
    assert (tmp_path / "timeline.png").stat().st_size > 0
    window = _tools._busiest(t.events, 50)
    assert len(window) == 50 and window == sorted(window, key=lambda e: e.start_ns)


def test_the_busiest_stretch_is_the_densest_run_of_starts():
    event = lambda start: cw.TraceEvent(kind="kernel", name="k", start_ns=start, end_ns=start + 1, device=0,  # noqa: E731
                                        stream=1, lane=None)
    events = [event(t) for t in (0, 100, 200, 300, 301, 302, 303, 900)]
    assert [e.start_ns for e in _tools._busiest(events, 4)] == [300, 301, 302, 303]


def test_the_runner_restores_argv_and_path(tmp_path):
    from cuweave import _script

    (tmp_path / "prog.py").write_text(textwrap.dedent("""
        import sys
        assert sys.argv == ["%s", "a", "b"], sys.argv
        raise SystemExit("bye")
    """ % (tmp_path / "prog.py")))
    argv, path = sys.argv[:], sys.path[:]
    assert _script.run([str(tmp_path / "prog.py"), "a", "b"], module=False) == 1  # sys.exit("text") exits 1
    assert sys.argv == argv and sys.path == path


PYTEST_TESTS = """
import numpy as np
import cuweave as cw


def test_racy():
    a, b = cw.Stream(), cw.Stream()
    x = cw.zeros(1024, np.float32, stream=a)
    a.synchronize()
    cw.ops.fill(x, 1.0, stream=a)  # WRITE
    cw.ops.sum(x, stream=b)  # READ
    cw.synchronize()


def test_clean():
    a, b = cw.Stream(), cw.Stream()
    x = cw.zeros(1024, np.float32, stream=a)
    cw.ops.fill(x, 1.0, stream=a)
    b.wait(a.record())
    assert float(cw.ops.sum(x, stream=b).to_numpy(stream=b)) == 1024.0
"""


def run_pytest(folder, *arguments: str) -> subprocess.CompletedProcess:
    """pytest in a fresh process on `folder`, with the plugin loaded through the entry point an installed cuweave
    registers (not named with -p: that is what is tested)."""
    (folder / "test_gpu_work.py").write_text(PYTEST_TESTS)
    env = {k: v for k, v in os.environ.items() if k != "CUWEAVE_SANITIZE"}  # the plugin decides
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(folder), *arguments, str(folder)],
                          capture_output=True, text=True, cwd=folder, timeout=300, env=env)


def test_the_pytest_plugin_fails_a_racing_test_naming_both_call_sites_and_passes_a_clean_one(tmp_path):
    plain = run_pytest(tmp_path)
    assert plain.returncode == 0 and "2 passed" in plain.stdout, plain.stdout[-2000:]
    checked = run_pytest(tmp_path, "--cuweave-sanitize")
    assert checked.returncode == 1, checked.stdout[-2000:]
    assert "1 failed, 1 passed" in checked.stdout and "FAILED test_gpu_work.py::test_racy" in checked.stdout
    for marker in ("# WRITE", "# READ"):
        assert f"test_gpu_work.py:{line_of(PYTEST_TESTS, marker)}" in checked.stdout


@pytest.mark.cupti
def test_the_pytest_plugin_writes_one_trace_per_test(tmp_path):
    run = run_pytest(tmp_path, "--cuweave-trace", str(tmp_path / "traces"))
    assert run.returncode == 0, run.stdout[-2000:]
    written = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert written == ["test_gpu_work.py_test_clean.json", "test_gpu_work.py_test_racy.json"]
    events = json.loads((tmp_path / "traces" / "test_gpu_work.py_test_clean.json").read_text())["traceEvents"]
    assert any("sum" in event.get("name", "") for event in events)


@pytest.mark.cupti
def test_the_picture_of_a_run_whose_gpu_work_came_late_spans_that_work(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    s = cw.Stream()
    x = cw.zeros(1024, np.float32, stream=s)
    s.synchronize()
    with cw.trace() as t:
        time.sleep(0.3)  # a program's start-up: imports, reading data
        for value in range(3):
            cw.ops.fill(x, float(value), stream=s)
        s.synchronize()
    drawn = {}
    monkeypatch.setattr(_tools, "_plot", lambda window, figure, title: drawn.update(window=window, title=title))
    assert _tools._picture(t, tmp_path / "timeline.png") is None
    first = min(e.start_ns for e in t.events)
    assert drawn["window"].events[0].start_ns == first and drawn["window"].duration_ns == max(e.end_ns for e in t.events)
    assert "in which GPU work ran" in drawn["title"] and (tmp_path / "timeline.png").exists()
