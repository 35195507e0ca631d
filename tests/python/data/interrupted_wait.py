"""A child process for test_interrupts.py: it starts one blocking wait that cannot end by itself, reports
when it was interrupted (SIGINT from the parent), then opens the gate and checks that the same wait now
completes with the right data (the interrupted wait left cuweave's state valid).

Usage: python interrupted_wait.py KIND   (KIND: one of WAITS below)
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time

import numpy as np

import cuweave as cw

# Ctrl-C raises KeyboardInterrupt, as in a terminal, even where the parent runs with SIGINT ignored (under nohup,
# or a CI runner's background job): a child inherits an ignored signal, and Python then leaves it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)

gate = threading.Event()
stream = cw.Stream(name="held")
# By construction the stream cannot move on until the gate opens: a stream-ordered callback waits for it.
stream.launch_host_func(gate.wait, ordered=True)
# Pinned, so that uploading it queues a DMA and returns (a pageable source may make CUDA wait for the stream).
data = cw.pinned_empty((1 << 16,), np.float32)
data[:] = np.arange(data.size, dtype=np.float32)


def stream_synchronize():
    return stream.synchronize, None


def event_synchronize():
    return stream.record().synchronize, None


def device_synchronize():
    return cw.synchronize, None


def transfer_wait():
    device = cw.to_device(data, stream=stream)
    out = cw.pinned_empty(data.shape, data.dtype)
    transfer = cw.copy_async(out, device, stream=stream)
    return transfer.wait, lambda: np.array_equal(transfer.wait(), data)


def to_numpy():
    device = cw.to_device(data, stream=stream)

    def wait():
        return device.to_numpy(stream=stream)

    return wait, lambda: np.array_equal(device.to_numpy(stream=stream), data)


def pool_reserve():
    pool = cw.StreamPool(1)
    lease = pool.reserve()

    def check():
        lease.release()
        with pool.reserve(timeout=10):
            return True

    return pool.reserve, check


def prefetch_next():
    def batches():
        gate.wait()
        yield {"x": data}

    batches_ahead = iter(cw.prefetch(batches(), depth=1))

    def check():
        batch = next(batches_ahead)
        return np.array_equal(batch["x"].to_numpy(), data)

    return lambda: next(batches_ahead), check


def awaited():
    device = cw.to_device(data, stream=stream)
    out = cw.pinned_empty(data.shape, data.dtype)
    transfer = cw.copy_async(out, device, stream=stream)

    async def wait():
        await transfer

    return lambda: asyncio.run(wait()), lambda: (asyncio.run(wait()), np.array_equal(out, data))[1]


WAITS = {
    f.__name__: f
    for f in (
        stream_synchronize,
        event_synchronize,
        device_synchronize,
        transfer_wait,
        to_numpy,
        pool_reserve,
        prefetch_next,
        awaited,
    )
}

if __name__ == "__main__":
    wait, check = WAITS[sys.argv[1]]()
    print("waiting", flush=True)
    try:
        wait()
    except KeyboardInterrupt:
        print(f"interrupted {time.monotonic()!r}", flush=True)
    else:
        print("the wait returned although its work was held", flush=True)
        sys.exit(1)
    gate.set()
    if check is None:
        wait()
    elif not check():
        print("wrong data after the interrupted wait", flush=True)
        sys.exit(1)
    stream.synchronize()
    print("ok", flush=True)
