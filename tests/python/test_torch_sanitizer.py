"""PyTorch-only programs under cuweave's sanitizer, beside PyTorch's own (CSAN, TORCH_CUDA_SANITIZER=1) on the
same programs: the scenarios of CSAN's tests replayed with real streams, events and operators
(data/torch_stream_scenarios.py), and the pytest plugin on PyTorch tests. Each program is a fresh process, as a
user runs it; PyTorch is never imported into this one. cuweave checks the scenarios and the documentation's programs
through each of its hooks in PyTorch (CUWEAVE_TORCH_HOOK: the C++ one in its dispatcher, built by the first run that
needs it, and the Python dispatch mode), and the programs in shipped shapes through the C++ one, as users run them
once it is built."""

from __future__ import annotations

import ast
import concurrent.futures
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

import cuweave as cw

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs PyTorch"),
]

SCRIPT = pathlib.Path(__file__).parent / "data" / "torch_stream_scenarios.py"
# PyTorch programs run at once: each spends most of its few seconds importing PyTorch and making its CUDA context
# on one core, so a core each (at least 8, at most 16: a context per process on the one GPU).
PROCESSES = max(8, min(16, os.cpu_count() or 8))


def _scenarios() -> tuple[list[str], set[str]]:
    """The script's scenarios (functions of s, t, e), in order, and RACES: read without importing PyTorch."""
    tree = ast.parse(SCRIPT.read_text())
    names = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)
             and [a.arg for a in node.args.args] == ["s", "t", "e"]]
    races = next(ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and node.targets[0].id == "RACES")
    return names, races


SCENARIOS, RACES = _scenarios()


HOOKS = ("native", "python")


def _run(arguments: list[str], cwd: pathlib.Path = SCRIPT.parent, **environment: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CUWEAVE_SANITIZE", "TORCH_CUDA_SANITIZER")}
    env.update(environment, PYTHONWARNINGS="")
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True, cwd=cwd, timeout=600, env=env)


@pytest.fixture(scope="module")
def verdicts() -> dict[tuple[str, str], subprocess.CompletedProcess]:
    """Every scenario under `python -m cuweave sanitize` through each hook and under CSAN, PROCESSES at a time."""
    with concurrent.futures.ThreadPoolExecutor(PROCESSES) as pool:
        jobs = {}
        for name in SCENARIOS:
            for hook in HOOKS:
                jobs[name, hook] = pool.submit(_run, ["-m", "cuweave", "sanitize", SCRIPT.name, name],
                                               CUWEAVE_TORCH_HOOK=hook)
            jobs[name, "csan"] = pool.submit(_run, [SCRIPT.name, name], TORCH_CUDA_SANITIZER="1")
        return {key: job.result() for key, job in jobs.items()}


# Scenarios where CSAN reports a race that did not happen (seen with PyTorch 2.11 on an H200):
# - it notes an operator's accesses after running it, so a copy to the host that synchronizes its stream inside
#   the operator (`.cpu()`) comes after its own synchronize, and a later write on another stream looks unordered;
# - it takes an operator captured into a CUDA graph as run on the capture stream, unordered with the replays'
#   stream where its result is read.
CSAN_FALSE_ALARMS = {"copied_to_host_then_written", "graph_replayed_then_read"}
# Races CSAN does not see: it starts each block the caching allocator hands out afresh, and it follows no reads
# on the host.
REUSES = {"prefetcher_reusing_a_block_still_read", "stash_freed_under_a_side_copy"}
HOST_READS = {"host_read_of_a_copy_not_waited_for", "host_tolist_of_a_copy_not_waited_for",
              "non_blocking_to_cpu_read_at_once"}
CSAN_MISSES = REUSES | HOST_READS


def _csan_verdict(run: subprocess.CompletedProcess) -> str:
    if run.returncode == 0 and "done" in run.stdout:
        return "clean"
    assert "CSAN detected a possible data race" in run.stderr, run.stderr[-3000:]
    return "race"


@pytest.mark.parametrize("hook", HOOKS)
@pytest.mark.parametrize("name", SCENARIOS)
def test_cuweave_sanitize_names_a_pytorch_programs_races_as_csan_does(verdicts, name, hook):
    ours, csan = verdicts[name, hook], verdicts[name, "csan"]
    if name in RACES:
        assert ours.returncode == 1 and "RaceError" in ours.stderr, ours.stderr[-3000:]
        assert "done" not in ours.stdout  # the first race stops the program
        # Both operations are PyTorch's, each named with its call site in the program.
        assert len(re.findall(r"torch [A-Za-z_]+\.\w+", ours.stderr.split("RaceError")[-1])) >= 2, ours.stderr[-3000:]
        assert len(re.findall(rf"{SCRIPT.name}:\d+", ours.stderr.split("RaceError")[-1])) >= 2, ours.stderr[-3000:]
    else:
        assert ours.returncode == 0 and "done" in ours.stdout, ours.stderr[-3000:]
    csan_expected = "race" if (name in RACES and name not in CSAN_MISSES) or name in CSAN_FALSE_ALARMS else "clean"
    assert _csan_verdict(csan) == csan_expected, csan.stderr[-3000:]


