"""``cuweave.capture``: record the GPU work of a ``with`` block as a Graph."""

from __future__ import annotations

from cuweave import _core, _torch_hooks


class capture:  # noqa: N801  (a context manager used like a function, as ``cuweave.timer``)
    """Captures the work queued on a stream inside the ``with`` block into ``self.graph``.

    ``stream``: the stream to capture (default: the current stream, or a new non-blocking stream when
    the current one is the legacy default stream, which CUDA cannot capture). Inside the block it is
    the current stream, so cuweave operations without ``stream=`` are captured. Work forked to other
    streams through events (``other.wait(stream.record())``) is captured too, and must be joined back
    (``stream.wait(other.record())``) before the block ends.

    ``mode``: what CUDA refuses while the capture is active: ``"global"`` (default; unsafe calls such as
    synchronizing other streams are refused in every thread), ``"thread_local"`` (in this thread) or
    ``"relaxed"`` (nowhere). cuweave's own bookkeeping is allowed in every mode.

    ``graph_memory``: arrays allocated inside the block become the graph's own memory (allocation and free nodes)
    instead of memory held beside it. An array dropped inside the block is then freed inside the graph, so the
    memory of such temporaries is shared with other graphs' and given back by a trim; an array kept past the block
    has no memory until the first replay, and each replay makes it again at the same address. Such a graph cannot
    be replayed inside another capture or embedded in another graph.

    Nothing runs during capture. An operation that is illegal during capture raises ``CaptureError``
    naming it; an exception from the block propagates unchanged and drops the capture. Either way the
    stream is usable afterwards.
    """

    def __init__(self, stream: _core.Stream | None = None, mode: str = "global", graph_memory: bool = False) -> None:
        self._requested = stream
        self._mode = mode
        self._graph_memory = graph_memory
        self._state: _core.CaptureState | None = None
        self._stream: _core.Stream | None = None
        self._torch_attached = False
        self.graph: _core.Graph | None = None

    @property
    def stream(self) -> _core.Stream | None:
        """The stream being captured (set on entering the block)."""
        return self._stream

    def __enter__(self) -> capture:
        if self._state is not None:
            raise ValueError("a cuweave.capture can be entered once; make a new one")
        stream = self._requested
        if stream is None:
            stream = _core.current_stream()
            if stream == _core.default_stream():  # CUDA cannot capture it
                stream = _core.Stream(blocking=False)
        self._state = _core.begin_capture(stream, self._mode, self._graph_memory)
        self._stream = self._state.stream
        self._stream.__enter__()
        # PyTorch's operators captured are placed and checked by its Python hooks (Note [PyTorch under a weave]).
        self._torch_attached = _torch_hooks.attach_for_capture()
        return self

    def __exit__(self, exc_type, exc, traceback) -> bool:
        assert self._state is not None and self._stream is not None
        if self._torch_attached:
            attached, self._torch_attached = self._torch_attached, False
            _torch_hooks.detach(attached)
        self._stream.__exit__(None, None, None)
        if exc_type is not None:
            self._state.abandon()
            return False  # the body's exception propagates
        self.graph = self._state.end()
        return False
