"""The raw CUDA helper, benchmarks/raw_cuda.cu: built with nvcc, run as a child process before the in-process
measurements, or loaded into this process to take turns with cuweave."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

import libraries
from timing import Config, gc_disabled

HERE = Path(__file__).resolve().parent
RAW_SOURCE = HERE / "raw_cuda.cu"

# Measurements shown below the table: raw CUDA inside the benchmark's process (graph_node, graph_replay,
# tiny_kernel_launch, tiny_builtin_launch, record_wait), CuPy's beside them (tiny_builtin_launch); cuda.core's
# (loop_round) is loops.CUDA_CORE.
IN_PROCESS_RAW = "raw in this process"
CUPY_HERE = "CuPy in this process"


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cuweave-bench"
    try:
        base.mkdir(parents=True, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="cuweave-bench-"))


def build_raw_helper(gpu_name: str, source: Path = RAW_SOURCE, shared: bool = False) -> tuple[Path | None, str]:
    """Compile raw_cuda.cu (or `source`; cached by source, nvcc and GPU) into an executable, or with `shared` into a
    shared library (its main renamed); returns (the file or None, note)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
        candidate = Path(cuda_home) / "bin" / "nvcc"
        nvcc = str(candidate) if candidate.is_file() else None
    if nvcc is None:
        return None, "nvcc not found (PATH, CUDA_HOME)"
    flags = ["-shared", "-Xcompiler", "-fPIC", "-Dmain=raw_cuda_main"] if shared else []
    key = hashlib.sha256(source.read_bytes() + nvcc.encode() + gpu_name.encode() + str(flags).encode()).hexdigest()[:16]
    out_dir = _cache_dir()
    exe = out_dir / f"{source.stem}-{key}{'.so' if shared else ''}"
    if exe.is_file():
        return exe, f"cached {exe}"
    failures = []
    for arch in ("native", "sm_90"):
        tmp = out_dir / f"{source.stem}-{key}.{os.getpid()}.tmp"
        cmd = [nvcc, "-O2", "-std=c++17", f"-arch={arch}", *flags, str(source), "-o", str(tmp)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            failures.append(f"-arch={arch}: {exc}")
            continue
        # Without a visible GPU, nvcc warns and builds its default arch for -arch=native: use sm_90 then.
        if proc.returncode == 0 and "Cannot find valid GPU" not in proc.stderr:
            os.replace(tmp, exe)
            return exe, f"built with -arch={arch}"
        tmp.unlink(missing_ok=True)
        failures.append(f"-arch={arch}: rc {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return None, "nvcc failed: " + " | ".join(failures)


def run_raw_helper(exe: Path, cfg: Config) -> tuple[dict | None, str]:
    """Run the compiled helper; returns (its JSON object or None, note)."""
    cmd = [str(exe), "--reps", str(cfg.reps), "--n", str(cfg.n)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"raw_cuda did not run: {exc}"
    if proc.returncode != 0:
        return None, f"raw_cuda exited {proc.returncode}: {proc.stderr.strip()[-500:]}"
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1]), "ok"
    except (IndexError, ValueError) as exc:
        return None, f"raw_cuda printed no JSON ({exc}): {proc.stdout[-200:]!r}"


_in_process = None  # raw_cuda.cu as a shared library, loaded into this process once


def raw_in_process():
    global _in_process
    if _in_process is None:
        import ctypes

        library, note = build_raw_helper(libraries.cw.Device(0).properties.name, shared=True)
        if library is None:
            raise RuntimeError(note)
        _in_process = ctypes.CDLL(str(library))
        _in_process.raw_graph_node_us.restype = ctypes.c_double
        _in_process.raw_graph_node_us.argtypes = [ctypes.c_int]
        _in_process.raw_tiny_kernel_launch_us.restype = ctypes.c_double
        _in_process.raw_tiny_kernel_launch_us.argtypes = [ctypes.c_int, ctypes.c_int]
        _in_process.raw_graph_replay_us.restype = ctypes.c_double
        _in_process.raw_graph_replay_us.argtypes = [ctypes.c_int, ctypes.c_int]
        _in_process.raw_event_record_wait_us.restype = ctypes.c_double
        _in_process.raw_event_record_wait_us.argtypes = [ctypes.c_int, ctypes.c_int]
        _in_process.raw_event_record_wait_driver_us.restype = ctypes.c_double
        _in_process.raw_event_record_wait_driver_us.argtypes = [ctypes.c_int, ctypes.c_int]
    return _in_process


def paired_ratio(side: str) -> str:
    """The name of the median of the per-round ratios of cuweave to `side` (in_turn_here)."""
    return f"cuweave / {side}, paired"


PAIRED_RATIO = paired_ratio(IN_PROCESS_RAW)


def in_turn_here(sides: dict[str, Callable[[], float]], cfg: Config) -> dict[str, float]:
    """One repetition of each side in turn ("cuweave" first), cfg.reps rounds after a warm-up round, all in this
    process: what earlier rows did to the process (tools/probes/graph_node_process_state.py) and the shared host's
    drift from moment to moment weigh on every side alike. Returns each side's median, and for each other side the
    median of the per-round ratios of cuweave to it (paired_ratio)."""
    with gc_disabled():
        for rep in sides.values():
            rep()
        rounds = [{name: rep() for name, rep in sides.items()} for _ in range(cfg.reps)]
    result = {name: statistics.median(round_[name] for round_ in rounds) for name in sides}
    for name in sides:
        if name != "cuweave":
            result[paired_ratio(name)] = statistics.median(round_["cuweave"] / round_[name] for round_ in rounds)
    return result


def paired_with_raw_here(cw_rep: Callable[[], float], raw_rep: Callable[[], float], cfg: Config) -> dict[str, float]:
    """cuweave beside raw_cuda.cu's same loop inside this process (ctypes), in turn (in_turn_here). Returns cuweave's
    median, raw's median and the median of the per-pair ratios (a raw repetition is its library call's own warm-up
    repetition and one timed one, on a fresh stream)."""
    return in_turn_here({"cuweave": cw_rep, IN_PROCESS_RAW: raw_rep}, cfg)
