"""Libraries taking turns within each repetition, so that a shared machine's drift weighs on all of them alike."""

from __future__ import annotations

import functools
import statistics
from typing import Callable

import libraries
from timing import Config, gc_disabled


# Rows whose libraries take turns within each repetition (in_turn_row). On the shared machines a row's figures
# drift from one minute to the next in every library alike (copy rates between about 71 and 93 GB/s,
# tools/probes/duplex_probe.py; a host-driven loop round between 16 and 21 us, host_loop_round_probe.py), and
# measured one library after the other, that drift decided the row.

# Builds one library's work and returns the measurement of one repetition of it.
InTurnSetup = Callable[[], Callable[[], float]]


def setup_of(build: Callable[[], object], measure: Callable[[object], float]) -> InTurnSetup:
    """The setup that builds the work with build() and measures a repetition with measure(work)."""
    return lambda: functools.partial(measure, build())


def in_turn(setups: dict[str, InTurnSetup], reps: int) -> dict[str, float | Exception]:
    """Each library's figure (or what its setup raised), the libraries taking turns within each repetition, the
    first of them rotating: a warm-up repetition, then `reps`; medians."""
    return {lib: samples if isinstance(samples, Exception) else statistics.median(samples)
            for lib, samples in in_turn_samples(setups, reps).items()}


def in_turn_samples(setups: dict[str, InTurnSetup], reps: int) -> dict[str, list[float] | Exception]:
    """in_turn's repetitions themselves: each library's `reps` figures in the order measured (the i-th of each
    taken in the same repetition), or what its setup raised."""
    measures: dict[str, Callable[[], float]] = {}
    results: dict[str, list[float] | Exception] = {}
    for lib, setup in setups.items():
        try:
            measures[lib] = setup()
        except Exception as exc:  # noqa: BLE001 -- reported as that library's error in the row
            results[lib] = exc
    figures: dict[str, list[float]] = {lib: [] for lib in measures}
    order = list(measures)
    with gc_disabled():
        for rep in range(reps + 1 if order else 0):
            for lib in order[rep % len(order):] + order[:rep % len(order)]:
                figure = measures[lib]()
                if rep > 0:
                    figures[lib].append(figure)
    results.update(figures)
    return results


@functools.cache
def in_turn_results(cfg: Config, setups_of: Callable[[Config], dict[str, InTurnSetup]]) -> dict:
    """in_turn over the loaded libraries of setups_of(cfg), once per row (its measures share the result)."""
    loaded = libraries.loaded()
    return in_turn({lib: setup for lib, setup in setups_of(cfg).items() if loaded[lib] is not None}, cfg.reps)


def in_turn_figure(cfg: Config, setups_of: Callable[[Config], dict[str, InTurnSetup]], lib: str) -> float:
    result = in_turn_results(cfg, setups_of)[lib]
    if isinstance(result, Exception):
        raise result
    return result

