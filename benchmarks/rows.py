"""A row of the table: its title, unit, target, raw CUDA counterpart and one measurement per library."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

from in_turn import InTurnSetup, in_turn_figure
from timing import Config

HIGHER_IS_BETTER_UNITS = ("GB/s", "ratio")


@dataclass(frozen=True)
class Row:
    title: str
    unit: str                   # "us" or "ms" (lower is better), "GB/s" or "ratio" (higher is better)
    target: float | None        # the cuweave target, None where this issue sets none
    raw_key: str | None         # key in raw_cuda's JSON; None where raw CUDA has no counterpart
    measure: dict[str, Callable[[Config], float]] = field(default_factory=dict)  # lib -> measurement

    @property
    def higher_is_better(self) -> bool:
        return self.unit in HIGHER_IS_BETTER_UNITS


def in_turn_row(title: str, unit: str, target: float | None, raw_key: str | None,
                setups_of: Callable[[Config], dict[str, InTurnSetup]], libraries: dict) -> Row:
    """A row whose libraries take turns within each repetition (in_turn)."""
    return Row(title, unit, target, raw_key,
               {lib: functools.partial(in_turn_figure, setups_of=setups_of, lib=lib) for lib in libraries})

