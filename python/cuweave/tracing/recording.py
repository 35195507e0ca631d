"""``cuweave.trace()`` and ``Trace``: opening a trace around a block, and building its events and lanes from
what the core recorded (placing the event records and waits whose times the backend did not observe)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable
from typing import Any

from cuweave import _core
from cuweave.tracing import export as _export
from cuweave.tracing import plot as _plot
from cuweave.tracing import summary as _summary
from cuweave.tracing import svg as _svg
from cuweave.tracing.events import KINDS, CallSite, Lane, TraceEvent


def _stream_lane_label(stream: int, info: tuple | None) -> str:
    if info is None:
        return f"stream {stream}"
    _, _, kind, priority, blocking, name = info
    if kind == "legacy_default":
        return "legacy default stream"
    if kind == "per_thread_default":
        return "per-thread default stream"
    text = name or f"stream {stream}"
    details = []
    if kind == "pooled":
        details.append("pool")
    elif kind == "external":
        details.append("adopted")
    if priority != 0:
        details.append(f"priority {priority}")
    if blocking:
        details.append("blocking")
    return f"{text} ({', '.join(details)})" if details else text


class Trace:
    """The record of one ``with cuweave.trace():`` block (see the module docs).

    Event records and waits whose GPU time the backend does not observe (CUDA stream waits, and event
    records when CUPTI gives no device timestamp) are placed where they took effect: a record at the end of
    the work queued before it on its stream, a wait at the later of its record and that point on its own
    stream; such events have ``placed=True``.
    """

    def __init__(self, *, all_threads: bool = False, limit: int | None = None, keep: str = "last") -> None:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"limit must be a positive number of events (or None: keep them all), not {limit!r}")
        self._session = _core.TraceSession(all_threads=all_threads, limit=limit, keep=keep)
        self._events: list[TraceEvent] | None = None
        self._lanes: list[Lane] = []

    # Recording ---------------------------------------------------------------------------------------
    def __enter__(self) -> Trace:
        self._session.begin()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._session.end()

    @property
    def recording(self) -> bool:
        return self._session.recording

    @property
    def limit(self) -> int | None:
        """The most events this trace keeps (None: all of them)."""
        return self._session.limit

    @property
    def keep(self) -> str:
        """Which events a trace with a limit keeps: ``"first"`` or ``"last"``."""
        return self._session.keep

    @property
    def dropped(self) -> int:
        """How many events ran beyond the limit and were not kept: the latest ones with ``keep="first"``,
        the earliest with ``keep="last"``."""
        return self._session.dropped

    @property
    def backend(self) -> str:
        """``"cuda"`` (GPU times from CUPTI) or ``"sim"`` (the simulator's host times)."""
        return self._session.backend

    # What ran ------------------------------------------------------------------------------------------
    @property
    def events(self) -> list[TraceEvent]:
        """Everything recorded, by start time."""
        if self._events is None:
            if self._session.recording:
                raise RuntimeError("this trace is still open; read it after its `with` block")
            if self._session.begin_ns == 0:
                raise RuntimeError("this trace never ran; use it as `with cuweave.trace() as t:`")
            self._events = self._build()
        return self._events

    @property
    def lanes(self) -> list[Lane]:
        """The timeline's rows: each device's streams (legacy default first, then in order of first use),
        then each host thread's ranges."""
        self.events  # noqa: B018  (builds the lanes)
        return self._lanes

    @property
    def duration_ns(self) -> int:
        """From the trace's start to the end of the last thing that ran in it."""
        return max((event.end_ns for event in self.events), default=0)

    def kinds(self) -> Counter[str]:
        return Counter(event.kind for event in self.events)

    def select(self, kind: str | Iterable[str] | None = None, *, stream: Any = None,
               lane: Lane | None = None) -> list[TraceEvent]:
        """Events of a kind (or kinds), on a stream (a cuweave.Stream or a stream id) or lane."""
        kinds = {kind} if isinstance(kind, str) else set(kind) if kind is not None else None
        if kinds is not None and not kinds <= set(KINDS):
            raise ValueError(f"unknown kind(s) {sorted(kinds - set(KINDS))}; kinds are {', '.join(KINDS)}")
        stream_id = _stream_id(stream, self) if stream is not None else None
        return [
            e for e in self.events
            if (kinds is None or e.kind in kinds)
            and (stream_id is None or (e.stream, e.device) == stream_id)
            and (lane is None or e.lane == lane)
        ]

    # Views ---------------------------------------------------------------------------------------------
    def summary(self) -> _summary.TraceSummary:
        """Per stream: busy time, overlap with other streams, idle gaps; per kind: count and total time."""
        return _summary.summarize(self)

    def plot(self, ax: Any = None, **options: Any) -> Any:
        """A Gantt chart with matplotlib (one lane per stream, grouped by device; colours by kind; copies
        labelled with GB/s; event waits as arrows between lanes). Returns the matplotlib Figure; without
        matplotlib, the same chart as SVG (:meth:`svg`)."""
        return _plot.plot(self, ax=ax, **options)

    def svg(self, *, title: str | None = None, width: int = 1100, labels: bool = True,
            time_unit: str = "auto") -> Any:
        """The timeline as SVG, drawn with no dependency: a ``str`` that Jupyter shows inline and whose
        ``save(path)`` writes it. The chart of :meth:`plot`, ``width`` pixels wide; each bar names its work and
        duration on hover."""
        return _svg.timeline_svg(self, title=title, width=width, labels=labels, time_unit=time_unit)

    def export(self, path: str | Any) -> Any:
        """Writes a Chrome trace / Perfetto JSON file (open it in ui.perfetto.dev or chrome://tracing)."""
        return _export.export(self, path)

    def _repr_html_(self) -> str:
        return _plot.html_view(self)

    def __repr__(self) -> str:
        if self._session.recording:
            return "<cuweave.Trace recording>"
        if self._session.begin_ns == 0:
            return "<cuweave.Trace not started>"
        counts = ", ".join(f"{n} {k}" for k, n in sorted(self.kinds().items()))
        dropped = f"; {self.dropped} more not kept (limit {self.limit})" if self.dropped else ""
        return (f"<cuweave.Trace {self.backend}: {len(self.events)} events on {len(self.lanes)} lanes over "
                f"{self.duration_ns / 1e6:.3f} ms ({counts or 'nothing ran'}){dropped}>")

    # Building ------------------------------------------------------------------------------------------
    def _build(self) -> list[TraceEvent]:
        begin = self._session.begin_ns
        raw = self._session.activities()
        labels = {(info[1], info[0]): info for info in self._session.streams()}
        devices_of_stream: dict[int, int] = {}
        for info in labels.values():
            devices_of_stream.setdefault(info[0], info[1])
        for row in raw:
            if row[4] >= 0 and row[5]:
                devices_of_stream.setdefault(row[5], row[4])

        lanes: dict[tuple, Lane] = {}
        first_use: dict[tuple, tuple[int, int]] = {}

        def lane_for(kind: str, device: int, stream: int, thread: int) -> Lane:
            if kind == "range":
                key = ("ranges", thread)
                label = f"ranges, thread {thread}"
                lane = lanes.get(key) or Lane(key, label, None, None, thread)
            else:
                key = ("stream", device, stream)
                lane = lanes.get(key) or Lane(key, _stream_lane_label(stream, labels.get((device, stream))),
                                              device, stream)
            lanes[key] = lane
            return lane

        events: list[TraceEvent] = []
        for (kind, name, start, end, device, stream, nbytes, direction, correlation, link, site, thread, depth,
             graph_node) in raw:
            if kind != "range" and device < 0:
                device = devices_of_stream.get(stream, 0)
            lane = lane_for(kind, device, stream, thread)
            observed = start != 0 or end != 0
            events.append(TraceEvent(
                kind=kind, name=name,
                start_ns=start - begin if observed else 0, end_ns=end - begin if observed else 0,
                device=None if kind == "range" else device, stream=None if kind == "range" else stream,
                lane=lane, bytes=nbytes, direction=direction or None,
                call_site=CallSite(*site) if site is not None else None,
                correlation=correlation, link=link, thread=thread, depth=depth, graph_node=graph_node,
                placed=not observed,
            ))
        events = _place_unobserved(events)
        events.sort(key=lambda e: (e.start_ns, e.correlation, e.depth))
        for event in events:
            first_use.setdefault(event.lane.key, (event.start_ns, event.correlation))
        self._lanes = sorted(lanes.values(), key=lambda lane: _lane_order(lane, first_use))
        return events


def _lane_order(lane: Lane, first_use: dict[tuple, tuple[int, int]]) -> tuple:
    if lane.device is None:
        return (1, 0, 0, first_use.get(lane.key, (0, 0)))
    legacy = 0 if lane.label == "legacy default stream" else 1
    return (0, lane.device, legacy, first_use.get(lane.key, (0, 0)))


def _place_unobserved(events: list[TraceEvent]) -> list[TraceEvent]:
    """Gives event records and waits without an observed time the time they took effect (see Trace)."""
    if all(not e.placed for e in events):
        return events
    by_stream: dict[tuple, list[int]] = {}
    for index, event in enumerate(events):
        if event.kind != "range":
            by_stream.setdefault(event.lane.key, []).append(index)
    # Per stream, in issue order: when the work issued before each event was done.
    work_done_before: dict[int, int] = {}
    for indices in by_stream.values():
        indices.sort(key=lambda i: events[i].correlation)
        latest = 0
        for i in indices:
            e = events[i]
            work_done_before[i] = latest
            if not e.placed and e.kind not in ("event_record", "event_wait", "host_callback"):
                latest = max(latest, e.end_ns)
    placed: dict[int, int] = {}
    records: dict[int, int] = {}  # link -> time
    for i, e in enumerate(events):
        if e.kind == "event_record":
            if e.placed:
                placed[i] = work_done_before[i]
            if e.link:
                records[e.link] = placed.get(i, e.end_ns)
    for i, e in enumerate(events):
        if e.placed and e.kind == "event_wait":
            placed[i] = max(records.get(e.link, 0), work_done_before[i])
    return [dataclasses.replace(e, start_ns=placed[i], end_ns=placed[i]) if i in placed else e
            for i, e in enumerate(events)]


def _stream_id(stream: Any, trace: Trace) -> tuple[int, int]:
    """(stream id, device) of a cuweave.Stream (by its lane name or handle) or a raw id."""
    if isinstance(stream, int):
        matches = {(e.stream, e.device) for e in trace.events if e.stream == stream}
        if len(matches) == 1:
            return matches.pop()
        return (stream, 0)
    return (_core.trace_stream_id(stream), stream.device)


def trace(*, all_threads: bool = False, limit: int | None = None, keep: str = "last") -> Trace:
    """Records what the GPU runs inside ``with cuweave.trace() as t:`` (see the module docs).

    all_threads: also record what other threads issue (by default, only this thread and cuweave's helper
    threads working for it).
    limit: keep at most this many events, so that a long program's trace stays within memory: while
    recording, each event takes about 150 bytes (more for a kernel name of over 15 characters), and once
    read (``t.events``) about 900 bytes more (1M events on the simulator: 156 MB recorded).
    keep: with a limit, ``"last"`` (the default) keeps the latest events, ``"first"`` the earliest;
    ``t.dropped`` counts the others.
    """
    return Trace(all_threads=all_threads, limit=limit, keep=keep)


__all__ = ["KINDS", "CallSite", "Lane", "Trace", "TraceEvent", "trace"]
