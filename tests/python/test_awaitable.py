"""Transfers and events can be awaited from asyncio without blocking the event loop."""

from __future__ import annotations

import asyncio

import numpy as np

import cuweave as cw
from _support import Gate


def test_await_a_transfer_returns_its_destination(stream):
    async def main():
        device = cw.to_device(np.arange(1000.0), stream=stream)
        host = cw.pinned_zeros(1000)
        result = await cw.copy_async(host, device, stream=stream)
        return result, host

    result, host = asyncio.run(main())
    assert result is host
    assert np.array_equal(host, np.arange(1000.0))


def test_await_an_event_lets_other_tasks_run(stream):
    # The event is held behind a gate that only another task opens, after a few ticks of the loop: the
    # await returns only if the loop ran that task while it waited.
    ticks = []

    with Gate(stream) as gate:

        async def ticker_that_opens_the_gate():
            for _ in range(10):
                ticks.append(1)
                await asyncio.sleep(0)
            gate.open()

        async def main():
            event = stream.record()
            assert event.query() is False  # something to wait for, by construction
            task = asyncio.create_task(ticker_that_opens_the_gate())
            await event
            ticks_at_return = len(ticks)
            await task
            return event.query(), ticks_at_return

        done, ticks_at_return = asyncio.run(main())
    assert done is True
    assert ticks_at_return == 10, "the event loop was blocked while waiting"
