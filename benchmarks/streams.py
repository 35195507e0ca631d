"""Stream ordering from the host: event record + stream wait, and `with stream:`."""

from __future__ import annotations

import functools
from typing import Callable

import libraries
from raw_cuda import paired_with_raw_here, raw_in_process
from rows import Row
from timing import Config, per_call_us, time_per_call

cw = torch = cupy = None  # the loaded libraries, set as they load (libraries.share_with)
libraries.share_with(globals())


# --------------------------------------------------------------------------- event record + stream wait
# record_wait's figures beside the pair: what Python itself costs per pair, the thinnest binding of it, and
# cuweave's one-call form (stream.wait(other_stream): record + wait in one call).
PYTHON_FLOOR = "two do-nothing C method calls"
THINNEST_BINDING = "CuPy runtime functions"
ONE_CALL_WAIT = "cuweave b.wait(a)"
RAW_THROUGH_DRIVER = "raw CUDA through the driver"


def cw_record_wait_pair() -> Callable[[], None]:
    ev, a, b = cw.Event(), cw.Stream(), cw.Stream()

    def pair():
        a.record(ev)
        b.wait(ev)

    return pair


def cw_record_wait(cfg: Config) -> float:
    return time_per_call(cw_record_wait_pair(), cfg.n, cfg.reps)


def python_method_pair() -> Callable[[], None]:
    """Two calls of C methods with about the calling conventions of record and wait (METH_FASTCALL, METH_O) that do
    next to nothing (lookups in an empty dict): what any Python binding of the pair pays before its own work."""
    key, table = object(), {}

    def pair():
        table.get(key)
        table.__contains__(key)

    return pair


def cupy_runtime_record_wait_pair() -> Callable[[], None]:
    """cudaEventRecord + cudaStreamWaitEvent through CuPy's Cython runtime functions, handles as ints: the thinnest
    Python binding of the two calls there is (no objects, no checks beyond CUDA's)."""
    ev = cupy.cuda.Event(disable_timing=True)
    a, b = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    record, wait = cupy.cuda.runtime.eventRecord, cupy.cuda.runtime.streamWaitEvent
    event, first, second = ev.ptr, a.ptr, b.ptr

    def pair():
        record(event, first)
        wait(second, event, 0)

    pair.keep = (ev, a, b)  # the handles stay valid while the loop runs
    return pair


def cw_record_wait_paired(cfg: Config) -> dict[str, float]:
    """cw_record_wait in turn with raw CUDA's record + wait loop in this process; beside it, Python's floor for the
    pair, the thinnest binding of it (CuPy's runtime functions), cuweave's one-call form, b.wait(a), and raw CUDA's
    loop through the driver's entry points, which cuweave calls (Note [Hot calls through the driver])."""
    pair, floor = cw_record_wait_pair(), python_method_pair()
    result = paired_with_raw_here(functools.partial(per_call_us, pair, cfg.n),
                                  lambda: raw_in_process().raw_event_record_wait_us(1, cfg.n), cfg)
    result[PYTHON_FLOOR] = time_per_call(floor, cfg.n, cfg.reps)
    if cupy is not None:
        result[THINNEST_BINDING] = time_per_call(cupy_runtime_record_wait_pair(), cfg.n, cfg.reps)
    a, b = cw.Stream(), cw.Stream()
    result[ONE_CALL_WAIT] = time_per_call(functools.partial(b.wait, a), cfg.n, cfg.reps)
    result[RAW_THROUGH_DRIVER] = raw_in_process().raw_event_record_wait_driver_us(cfg.reps, cfg.n)
    return result


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


ROWS: dict[str, Row] = {
    "record_wait": Row(
        "event record + stream wait, per pair", "us", 0.40, "event_record_wait_us",
        {"cuweave": cw_record_wait_paired, "torch": torch_record_wait, "cupy": cupy_record_wait}),
    "with_stream": Row(
        "`with stream:` enter + exit", "us", 0.35, None,
        {"cuweave": cw_with_stream, "torch": torch_with_stream, "cupy": cupy_with_stream}),
}