@pytest.mark.parametrize("hook", HOOKS)
@pytest.mark.parametrize("name", sorted(REUSES))
def test_a_block_reused_under_another_streams_use_is_named_with_the_free_and_both_fixes(verdicts, name, hook):
    report = verdicts[name, hook].stderr.split("RaceError")[-1]
    assert "then freed" in report and "handed the block out again" in report, report[-3000:]
    assert "record_stream" in report and "wait_stream" in report, report[-3000:]
    assert len(re.findall(rf"{SCRIPT.name}:\d+", report)) >= 4, report[-3000:]  # use, reuse, free, hand-out


@pytest.mark.parametrize("hook", HOOKS)
@pytest.mark.parametrize("name", sorted(HOST_READS))
def test_a_host_read_of_a_copy_not_waited_for_is_named_with_the_copy_and_the_fix(verdicts, name, hook):
    report = verdicts[name, hook].stderr.split("RaceError")[-1]
    assert re.search(r"write by torch \w+\.\w+ on the legacy default stream", report), report[-3000:]
    assert re.search(r"read by torch [\w.]+ on the host", report), report[-3000:]
    assert "the host read these bytes while the first could still write them" in report, report[-3000:]


# The documentation's programs of the reuse bug (docs/concepts/programs): each buggy one is named by cuweave (the
# use, the free, the reuse and both fixes, at the program's lines) and missed by CSAN; each fixed one is clean.
DOCS_PROGRAMS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "concepts" / "programs"
# Each program's statements of the bug, by a text on their line: the last use of the old tensor on another stream,
# the statement that drops the tensor, and the allocation that is handed its block.
DOCS_REUSE_LINES = {
    "torch_prefetch.py": {"use": ".backward()", "free": "batch = upcoming", "reuse": 'host.to("cuda"'},
    "torch_stash.py": {"use": "host.copy_(activations", "free": "del activations", "reuse": "grads = torch.zeros"},
}
DOCS_FIXES = [None, "record_stream", "wait_stream"]


@pytest.fixture(scope="module")
def docs_runs() -> dict[tuple[str, str | None, str], subprocess.CompletedProcess]:
    """Each docs program, buggy and fixed, under `python -m cuweave sanitize` through each hook and under CSAN, in
    parallel."""
    with concurrent.futures.ThreadPoolExecutor(PROCESSES) as pool:
        jobs = {}
        for program in DOCS_REUSE_LINES:
            for fix in DOCS_FIXES:
                arguments = [program] + ([fix] if fix else [])
                for hook in HOOKS:
                    jobs[program, fix, hook] = pool.submit(_run, ["-m", "cuweave", "sanitize", *arguments],
                                                           cwd=DOCS_PROGRAMS, CUWEAVE_TORCH_HOOK=hook)
                jobs[program, fix, "csan"] = pool.submit(_run, arguments, cwd=DOCS_PROGRAMS,
                                                         TORCH_CUDA_SANITIZER="1")
        return {key: job.result() for key, job in jobs.items()}


def _line_of(program: str, text: str) -> int:
    lines = (DOCS_PROGRAMS / program).read_text().splitlines()
    found = [number for number, line in enumerate(lines, 1) if text in line]
    assert len(found) == 1, f"{text!r} is on lines {found} of {program}"
    return found[0]


@pytest.mark.parametrize("hook", HOOKS)
@pytest.mark.parametrize("program", sorted(DOCS_REUSE_LINES))
@pytest.mark.parametrize("fix", DOCS_FIXES)
def test_the_docs_reuse_programs_are_named_when_buggy_and_clean_when_fixed(docs_runs, program, fix, hook):
    ours, csan = docs_runs[program, fix, hook], docs_runs[program, fix, "csan"]
    if fix is None:
        report = ours.stderr.split("RaceError")[-1]
        assert ours.returncode == 1 and "handed the block out again" in report, ours.stderr[-3000:]
        assert "record_stream" in report and "wait_stream" in report, report[-3000:]
        lines = {role: _line_of(program, text) for role, text in DOCS_REUSE_LINES[program].items()}
        named = {role: re.search(rf"{pattern}[^\n]*\n\s+at {program}:(\d+)", report) for role, pattern in
                 [("use", "(?:read|write) by"), ("free", "then freed"), ("reuse", "handed the block out again")]}
        assert {role: int(m.group(1)) if m else None for role, m in named.items()} == lines, report[-3000:]
    else:
        assert ours.returncode == 0 and "done" in ours.stdout, ours.stderr[-3000:]
    assert _csan_verdict(csan) == "clean", csan.stderr[-3000:]  # CSAN trusts the allocator's reuse


