"""Event-based timing of the GPU work queued inside a block."""

from __future__ import annotations

from cuweave import _core


class Timer:
    """``with cuweave.timer(stream) as t: ...`` then ``t.ms``: GPU milliseconds between the block's
    start and end on ``stream`` (default: the current stream at entry). Reading ``ms`` waits for the
    end event; the block itself does not wait."""

    __slots__ = ("_stream", "_start", "_end")

    def __init__(self, stream: object = None) -> None:
        self._stream = stream
        self._start: _core.Event | None = None
        self._end: _core.Event | None = None

    def __enter__(self) -> Timer:
        stream = _core.current_stream() if self._stream is None else self._stream
        self._stream = stream
        self._start = _core.Event(timing=True)
        self._end = _core.Event(timing=True)
        self._start.record(stream)
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._end is not None
        self._end.record(self._stream)

    def __repr__(self) -> str:
        if self._start is None or self._end is None:
            return "<cuweave.Timer, not run>"
        if not self._end.recorded:
            return f"<cuweave.Timer on {self._stream!r}, timing>"
        if not self._end.query():
            return f"<cuweave.Timer on {self._stream!r}, its work still running>"
        return f"<cuweave.Timer on {self._stream!r}: {self.ms:.3f} ms>"

    @property
    def ms(self) -> float:
        if self._start is None or self._end is None or not self._end.recorded:
            raise ValueError("the timer has not run; use it as `with cuweave.timer() as t:` first")
        self._end.synchronize()
        return self._start.elapsed_time(self._end)


def timer(stream: object = None) -> Timer:
    """``with cuweave.timer(stream) as t:`` then ``t.ms``: the GPU time of the block's work (see Timer)."""
    return Timer(stream)
