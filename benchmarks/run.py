#!/usr/bin/env python3
"""cuweave benchmarks: cuweave beside raw CUDA C++, PyTorch and CuPy, in one run.

    python benchmarks/run.py [--json PATH] [--quick] [--rows name,name] [--gross]

Methods follow /work/shared/targets.md: a timing is the median of several repetitions after a warm-up
repetition; host costs are wall time per call over 20,000 calls; copies are timed with CUDA events.
The raw CUDA column comes from benchmarks/raw_cuda.cu, compiled with nvcc and run as a child process
before the in-process measurements. Benchmarks are never part of the test pass/fail.

Adding a row: write one function per library that returns a float (use time_per_call / gbps_of), then
add a Row to ROWS. See benchmarks/README.md for what each row means.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import gc
import hashlib
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
RAW_SOURCE = HERE / "raw_cuda.cu"

N_CALLS = 20_000            # calls per repetition for host costs
REPS = 7                    # timed repetitions (after one warm-up repetition)
QUICK_N_CALLS = 2_000       # --quick: a smoke run, not figures to quote
QUICK_REPS = 3
BLOCK_BYTES = 1 << 20       # "1 MB" pinned block
BLOCK_PAIRS = 200           # allocate + free pairs per repetition
COPY_BYTES = 256 * 2**20    # "256 MB" copies

PEERS = ("torch", "cupy")
LIBS = ("cuweave",) + PEERS  # measured in this process; "raw" comes from raw_cuda.cu

# Library modules, set by load_cuweave() / load_peers(); a peer stays None when skipped.
cw = None
torch = None
cupy = None


@dataclass(frozen=True)
class Config:
    n: int      # calls per repetition for host costs
    reps: int   # timed repetitions


# --------------------------------------------------------------------------- timing helpers

_call_overhead_us = 0.0  # subtracted by time_per_call; set by main() unless --gross


@contextlib.contextmanager
def gc_disabled():
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def median_of(reps: int, fn: Callable[[], float]) -> float:
    """Call fn() once to warm up, then `reps` times, with the garbage collector off; median of the results."""
    with gc_disabled():
        fn()
        return statistics.median([fn() for _ in range(reps)])


def _loop_ns(fn: Callable[[], object], n: int) -> int:
    t0 = time.perf_counter_ns()
    for _ in itertools.repeat(None, n):
        fn()
    return time.perf_counter_ns() - t0


def _empty_loop_ns(n: int) -> int:
    t0 = time.perf_counter_ns()
    for _ in itertools.repeat(None, n):
        pass
    return time.perf_counter_ns() - t0


def time_per_call(fn: Callable[[], object], n: int, reps: int) -> float:
    """Host µs per fn() call: wall time of n calls / n, median of `reps` after a warm-up repetition.

    The cost of the Python call to fn itself (calibrate_call_overhead) is subtracted unless --gross, so
    the figure is what fn's body costs when written in place in a `for` loop.
    """
    return median_of(reps, lambda: _loop_ns(fn, n) / n / 1e3) - _call_overhead_us


def calibrate_call_overhead(n: int, reps: int) -> float:
    """µs that calling an empty Python function adds to one iteration of a `for` loop."""

    def noop():
        pass

    per_call = median_of(reps, lambda: (_loop_ns(noop, n) - _empty_loop_ns(n)) / n / 1e3)
    return max(per_call, 0.0)


def gbps_of(nbytes: int, one_copy_ms: Callable[[], float], reps: int) -> float:
    """GB/s (1e9 bytes per second) of a copy whose event-timed duration in ms one_copy_ms() returns."""
    return median_of(reps, lambda: nbytes / 1e9 / (one_copy_ms() / 1e3))


# --------------------------------------------------------------------------- event record + stream wait


def cw_record_wait(cfg: Config) -> float:
    ev, a, b = cw.Event(), cw.Stream(), cw.Stream()

    def pair():
        a.record(ev)
        b.wait(ev)

    return time_per_call(pair, cfg.n, cfg.reps)


def torch_record_wait(cfg: Config) -> float:
    ev, a, b = torch.cuda.Event(), torch.cuda.Stream(), torch.cuda.Stream()

    def pair():
        ev.record(a)
        b.wait_event(ev)

    return time_per_call(pair, cfg.n, cfg.reps)


def cupy_record_wait(cfg: Config) -> float:
    ev = cupy.cuda.Event(disable_timing=True)
    a, b = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)

    def pair():
        ev.record(a)
        b.wait_event(ev)

    return time_per_call(pair, cfg.n, cfg.reps)


# --------------------------------------------------------------------------- `with stream:` enter + exit


def cw_with_stream(cfg: Config) -> float:
    s = cw.Stream()

    def enter_exit():
        with s:
            pass

    return time_per_call(enter_exit, cfg.n, cfg.reps)


def torch_with_stream(cfg: Config) -> float:
    s = torch.cuda.Stream()

    def enter_exit():
        with torch.cuda.stream(s):
            pass

    return time_per_call(enter_exit, cfg.n, cfg.reps)


def cupy_with_stream(cfg: Config) -> float:
    s = cupy.cuda.Stream(non_blocking=True)

    def enter_exit():
        with s:
            pass

    return time_per_call(enter_exit, cfg.n, cfg.reps)


# --------------------------------------------------------------------------- pinned 1 MB block / array
# The warm-up repetition of median_of fills each library's cache, so the timed repetitions hit it.


def cw_pinned_block(cfg: Config) -> float:
    pool = cw.pinned_pool()

    def alloc_free():
        blk = pool.allocate(BLOCK_BYTES)
        del blk

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def cw_pinned_array(cfg: Config) -> float:
    def alloc_free():
        arr = cw.pinned_empty((BLOCK_BYTES,), np.uint8)
        del arr

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def torch_pinned_tensor(cfg: Config) -> float:
    def alloc_free():
        t = torch.empty(BLOCK_BYTES, dtype=torch.uint8, pin_memory=True)
        del t

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def cupy_pinned_block(cfg: Config) -> float:
    def alloc_free():
        mem = cupy.cuda.alloc_pinned_memory(BLOCK_BYTES)
        del mem

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


def cupy_pinned_array(cfg: Config) -> float:
    import cupyx

    def alloc_free():
        arr = cupyx.empty_pinned((BLOCK_BYTES,), dtype=np.uint8)
        del arr

    return time_per_call(alloc_free, BLOCK_PAIRS, cfg.reps)


# --------------------------------------------------------------------------- pinned H2D / D2H, 256 MB
# Each: pinned host buffer + device buffer, one non-blocking stream, the copy bracketed by timing events.


def cw_copy_gbps(cfg: Config, h2d: bool) -> float:
    s = cw.Stream()
    host = cw.pinned_empty((COPY_BYTES,), np.uint8)
    dev = cw.empty((COPY_BYTES,), np.uint8, stream=s)
    start, end = cw.Event(timing=True), cw.Event(timing=True)
    dst, src = (dev, host) if h2d else (host, dev)

    def one_copy_ms():
        start.record(s)
        cw.copy_async(dst, src, stream=s)
        end.record(s)
        end.synchronize()
        return start.elapsed_time(end)

    return gbps_of(COPY_BYTES, one_copy_ms, cfg.reps)


def torch_copy_gbps(cfg: Config, h2d: bool) -> float:
    s = torch.cuda.Stream()
    host = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dst, src = (dev, host) if h2d else (host, dev)

    def one_copy_ms():
        start.record(s)
        with torch.cuda.stream(s):
            dst.copy_(src, non_blocking=True)
        end.record(s)
        end.synchronize()
        return start.elapsed_time(end)

    return gbps_of(COPY_BYTES, one_copy_ms, cfg.reps)


def cupy_copy_gbps(cfg: Config, h2d: bool) -> float:
    rt = cupy.cuda.runtime
    s = cupy.cuda.Stream(non_blocking=True)
    host = cupy.cuda.alloc_pinned_memory(COPY_BYTES)
    dev = cupy.empty(COPY_BYTES, dtype=cupy.uint8)
    cupy.cuda.Device().synchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()  # timing enabled by default
    if h2d:
        dst, src, kind = dev.data.ptr, host.ptr, rt.memcpyHostToDevice
    else:
        dst, src, kind = host.ptr, dev.data.ptr, rt.memcpyDeviceToHost

    def one_copy_ms():
        start.record(s)
        rt.memcpyAsync(dst, src, COPY_BYTES, kind, s.ptr)
        end.record(s)
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end)

    return gbps_of(COPY_BYTES, one_copy_ms, cfg.reps)


# --------------------------------------------------------------------------- the rows


@dataclass(frozen=True)
class Row:
    title: str
    unit: str                   # "us" (lower is better) or "GB/s" (higher is better)
    target: float | None        # the cuweave target, None where this issue sets none
    raw_key: str | None         # key in raw_cuda's JSON; None where raw CUDA has no counterpart
    measure: dict[str, Callable[[Config], float]] = field(default_factory=dict)  # lib -> measurement

    @property
    def higher_is_better(self) -> bool:
        return self.unit == "GB/s"


ROWS: dict[str, Row] = {
    "record_wait": Row(
        "event record + stream wait, per pair", "us", 0.40, "event_record_wait_us",
        {"cuweave": cw_record_wait, "torch": torch_record_wait, "cupy": cupy_record_wait}),
    "with_stream": Row(
        "`with stream:` enter + exit", "us", 0.35, None,
        {"cuweave": cw_with_stream, "torch": torch_with_stream, "cupy": cupy_with_stream}),
    "pinned_block": Row(
        "pinned 1 MB block alloc + free (raw: uncached)", "us", 0.5, "pinned_block_1mb_us",
        {"cuweave": cw_pinned_block, "torch": torch_pinned_tensor, "cupy": cupy_pinned_block}),
    "pinned_array": Row(
        "pinned 1 MB array alloc + free (raw: uncached)", "us", None, "pinned_block_1mb_us",
        {"cuweave": cw_pinned_array, "torch": torch_pinned_tensor, "cupy": cupy_pinned_array}),
    "pinned_h2d": Row(
        "pinned H2D copy, 256 MB", "GB/s", 53.0, "pinned_h2d_gbps",
        {"cuweave": functools.partial(cw_copy_gbps, h2d=True),
         "torch": functools.partial(torch_copy_gbps, h2d=True),
         "cupy": functools.partial(cupy_copy_gbps, h2d=True)}),
    "pinned_d2h": Row(
        "pinned D2H copy, 256 MB", "GB/s", 53.0, "pinned_d2h_gbps",
        {"cuweave": functools.partial(cw_copy_gbps, h2d=False),
         "torch": functools.partial(torch_copy_gbps, h2d=False),
         "cupy": functools.partial(cupy_copy_gbps, h2d=False)}),
    # Raw CUDA only so far; the next issue adds the library columns.
    "tiny_kernel_launch": Row("tiny kernel launch, wall incl. sync", "us", 2.9, "tiny_kernel_launch_us"),
    "graph_replay": Row("1-node graph replay call", "us", 1.6, "graph_replay_us"),
    "graph_node": Row("1000-node graph, per node", "us", 0.75, "graph_node_us"),
}


# --------------------------------------------------------------------------- loading the libraries


def load_cuweave() -> None:
    """Import cuweave (installed, else from the source tree's python/); exit 2 if it cannot use a GPU."""
    global cw
    try:
        import cuweave
    except Exception as first:  # noqa: BLE001 -- an extension that fails to load raises more than ImportError
        source_tree = HERE.parent / "python"
        if not (source_tree / "cuweave" / "__init__.py").is_file():
            _give_up(f"cannot import cuweave: {type(first).__name__}: {first}")
        sys.path.insert(0, str(source_tree))
        try:
            import cuweave
        except Exception as second:  # noqa: BLE001
            _give_up(f"cannot import cuweave (installed: {first}; from {source_tree}: {second})")
    backend = cuweave.backend()
    if backend != "cuda" or not cuweave.is_available() or cuweave.device_count() < 1:
        reason = (cuweave.unavailable_reason()
                  or f"backend is {backend!r}, device_count() is {cuweave.device_count()}")
        _give_up(f"cuweave has no usable GPU: {reason}")
    cw = cuweave


def _give_up(message: str) -> None:
    print(f"benchmarks: {message}", file=sys.stderr)
    sys.exit(2)


def _load_torch():
    import torch as module

    if not module.cuda.is_available():
        return module, "torch.cuda.is_available() is False"
    return module, ""


def _load_cupy():
    import cupy as module

    try:
        count = module.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 -- CUDARuntimeError without a driver
        return module, f"cupy sees no CUDA device: {exc}"
    return module, "" if count > 0 else "cupy sees no CUDA device"


def load_peers(versions: dict[str, str]) -> dict[str, str]:
    """Import the peers that can run; returns {peer: why it is skipped}. Fills versions as a side effect."""
    skipped = {}
    for name, loader in (("torch", _load_torch), ("cupy", _load_cupy)):
        try:
            module, reason = loader()
        except Exception as exc:  # noqa: BLE001 -- a broken install should skip the column, not the run
            skipped[name] = f"import {name} failed: {type(exc).__name__}: {exc}"
            continue
        versions[name] = getattr(module, "__version__", "unknown")
        if reason:
            skipped[name] = reason
        else:
            globals()[name] = module
    return skipped


def synchronize(lib: str) -> None:
    """Wait for all work of this library on the device, so one measurement does not run into the next."""
    if lib == "cuweave":
        cw.synchronize()
    elif lib == "torch":
        torch.cuda.synchronize()
    elif lib == "cupy":
        cupy.cuda.Device().synchronize()


def machine_info(versions: dict[str, str]) -> dict:
    props = cw.Device(0).properties
    return {
        "gpu": props.name,
        "compute_capability": list(getattr(props, "compute_capability", ())),
        "multiprocessor_count": getattr(props, "multiprocessor_count", None),
        "total_memory": getattr(props, "total_memory", None),
        "driver_version": "%d.%d" % tuple(cw.driver_version()),
        "runtime_version": "%d.%d" % tuple(cw.runtime_version()),
        "cuweave": getattr(cw, "__version__", "unknown"),
        "numpy": np.__version__,
        **versions,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": platform.node(),
        "time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


# --------------------------------------------------------------------------- the raw CUDA helper


def _cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cuweave-bench"
    try:
        base.mkdir(parents=True, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="cuweave-bench-"))


def build_raw_helper(gpu_name: str) -> tuple[Path | None, str]:
    """Compile raw_cuda.cu (cached by source, nvcc and GPU); returns (executable or None, note)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
        candidate = Path(cuda_home) / "bin" / "nvcc"
        nvcc = str(candidate) if candidate.is_file() else None
    if nvcc is None:
        return None, "nvcc not found (PATH, CUDA_HOME)"
    key = hashlib.sha256(RAW_SOURCE.read_bytes() + nvcc.encode() + gpu_name.encode()).hexdigest()[:16]
    out_dir = _cache_dir()
    exe = out_dir / f"raw_cuda-{key}"
    if exe.is_file():
        return exe, f"cached {exe}"
    failures = []
    for arch in ("native", "sm_90"):
        tmp = out_dir / f"raw_cuda-{key}.{os.getpid()}.tmp"
        cmd = [nvcc, "-O2", "-std=c++17", f"-arch={arch}", str(RAW_SOURCE), "-o", str(tmp)]
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


# --------------------------------------------------------------------------- measuring and reporting


@dataclass
class Result:
    values: dict[str, float] = field(default_factory=dict)   # lib (or "raw") -> value
    errors: dict[str, str] = field(default_factory=dict)     # lib -> exception text


def measure_row(row: Row, cfg: Config, usable: set[str], raw: dict | None) -> Result:
    result = Result()
    if raw is not None and raw.get(row.raw_key) is not None:
        result.values["raw"] = raw[row.raw_key]
    for lib, fn in row.measure.items():
        if lib not in usable:
            continue
        try:
            value = fn(cfg)
            synchronize(lib)
            result.values[lib] = value
        except Exception as exc:  # noqa: BLE001 -- report it in the table and keep measuring
            result.errors[lib] = f"{type(exc).__name__}: {exc}"
    return result


def best_peer(row: Row, result: Result) -> tuple[str, float] | None:
    peers = [(lib, result.values[lib]) for lib in PEERS if lib in result.values]
    if not peers:
        return None
    pick = max if row.higher_is_better else min
    return pick(peers, key=lambda item: item[1])


def meets_target(row: Row, result: Result) -> bool | None:
    value = result.values.get("cuweave")
    if value is None or row.target is None:
        return None
    return value >= row.target if row.higher_is_better else value <= row.target


def summarize(row: Row, result: Result) -> dict:
    """The derived numbers of one row: ratios of cuweave to raw and to the best peer, and the target check."""
    cw_value = result.values.get("cuweave")
    raw_value = result.values.get("raw")
    peer = best_peer(row, result)
    return {
        "cuweave_over_raw": cw_value / raw_value if cw_value is not None and raw_value else None,
        "best_peer": peer[0] if peer else None,
        "cuweave_over_best_peer": cw_value / peer[1] if cw_value is not None and peer and peer[1] else None,
        "meets_target": meets_target(row, result),
    }


def fmt_value(value: float) -> str:
    magnitude = abs(value)
    digits = 0 if magnitude >= 100 else 1 if magnitude >= 10 else 2 if magnitude >= 1 else 3
    return f"{value:.{digits}f}"


def cell(row: Row, result: Result, lib: str, unavailable: dict[str, str]) -> str:
    if lib in result.values:
        return fmt_value(result.values[lib])
    if lib in result.errors:
        return "err"
    has_counterpart = row.raw_key is not None if lib == "raw" else lib in row.measure
    if not has_counterpart:
        return "-"
    return "n/a" if lib in unavailable else "-"


def print_table(rows: dict[str, Row], results: dict[str, Result], unavailable: dict[str, str]) -> None:
    header = ["row", "unit", "cuweave", "raw CUDA", "PyTorch", "CuPy", "target",
              "cuweave/raw", "cuweave/best peer", "meets target"]
    lines = []
    for name, row in rows.items():
        result = results[name]
        derived = summarize(row, result)
        target = "-" if row.target is None else (">= " if row.higher_is_better else "<= ") + f"{row.target:g}"
        ratio_raw = derived["cuweave_over_raw"]
        ratio_peer = derived["cuweave_over_best_peer"]
        meets = derived["meets_target"]
        lines.append([
            name, row.unit,
            *(cell(row, result, lib, unavailable) for lib in ("cuweave", "raw", "torch", "cupy")),
            target,
            "-" if ratio_raw is None else f"{ratio_raw:.3g}",
            "-" if ratio_peer is None else f"{ratio_peer:.3g} ({derived['best_peer']})",
            "-" if meets is None else ("yes" if meets else "no"),
        ])
    widths = [max(len(str(r[i])) for r in [header] + lines) for i in range(len(header))]

    def render(cells):
        return "| " + " | ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))) + " |"

    print(render(header))
    print("|" + "|".join(("-" * (w + 2)) if i < 2 else ("-" * (w + 1) + ":") for i, w in enumerate(widths)) + "|")
    for line in lines:
        print(render(line))
    print("us rows: lower is better, a ratio < 1 means cuweave is faster; GB/s rows: higher is better.")
    for name in rows:
        for lib, error in results[name].errors.items():
            print(f"error: {name} / {lib}: {error}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write every number and the machine info here")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_REPS} reps of {QUICK_N_CALLS} calls: a smoke run, not figures to quote")
    parser.add_argument("--rows", metavar="NAME,NAME", help="only these rows: " + ", ".join(ROWS))
    parser.add_argument("--gross", action="store_true",
                        help="keep the Python call overhead in host costs instead of subtracting it")
    args = parser.parse_args(argv)
    if args.rows:
        args.rows = [name.strip() for name in args.rows.split(",") if name.strip()]
        unknown = [name for name in args.rows if name not in ROWS]
        if unknown or not args.rows:
            parser.error(f"unknown row(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(ROWS)}")
    else:
        args.rows = list(ROWS)
    return args


def main(argv: list[str] | None = None) -> int:
    global _call_overhead_us
    args = parse_args(argv)
    cfg = Config(n=QUICK_N_CALLS, reps=QUICK_REPS) if args.quick else Config(n=N_CALLS, reps=REPS)
    rows = {name: ROWS[name] for name in args.rows}

    load_cuweave()
    gpu_name = cw.Device(0).properties.name

    # The raw helper runs first, alone on the GPU, before the in-process measurements.
    raw, raw_note = None, "not needed for these rows"
    if any(row.raw_key for row in rows.values()):
        exe, raw_note = build_raw_helper(gpu_name)
        if exe is not None:
            raw, raw_note = run_raw_helper(exe, cfg)
    unavailable = {} if raw is not None else {"raw": raw_note}

    versions: dict[str, str] = {}
    unavailable.update(load_peers(versions))
    usable = {lib for lib in LIBS if lib not in unavailable}

    overhead = calibrate_call_overhead(10 * cfg.n, cfg.reps)
    _call_overhead_us = 0.0 if args.gross else overhead

    results = {name: measure_row(row, cfg, usable, raw) for name, row in rows.items()}

    machine = machine_info(versions)
    print(f"cuweave {machine['cuweave']} on {machine['gpu']} (driver {machine['driver_version']}, "
          f"runtime {machine['runtime_version']}); numpy {machine['numpy']}, torch {versions.get('torch', '-')}, "
          f"cupy {versions.get('cupy', '-')}, python {machine['python']}")
    print(f"{cfg.reps} reps (median, after a warm-up rep) of {cfg.n} calls"
          f"{' -- QUICK RUN, not figures to quote' if args.quick else ''}; "
          f"Python call overhead {overhead * 1e3:.1f} ns/call "
          f"{'kept (--gross)' if args.gross else 'subtracted from host costs'}")
    print(f"raw CUDA: {raw_note if raw is None else 'ok (' + str(raw.get('device')) + ')'}")
    for lib, reason in unavailable.items():
        if lib != "raw":
            print(f"{lib} skipped: {reason}")
    print()
    print_table(rows, results, unavailable)

    if args.json:
        report = {
            "machine": machine,
            "settings": {"reps": cfg.reps, "n_calls": cfg.n, "quick": args.quick,
                         "call_overhead_us": overhead, "call_overhead_subtracted": not args.gross,
                         "block_bytes": BLOCK_BYTES, "block_pairs": BLOCK_PAIRS, "copy_bytes": COPY_BYTES},
            "raw_cuda": {"note": raw_note, "results": raw},
            "skipped": unavailable,
            "rows": {
                name: {"title": row.title, "unit": row.unit, "higher_is_better": row.higher_is_better,
                       "target": row.target, "values": results[name].values, "errors": results[name].errors,
                       **summarize(row, results[name])}
                for name, row in rows.items()
            },
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nwrote {args.json}")

    return 1 if any("cuweave" in result.errors for result in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
