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
# tiny_kernel_launch, record_wait); cuda.core's (loop_round) is loops.CUDA_CORE.
IN_PROCESS_RAW = "raw in this process"
PAIRED_RATIO = "cuweave / raw in this process, paired"


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


def paired_with_raw_here(cw_rep: Callable[[], float], raw_rep: Callable[[], float], cfg: Config) -> dict[str, float]:
    """cuweave beside raw_cuda.cu's same loop inside this process (ctypes), one repetition of each in turn,
    cfg.reps pairs after a warm-up pair: what earlier rows did to the process
    (tools/probes/graph_node_process_state.py) and the shared host's drift from moment to moment weigh on
    both alike. Returns cuweave's median, raw's median and the median of the per-pair ratios (a raw
    repetition is its library call's own warm-up repetition and one timed one, on a fresh stream)."""
    with gc_disabled():
        cw_rep()
        raw_rep()
        pairs = [(cw_rep(), raw_rep()) for _ in range(cfg.reps)]
    return {"cuweave": statistics.median(ours for ours, _ in pairs),
            IN_PROCESS_RAW: statistics.median(raw for _, raw in pairs),
            PAIRED_RATIO: statistics.median(ours / raw for ours, raw in pairs)}
