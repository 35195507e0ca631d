"""The stream-race sanitizer's switch: ``with cuweave.sanitize():`` (or ``CUWEAVE_SANITIZE=1`` for a process)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from cuweave import _core, _cupy_hooks, _torch_hooks


@contextlib.contextmanager
def sanitize(*, on_race: str = "raise") -> Iterator[None]:
    """Checks every stream-ordered operation issued inside the block against what came before it: two
    operations that touch the same bytes, at least one writing, with no event, wait or synchronize
    ordering them, raise ``cuweave.RaceError`` naming both operations, their streams and both call sites
    (``on_race="warn"``: a ``cuweave.RaceWarning`` instead, and the work is queued; ``on_race="ignore"``
    inside a sanitized block: a race you want, tracked but not reported). Off by default; costs one relaxed
    load per operation when off. Nestable: the innermost block's ``on_race`` applies. In a process that
    imported PyTorch, its operators on this thread, its events and its synchronizes are checked too; in one
    that imported CuPy, the kernels CuPy generates (each array argument a read when its parameter is const,
    else a write) and its events."""
    # Note [CuPy under the sanitizer]
    _core.sanitizer.enable(on_race)
    attached = cupy_attached = False
    try:
        attached = _torch_hooks.attach()
        cupy_attached = _cupy_hooks.attach()
        yield
    finally:
        _core.sanitizer.disable()
        if cupy_attached:
            _cupy_hooks.detach()
        if attached:
            _torch_hooks.detach(attached)


def sanitizing() -> bool:
    """Whether the stream-race sanitizer checks operations now (inside ``with cuweave.sanitize():`` or with
    ``CUWEAVE_SANITIZE`` set). Its checks take host time (it reads every pinned byte a copy reads, twice):
    rates measured on the host while it is on are the sanitizer's, not the hardware's."""
    return _core.sanitizer.enabled()


def enable_from_environment(value: str | None) -> None:
    """``CUWEAVE_SANITIZE``: ``1`` or ``raise`` turns the sanitizer on for the whole process, ``warn`` in
    warning mode; empty or ``0`` leaves it off."""
    if value in (None, "", "0"):
        return
    if value not in ("1", "raise", "warn"):
        raise ValueError(f"CUWEAVE_SANITIZE={value!r}: expected 1, raise, warn or 0")
    _core.sanitizer.enable("warn" if value == "warn" else "raise")
    _torch_hooks.attach()  # PyTorch, if imported before cuweave (Note [PyTorch under the sanitizer])
    _cupy_hooks.attach()  # CuPy, now or at its import (Note [CuPy under the sanitizer])
