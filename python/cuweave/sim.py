"""Controls of the host simulator backend (``cuweave.backend() == "sim"``).

By default the simulator runs queued work on worker threads as soon as it is ready, like a GPU.
With a seed it *explores*: work runs only when the host waits, one operation at a time, in an order
drawn from the seed among all the orders the program's declared dependencies allow. A program that
misses a wait then gets wrong results within a few seeds, and the same seed replays the same schedule::

    for seed in range(20):
        with cuweave.sim.explore(seed):
            run_my_pipeline()        # assert on the results inside

``CUWEAVE_SIM_SEED=N`` starts a process exploring with seed N.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from cuweave import _core


def configure(seed: int | None) -> None:
    """Explore schedules with ``seed``, or run concurrently (``None``). Finishes queued work first."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed must be an int or None, not {type(seed).__name__}")
    if seed is not None and seed < 0:
        raise ValueError(f"seed must not be negative (got {seed})")
    _core.sim_configure(seed)


def seed() -> int | None:
    """The seed being explored, or None when the simulator runs concurrently."""
    return _core.sim_seed()


@contextlib.contextmanager
def explore(seed_value: int) -> Iterator[int]:
    """Explores schedules with ``seed_value`` inside the block, then restores the previous mode.

    An exception from the block gets a note naming the seed, so the failing schedule can be replayed.
    """
    previous = seed()
    configure(seed_value)
    try:
        yield seed_value
    except BaseException as error:
        if hasattr(error, "add_note"):  # Python 3.11+
            error.add_note(f"cuweave simulator schedule seed: {seed_value} (replay: cuweave.sim.explore({seed_value}))")
        raise
    finally:
        configure(previous)


__all__ = ["configure", "explore", "seed"]
