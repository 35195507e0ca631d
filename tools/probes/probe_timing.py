"""What the Python probes share: a step's host µs per call."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def per_call_us(step: Callable[[], object], calls: int, rounds: int) -> float:
    """The median over `rounds` rounds of `calls` calls of `step`, in host µs per call."""
    samples = []
    for _ in range(rounds):
        began = time.perf_counter()
        for _ in range(calls):
            step()
        samples.append((time.perf_counter() - began) / calls * 1e6)
    return statistics.median(samples)