# Programs in the shapes people ship (data/torch_programs): each (program, argument, the module it needs beyond
# PyTorch). Only a PrefetchLoader of a timm from before its fix of 2026-09 reuses a block another stream may still
# read (the program prints which it found); everything else is ordered and must be found clean, by both.
TORCH_PROGRAMS = SCRIPT.parent / "torch_programs"
CORPUS = [
    ("amp_training.py", None, None),
    ("activation_offload.py", None, None),
    ("timm_training.py", None, "timm"),
    ("timm_training.py", "prefetch_loader", "timm"),
    ("transformers_generate.py", None, "transformers"),
]


@pytest.fixture(scope="module")
def corpus_runs() -> dict[tuple[str, str | None, str], subprocess.CompletedProcess]:
    """Each corpus program whose modules are installed, under `python -m cuweave sanitize` and under CSAN."""
    with concurrent.futures.ThreadPoolExecutor(PROCESSES) as pool:
        jobs = {}
        for program, argument, needs in CORPUS:
            if needs is None or importlib.util.find_spec(needs) is not None:
                arguments = [program] + ([argument] if argument else [])
                jobs[program, argument, "cuweave"] = pool.submit(
                    _run, ["-m", "cuweave", "sanitize", *arguments], cwd=TORCH_PROGRAMS, CUWEAVE_TORCH_HOOK="native")
                jobs[program, argument, "csan"] = pool.submit(_run, arguments, cwd=TORCH_PROGRAMS,
                                                              TORCH_CUDA_SANITIZER="1")
        return {key: job.result() for key, job in jobs.items()}


@pytest.mark.parametrize(("program", "argument", "needs"), CORPUS,
                         ids=[p.removesuffix(".py") + (f"-{a}" if a else "") for p, a, _ in CORPUS])
def test_a_shipped_shape_of_program_is_clean_unless_it_reuses_a_block_still_read(corpus_runs, program, argument,
                                                                                   needs):
    if needs is not None and importlib.util.find_spec(needs) is None:
        pytest.skip(f"needs {needs}")
    ours, csan = corpus_runs[program, argument, "cuweave"], corpus_runs[program, argument, "csan"]
    if "PrefetchLoader waits for the consumer: no" in ours.stdout and argument == "prefetch_loader":
        report = ours.stderr.split("RaceError")[-1]
        assert ours.returncode == 1 and "handed the block out again" in report, ours.stderr[-3000:]
        assert "record_stream" in report and "wait_stream" in report, report[-3000:]
        # The consumer's use in the program, the copy that takes its block in timm's loader.
        assert re.search(rf"{program}:\d+", report) and re.search(r"loader\.py:\d+", report), report[-3000:]
    else:
        assert ours.returncode == 0 and "done" in ours.stdout, ours.stderr[-3000:]
    assert _csan_verdict(csan) == "clean", csan.stderr[-3000:]  # it trusts the allocator's reuse


def test_every_race_of_one_operator_is_named(verdicts):
    """CSAN's multiple_errors: one operator writing ten tensors that another stream wrote: CSAN gives ten errors,
    one a tensor; cuweave names every byte of the ten (in one race per stretch of adjacent tensors)."""
    report = verdicts["multiple_errors", "native"].stderr.split("RaceError")[-1]
    assert sum(int(n) for n in re.findall(r"race on (\d+) bytes", report)) == 10 * 256 * 4, report[-3000:]


PYTORCH_TESTS = """
import torch


def test_racy():
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.zeros(1 << 20, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(a):
        x.fill_(1.0)  # WRITE
    with torch.cuda.stream(b):
        y = x * 2  # READ
    torch.cuda.synchronize()


def test_clean():
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.zeros(1 << 20, device="cuda")
    a.wait_stream(torch.cuda.current_stream())  # the zeros
    with torch.cuda.stream(a):
        x.fill_(1.0)
    b.wait_stream(a)
    with torch.cuda.stream(b):
        y = x * 2
    torch.cuda.current_stream().wait_stream(b)  # y.sum() runs on the default stream
    assert float(y.sum()) == 2.0 * (1 << 20)
"""


def test_the_pytest_plugin_fails_a_racing_pytorch_test_and_passes_a_clean_one(tmp_path):
    (tmp_path / "test_torch_work.py").write_text(PYTORCH_TESTS)
    run = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "--cuweave-sanitize",
                str(tmp_path)], cwd=tmp_path)
    assert run.returncode == 1, run.stdout[-3000:]
    assert "1 failed, 1 passed" in run.stdout and "FAILED test_torch_work.py::test_racy" in run.stdout
    lines = PYTORCH_TESTS.splitlines()
    for marker in ("# WRITE", "# READ"):
        line = next(i for i, text in enumerate(lines, 1) if marker in text)
        assert f"test_torch_work.py:{line}" in run.stdout, run.stdout[-3000:]

