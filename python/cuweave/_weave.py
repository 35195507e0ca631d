"""``cuweave.weave()``: sequential code placed on concurrent streams, ordered by what each operation reads and
writes (Note [Weaving] in csrc/include/cuweave/weave.hpp)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType

from cuweave import _core, _cupy_hooks, _torch_hooks


@dataclass(frozen=True)
class WeaveCounts:
    """What a weave queued to order its streams: ``records`` events and ``waits`` stream waits for
    ``operations`` operations; ``per_stream`` the operations each stream took, the current stream first."""

    operations: int
    records: int
    waits: int
    per_stream: tuple[int, ...]


class Weave:
    """A ``with`` block whose cuweave operations the library places on several streams: see :func:`weave`."""

    def __init__(self, streams: int | _core.StreamPool = 4) -> None:
        if isinstance(streams, _core.StreamPool):
            self._pool: _core.StreamPool | None = streams
            self._count = len(streams) + 1
        elif isinstance(streams, int) and not isinstance(streams, bool):
            if streams < 1:
                raise ValueError(f"weave(streams={streams}) needs at least 1 stream (the current one)")
            self._pool = None
            self._count = streams
        else:
            raise TypeError(f"weave(streams=...) takes a count or a cuweave.StreamPool, not {type(streams).__name__}")
        self._state: _core.WeaveState | None = None
        self._leases: list[_core.StreamLease] = []
        self._ended: _core.WeaveState | None = None  # once the block has ended: its counts, read when asked
        self._torch_attached = False
        self._cupy_placing = False
        self._captured_cupy = False  # under a capture, whether the graph holds CuPy's work (its stream joined)

    def __enter__(self) -> Weave:
        if self._state is not None:
            raise ValueError("this weave is already open; make a new cuweave.weave() to weave again")
        if self._pool is None:
            self._state = _core.WeaveState.begin_on_current(self._count)
        else:
            self._state = self._begin_on(self._pool)
        try:
            # PyTorch's operators on this thread (Note [PyTorch under a weave]), and CuPy's kernels (Note [Other
            # libraries' kernels in a weave])
            self._torch_attached = _torch_hooks.attach(weave=True)
            self._cupy_placing = _cupy_hooks.begin_placing()
        except BaseException as error:
            self.__exit__(type(error), error, error.__traceback__)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        state = self._state
        if state is None:
            return
        try:
            if self._cupy_placing:
                # Before the weave's end: under a capture, CuPy's streams that joined it are joined back first.
                self._cupy_placing = False
                self._captured_cupy = _cupy_hooks.end_placing()
            state.end()  # the current stream follows everything the block queued; no host wait
        except BaseException:
            if exc is None:
                raise
            # The body's exception is the one to see; the end's failure (a broken context) rides along.
        finally:
            placing_failure = None
            if self._torch_attached:
                attached, self._torch_attached = self._torch_attached, False
                try:
                    _torch_hooks.detach(attached)
                except Exception as error:  # what PyTorch's C++ hook met: raised once the block is cleaned up
                    placing_failure = error
            if _core.weave.active():  # CuPy's end failed before the weave's: end it still (its failure rides along)
                with contextlib.suppress(Exception):
                    state.end()
            self._ended = state
            self._state = None
            if self._leases:
                self._release()
            if placing_failure is not None and exc is None:
                raise placing_failure

    def _begin_on(self, pool: _core.StreamPool) -> _core.WeaveState:
        """The weave's state on the current stream and every stream of `pool`, reserved for the block."""
        first = _core.current_stream()
        if pool.device != first.device:
            raise ValueError(f"the StreamPool is on device {pool.device}, the current stream on device "
                             f"{first.device}; pass a pool of the current stream's device")
        self._leases = [pool.reserve() for _ in range(len(pool))]
        try:
            return _core.WeaveState.begin(first, [lease.stream for lease in self._leases])
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        for lease in self._leases:
            lease.release()
        self._leases = []

    def __repr__(self) -> str:
        size = f"{self._count} streams" + (" (a StreamPool and the current stream)" if self._pool is not None else "")
        if self._state is not None:
            return f"<cuweave.Weave {size}, open: {self._counts_text(self._counts_of(self._state))}>"
        if self._ended is not None:
            return f"<cuweave.Weave {size}, ended: {self._counts_text(self._counts_of(self._ended))}>"
        return f"<cuweave.Weave {size}, not entered>"

    @staticmethod
    def _counts_text(counts: WeaveCounts) -> str:
        per_stream = ", ".join(str(n) for n in counts.per_stream)
        return (f"{counts.operations} operations ({per_stream} by stream), {counts.records} records, "
                f"{counts.waits} waits")

    @staticmethod
    def _counts_of(state: _core.WeaveState) -> WeaveCounts:
        return WeaveCounts(*state.counts)

    @property
    def counts(self) -> WeaveCounts:
        """The records and waits the weave queued so far (the final ones after the block)."""
        state = self._state or self._ended
        if state is None:
            raise ValueError("this weave has not run yet")
        return self._counts_of(state)

    @contextlib.contextmanager
    def step(self, *, reads: Iterable[object] = (), writes: Iterable[object] = ()) -> Iterator[_core.Stream]:
        """Work the weave cannot see by itself (another library's kernels, a raw launch) as one operation that
        reads ``reads`` and writes ``writes`` (GPU arrays of any library). The weave chooses its stream and
        queues the waits it needs; the block runs with that stream current, and gets it to hand to the other
        library (``__cuda_stream__`` and ``.handle`` speak for it). Everything queued on it inside the block
        is the step."""
        if self._state is None:
            raise ValueError("the weave is not open; use step() inside its with-block")
        ranges = [(*_core.touched_span(a), False) for a in reads]
        ranges += [(*_core.touched_span(a), True) for a in writes]
        stream = _core.weave.place(ranges)
        with stream:
            yield stream

    @property
    def streams(self) -> list[_core.Stream]:
        """The streams of the open weave: the current stream first, then those it may choose, then any named
        with ``stream=`` inside the block."""
        if self._state is None:
            raise ValueError("the weave is not open")
        return list(self._state.streams)


