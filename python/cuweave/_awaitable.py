"""asyncio support: ``await transfer`` and ``await event`` wait without blocking the event loop (Transfer.__await__
and Event.__await__, bound in bindings/, call these)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any

_FIRST_POLL_S = 50e-6
_LONGEST_POLL_S = 2e-3


async def _poll(done: Callable[[], bool]) -> None:
    # Polls with a growing interval: completion is seen within about 2 ms, and a copy that finishes
    # in microseconds is not held up by a thread hand-off.
    delay = _FIRST_POLL_S
    while not done():
        await asyncio.sleep(delay)
        delay = min(delay * 2, _LONGEST_POLL_S)


def transfer_await(transfer: Any) -> Generator[Any, None, Any]:
    async def wait() -> Any:
        await _poll(transfer.query)
        return transfer.wait()  # completed: returns at once and releases what the copy held

    return wait().__await__()


def event_await(event: Any) -> Generator[Any, None, None]:
    return _poll(event.query).__await__()
