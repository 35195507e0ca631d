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
    _core.sim.configure(seed)


def seed() -> int | None:
    """The seed being explored, or None when the simulator runs concurrently."""
    return _core.sim.seed()


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


FAULTS_ENV = "CUWEAVE_SIM_FAULTS"
DEFAULT_FAULT_RATE = 0.02


def parse_faults(text: str) -> tuple[int, float]:
    """``"<seed>[:<rate>]"`` (CUWEAVE_SIM_FAULTS) as (seed, rate); the rate defaults to 0.02."""
    seed_text, _, rate_text = text.strip().partition(":")
    try:
        seed_value = int(seed_text)
        rate = float(rate_text) if rate_text else DEFAULT_FAULT_RATE
    except ValueError:
        raise ValueError(f"{FAULTS_ENV}={text!r}: expected <seed>[:<rate>], e.g. 7 or 7:0.05") from None
    if seed_value < 0 or not 0 < rate <= 1:
        raise ValueError(f"{FAULTS_ENV}={text!r}: the seed must not be negative and the rate must be in (0, 1]")
    return seed_value, rate


FAULT_KINDS = ("allocation", "launch", "sticky_fault", "collective", "absent_rank", "tool_attach")


def inject_faults(seed_value: int | None, rate: float = DEFAULT_FAULT_RATE, *,
                  kinds: tuple[str, ...] | list[str] = FAULT_KINDS) -> None:
    """Fails backend calls from now on as CUDA, NCCL and CUPTI fail them, each with probability ``rate``:
    allocations (cudaErrorMemoryAllocation), launches of built-in kernels and graphs
    (cudaErrorLaunchOutOfResources), kernels that fault as they run (cudaErrorIllegalAddress, after which the
    device's context is lost, as on a GPU), NCCL calls (ncclUnhandledCudaError), a rank's part in a collective that
    never arrives (every rank then waits until its communicator's timeout) and a trace's attaching
    (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED). The same seed fails the same calls of a program that makes
    them in the same order. ``None`` stops injecting. ``CUWEAVE_SIM_FAULTS=<seed>[:<rate>]`` does the same at
    start-up. ``kinds`` chooses among them (default: all of FAULT_KINDS). A lost context stays lost: start a new
    process after a sticky fault."""
    if seed_value is not None and (isinstance(seed_value, bool) or not isinstance(seed_value, int) or seed_value < 0):
        raise ValueError(f"seed must be a non-negative int or None (got {seed_value!r})")
    if not isinstance(rate, (int, float)) or not 0 < rate <= 1:
        raise ValueError(f"rate must be a probability in (0, 1] (got {rate!r})")
    if isinstance(kinds, str) or not all(kind in FAULT_KINDS for kind in kinds):
        raise ValueError(f"kinds must be a list of {', '.join(FAULT_KINDS)} (got {kinds!r})")
    _core.sim.configure_faults(seed_value, float(rate), list(kinds))


def injected_faults() -> list[tuple[str, str]]:
    """The faults injected since inject_faults() (or start-up), in order: (kind, the failed call)."""
    return [tuple(fault) for fault in _core.sim.injected_faults()]


def memory_in_use() -> dict[str, int]:
    """Simulated memory allocated now: device and pinned ranges, registered host ranges, device bytes."""
    return dict(_core.sim.memory_in_use())


def faults_from_environment(text: str | None) -> None:
    """At start-up: CUWEAVE_SIM_FAULTS, if set, on the simulator."""
    if text and _core.backend_name() == "sim":
        inject_faults(*parse_faults(text))


__all__ = ["configure", "explore", "inject_faults", "injected_faults", "memory_in_use", "seed"]
