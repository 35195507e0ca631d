"""``cuweave.range``: named ranges of host time, seen by Nsight Systems (NVTX) and by cuweave's traces."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, overload

from cuweave import _core

F = TypeVar("F", bound=Callable[..., Any])


class Range:
    """A named range: ``with cuweave.range("step"):``, or a decorator (``@cuweave.range("step")``, or
    ``@cuweave.range`` to use the function's name).

    Each is an NVTX range (Nsight Systems shows it on the thread's row) and, inside ``cuweave.trace()``, a
    bar on the thread's ranges lane of the trace. Ranges nest; they belong to the thread that opened them.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"a range's name must be a str, not {type(name).__name__}")
        self.name = name

    def __enter__(self) -> Range:
        _core.range_push(self.name)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _core.range_pop()

    def __call__(self, function: F) -> F:
        if not callable(function):
            raise TypeError(f"cuweave.range(...) decorates a callable, not {type(function).__name__}")
        name = self.name

        @functools.wraps(function)
        def ranged(*args: Any, **kwargs: Any) -> Any:
            _core.range_push(name)
            try:
                return function(*args, **kwargs)
            finally:
                _core.range_pop()

        return ranged  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"cuweave.range({self.name!r})"


@overload
def range(name: str) -> Range: ...  # noqa: A001
@overload
def range(name: F) -> F: ...  # noqa: A001
def range(name):  # noqa: A001  (cuweave.range, as NVTX and torch.cuda.nvtx.range name it)
    """A named range (see Range): ``with cuweave.range("step"):`` or ``@cuweave.range``."""
    if callable(name) and not isinstance(name, str):
        return Range(getattr(name, "__qualname__", getattr(name, "__name__", repr(name))))(name)
    return Range(name)


__all__ = ["Range", "range"]
