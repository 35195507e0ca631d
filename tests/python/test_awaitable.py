"""Transfers and events can be awaited from asyncio without blocking the event loop."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import cuweave as cw


def test_await_a_transfer_returns_its_destination(stream):
    async def main():
        device = cw.to_device(np.arange(1000.0), stream=stream)
        host = cw.pinned_zeros(1000)
        result = await cw.copy_async(host, device, stream=stream)
        return result, host

    result, host = asyncio.run(main())
    assert result is host
    assert np.array_equal(host, np.arange(1000.0))


@pytest.mark.real_time  # needs the spin to take time, so that the loop has something to wait for
def test_await_an_event_lets_other_tasks_run(stream):
    ticks = []

    async def ticker():
        for _ in range(1000):
            ticks.append(1)
            await asyncio.sleep(0)

    async def main():
        cw.ops.spin(0.05, stream=stream)
        event = stream.record()
        task = asyncio.create_task(ticker())
        await event
        done = event.query()
        task.cancel()
        return done

    assert asyncio.run(main()) is True
    assert ticks, "the event loop was blocked while waiting"
