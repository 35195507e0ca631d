"""How the benchmarks time things, as the project's targets are measured: medians of repetitions after a warm-up
repetition, host µs per call less the Python call overhead, GB/s, wall ms."""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import statistics
import time
from dataclasses import dataclass
from typing import Callable

N_CALLS = 20_000            # calls per repetition for host costs
REPS = 7                    # timed repetitions (after one warm-up repetition)
QUICK_N_CALLS = 2_000       # --quick: a smoke run, not figures to quote
QUICK_REPS = 3


@dataclass(frozen=True)
class Config:
    n: int      # calls per repetition for host costs
    reps: int   # timed repetitions


call_overhead_us = 0.0  # subtracted by time_per_call; set by run.py's main() unless --gross


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


def per_call_us(fn: Callable[[], object], n: int) -> float:
    """One repetition of time_per_call: host µs per fn() call over n calls."""
    return _loop_ns(fn, n) / n / 1e3 - call_overhead_us


def time_per_call(fn: Callable[[], object], n: int, reps: int) -> float:
    """Host µs per fn() call: wall time of n calls / n, median of `reps` after a warm-up repetition.

    The cost of the Python call to fn itself (calibrate_call_overhead) is subtracted unless --gross, so
    the figure is what fn's body costs when written in place in a `for` loop.
    """
    return median_of(reps, functools.partial(per_call_us, fn, n))


def calibrate_call_overhead(n: int, reps: int) -> float:
    """µs that calling an empty Python function adds to one iteration of a `for` loop."""

    def noop():
        pass

    per_call = median_of(reps, lambda: (_loop_ns(noop, n) - _empty_loop_ns(n)) / n / 1e3)
    return max(per_call, 0.0)


def gbps(nbytes: int, ms: float) -> float:
    """GB/s (1e9 bytes per second) of `nbytes` moved in `ms` milliseconds."""
    return nbytes / 1e9 / (ms / 1e3)


def gbps_of(nbytes: int, one_copy_ms: Callable[[], float], reps: int) -> float:
    """GB/s of a copy whose duration in ms one_copy_ms() returns (event-timed, or wall_ms of a call that
    includes the synchronize): the median of `reps` after a warm-up."""
    return median_of(reps, lambda: gbps(nbytes, one_copy_ms()))


def wall_ms(fn: Callable[[], object]) -> float:
    """Wall ms of one fn() call. What fn returns is dropped after the clock stops, so freeing a result
    (a 256 MB NumPy array, say) is not part of the figure."""
    t0 = time.perf_counter_ns()
    result = fn()
    elapsed_ns = time.perf_counter_ns() - t0
    del result
    return elapsed_ns / 1e6


def launch_cost_rep(launch: Callable[[], object], sync: Callable[[], object], cfg: Config) -> Callable[[], float]:
    """One repetition of launch_cost_us."""

    def run() -> float:
        t0 = time.perf_counter_ns()
        for _ in itertools.repeat(None, cfg.n):
            launch()
        sync()
        return (time.perf_counter_ns() - t0) / cfg.n / 1e3 - call_overhead_us

    return run


def launch_cost_us(launch: Callable[[], object], sync: Callable[[], object], cfg: Config) -> float:
    """µs per launch: wall time of n launches and the final synchronize, / n (as the targets measure it), less
    the Python call overhead of `launch` itself, as in time_per_call."""
    return median_of(cfg.reps, launch_cost_rep(launch, sync, cfg))

