"""Prefetching NumPy batches to the GPU while the GPU works on earlier ones."""

from __future__ import annotations

import atexit
import queue
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from cuweave import _core

_END = object()
_live: weakref.WeakSet[prefetch] = weakref.WeakSet()
_copy_streams: dict[int, _core.StreamPool] = {}  # per device
_copy_streams_lock = threading.Lock()


def _copy_stream_lease(device: int) -> tuple[_core.Stream, _core.StreamLease | None]:
    """A stream of `device` reserved from cuweave's copy-stream pool, or a new one when all are taken."""
    with _copy_streams_lock:
        pool = _copy_streams.get(device)
        if pool is None:
            pool = _copy_streams[device] = _core.StreamPool(4, name="prefetch", device=device)
    try:
        lease = pool.reserve(timeout=0)
    except TimeoutError:
        return _core.Stream(name="prefetch", device=device), None
    return lease.stream, lease


def _map_batch(fn: Callable[[Any], Any], batch: Any) -> Any:
    """fn applied to every leaf of a batch: an array, or a tuple, list or dict of batches."""
    if isinstance(batch, dict):
        return {key: _map_batch(fn, value) for key, value in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_map_batch(fn, value) for value in batch)
    return fn(batch)


def _to_device(batch: Any, stream: _core.Stream) -> Any:
    """Copies a NumPy array, or a tuple, list or dict of them, to the device on `stream`, all in one batch."""
    leaves: list[np.ndarray] = []

    def collect(leaf: Any) -> int:
        if not isinstance(leaf, np.ndarray):
            raise TypeError(
                "prefetch() takes batches of NumPy arrays (or tuples, lists or dicts of them), "
                f"not {type(leaf).__name__}"
            )
        leaves.append(np.ascontiguousarray(leaf))
        return len(leaves) - 1

    places = _map_batch(collect, batch)
    copied = _core.to_device_batch(leaves, stream=stream)
    return _map_batch(lambda place: copied[place], places)


def _hand_over(batch: Any, consumer: _core.Stream) -> None:
    # The consumer already waits for this batch's event: no second wait.
    _map_batch(lambda array: array.handoff(consumer, wait=False), batch)


class _State:
    """What the background thread shares with the iterator (never the iterator itself, so that
    dropping the iterator collects it and stops the thread)."""

    def __init__(self, source: Iterator[Any], depth: int, stream: _core.Stream) -> None:
        self.source = source
        self.ready: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.stream = stream
        # The traces open where the iterator was made also record its copies (with that call site).
        self.origin = _core._TraceOrigin()

    def produce(self) -> None:
        with self.origin:
            self._produce()

    def _produce(self) -> None:
        try:
            for batch in self.source:
                if self.stop.is_set():
                    return
                on_device = _to_device(batch, self.stream)
                done = self.stream.record()
                if not self._put((on_device, done)):
                    return
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, raised there
            self._put(error)
            return
        self._put(_END)

    def _put(self, item: Any) -> bool:
        while not self.stop.is_set():
            try:
                self.ready.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False


def _shut_down(state: _State, thread: threading.Thread, lease: _core.StreamLease | None) -> None:
    state.stop.set()
    while True:  # unblock a producer waiting for room
        try:
            state.ready.get_nowait()
        except queue.Empty:
            break
    if thread is not threading.current_thread():
        thread.join()
    try:
        state.stream.synchronize()  # copies already queued finish before the stream is reused or closed
    finally:  # also when the wait raised (a failed copy, a lost context): the stream goes back all the same
        if lease is not None:
            lease.release()
        elif not state.stream.closed:
            state.stream.close()


class prefetch:  # noqa: N801 - used like a builtin: `for batch in cuweave.prefetch(batches):`
    """Iterates over device copies of NumPy batches, reading ``depth`` batches ahead.

    A background thread takes batches from ``source`` (NumPy arrays, or tuples, lists or dicts of
    them) and copies them to the GPU on a stream of its own (large pageable arrays go through pinned
    staging on several threads). Each batch is handed over ordered before the consumer's current
    stream by an event wait, so kernels the consumer queues see the data; the host never waits for a
    copy. Arrays are freed in the consumer stream's order once dropped. An exception from ``source``
    is re-raised by the iterator with its traceback. Leaving early (``break``), ``close()``, garbage
    collection or interpreter exit stop the thread and release the stream.
    """

    def __init__(self, source: Iterable[Any], depth: int = 2) -> None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be an int >= 1, not {depth!r}")
        # The batches go to the device of the stream that will use them (the current stream's, here).
        stream, lease = _copy_stream_lease(_core.current_stream().device)
        self._state = _State(iter(source), depth, stream)
        self._thread = threading.Thread(target=self._state.produce, name="cuweave-prefetch", daemon=True)
        self._finalizer = weakref.finalize(self, _shut_down, self._state, self._thread, lease)
        self._closed = False
        _live.add(self)
        self._thread.start()

    def __iter__(self) -> prefetch:
        return self

    def __next__(self) -> Any:
        if self._closed:
            raise StopIteration
        item = self._state.ready.get()  # waits for the producer (the GIL is released while waiting)
        if item is _END:
            self.close()
            raise StopIteration
        if isinstance(item, BaseException):
            self.close()
            raise item
        batch, done = item
        consumer = _core.current_stream()
        consumer.wait(done)
        _hand_over(batch, consumer)
        return batch

    def close(self) -> None:
        """Stops the background thread and releases its stream (idempotent)."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> prefetch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@atexit.register
def _close_all() -> None:
    for live in list(_live):
        live.close()


__all__ = ["prefetch"]