def weave(streams: int | _core.StreamPool = 4) -> Weave:
    """A ``with`` block in which cuweave operations issued without ``stream=`` are placed on ``streams``
    streams (the current stream and ``streams - 1`` more; or the current stream and every stream of a
    ``cuweave.StreamPool``, reserved for the block), with the waits their data needs and no others. When the
    current stream is on an SM partition (``cuweave.Stream(partition=p)``), the streams the weave adds are on
    that partition too:

    - two operations touching overlapping bytes, one of them writing, run in program order (RAW, WAR, WAW);
      independent ones may run at once, on different streams;
    - a chain stays on one stream; a wait that an earlier wait implies is not queued again;
    - ``to_numpy()`` inside the block waits only for the work producing what it reads;
    - an operation runs on a stream of the device its data lives on (what it writes, else what it reads): the
      weave adds as many streams on another device as it first meets that device's data, and a copy between
      devices belongs to its destination's device. A built-in operation that reads another device's array reads
      a copy of it, made on a stream of its own device and kept for later readers until the block writes the
      array. A compiled kernel runs on the device it was loaded on, reaching other devices' arrays through peer
      access;
    - on leaving, the current stream waits for everything the block queued (no host synchronize); an
      exception from the body propagates unchanged, and what was queued stays ordered.

    Under ``cuweave.capture`` (``with cw.capture(s) as cap, cw.weave():``) the same decisions become the
    graph's edges, on the capture's device only. ``stream=`` given inside the block is honoured and its dependencies are still ordered.
    What the weave cannot see into (a conditional node's bodies; a graph holding a host function, or work that
    another library captured and the sanitizer did not see) counts as touching everything: all work before it
    precedes it and all work after follows it; a captured graph otherwise touches what its capture's operations
    touched. PyTorch's operators on this thread, and the kernels CuPy generates, are placed as cuweave's
    own are (CuPy's other work, such as cuBLAS calls and copies, stays on CuPy's stream, which the kernels moved
    off it follow); other libraries' work is not seen: order it yourself. ``with cw.weave() as w:``; ``w.counts`` tells the
    records and waits queued."""
    return Weave(streams)
