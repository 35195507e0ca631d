"""``Trace.summary()``: per stream, how long it was busy, overlapped other streams and sat idle; per kind,
how many operations ran and for how long.

Busy time is the length of the union of a stream's intervals, so work that nests on one stream (a graph
replay and its nodes) is counted once; zero-length events (placed event records and waits) add nothing.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Iterable, Sequence
from typing import Any

from cuweave.tracing.events import KINDS, Lane, TraceEvent, format_bytes

Interval = tuple[int, int]

_RATE_KINDS = ("copy", "memset")  # kinds that move bytes, so a rate means something


@dataclasses.dataclass(frozen=True)
class StreamSummary:
    """One stream lane. ``idle_ns`` is the time between its first and last busy moment it was not busy,
    split into ``gaps`` idle gaps, the longest ``longest_gap_ns``; ``overlap_ns`` is its busy time while
    any other stream (of any device) was busy too."""

    lane: Lane
    events: int
    busy_ns: int
    overlap_ns: int
    idle_ns: int
    gaps: int
    longest_gap_ns: int

    @property
    def span_ns(self) -> int:
        """From the start of the lane's first work to the end of its last."""
        return self.busy_ns + self.idle_ns


@dataclasses.dataclass(frozen=True)
class KindSummary:
    """One kind of operation: how many ran, their summed duration and bytes, and for copies and memsets
    the rate (bytes per nanosecond, i.e. GB/s) over that summed duration."""

    kind: str
    count: int
    total_ns: int
    bytes: int
    gbps: float | None


@dataclasses.dataclass(frozen=True)
class TraceSummary:
    """Per-stream and per-kind tables of a trace; ``str()`` gives plain text, Jupyter shows HTML."""

    backend: str
    duration_ns: int
    streams: list[StreamSummary]
    kinds: list[KindSummary]
    dropped: int = 0  # events beyond the trace's limit, not kept: the tables count only the kept ones
    keep: str = "last"

    def __str__(self) -> str:
        lines = [self._note()] if self._note() else []
        lines.append(self._heading())
        for headers, rows in (self._stream_table(), self._kind_table()):
            lines.append("")
            lines.extend(_text_table(headers, rows))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        parts = ['<div class="cuweave-trace-summary">']
        if self._note():
            parts.append(f"<p><em>{html.escape(self._note())}</em></p>")
        parts.append(f"<p>{html.escape(self._heading())}</p>")
        for headers, rows in (self._stream_table(), self._kind_table()):
            parts.append(_html_table(headers, rows))
        parts.append("</div>")
        return "\n".join(parts)

    def _note(self) -> str:
        notes = []
        if self.backend == "sim":
            notes.append("Times are the simulator's host times, not GPU times.")
        if self.dropped:
            which = "earliest" if self.keep == "last" else "latest"
            notes.append(f"The trace's limit kept the {self.keep} events: the {self.dropped:,} {which} are not "
                         "counted here.")
        return " ".join(notes)

    def _heading(self) -> str:
        return f"Trace over {_ms(self.duration_ns)} ms on the {self.backend} backend"

    def _stream_table(self) -> tuple[list[str], list[list[str]]]:
        headers = ["stream", "device", "events", "busy ms", "overlap ms", "idle ms", "gaps", "longest gap ms"]
        rows = [
            [s.lane.label, str(s.lane.device), str(s.events), _ms(s.busy_ns), _ms(s.overlap_ns),
             _ms(s.idle_ns), str(s.gaps), _ms(s.longest_gap_ns)]
            for s in self.streams
        ]
        return headers, rows

    def _kind_table(self) -> tuple[list[str], list[list[str]]]:
        headers = ["kind", "count", "total ms", "bytes", "GB/s"]
        rows = [
            [k.kind, str(k.count), _ms(k.total_ns), format_bytes(k.bytes) if k.kind in _RATE_KINDS else "-",
             f"{k.gbps:.2f}" if k.gbps is not None else "-"]
            for k in self.kinds
        ]
        return headers, rows


def summarize(trace: Any) -> TraceSummary:
    """Builds the summary of a trace (anything with ``events``, ``lanes``, ``backend`` and ``duration_ns``)."""
    events: Sequence[TraceEvent] = trace.events
    stream_lanes = [lane for lane in trace.lanes if lane.device is not None]
    on_lane: dict[Lane, list[TraceEvent]] = {lane: [] for lane in stream_lanes}
    for event in events:
        if event.lane in on_lane:
            on_lane[event.lane].append(event)
    busy = {lane: _union((e.start_ns, e.end_ns) for e in on_lane[lane]) for lane in stream_lanes}
    streams = []
    for lane in stream_lanes:
        others = _union(interval for other in stream_lanes if other != lane for interval in busy[other])
        gap_lengths = [start - end for (_, end), (start, _) in zip(busy[lane], busy[lane][1:], strict=False)]
        streams.append(StreamSummary(
            lane=lane,
            events=len(on_lane[lane]),
            busy_ns=_length(busy[lane]),
            overlap_ns=_intersection_length(busy[lane], others),
            idle_ns=sum(gap_lengths),
            gaps=len(gap_lengths),
            longest_gap_ns=max(gap_lengths, default=0),
        ))
    return TraceSummary(backend=trace.backend, duration_ns=trace.duration_ns, streams=streams,
                        kinds=_kind_summaries(events), dropped=getattr(trace, "dropped", 0),
                        keep=getattr(trace, "keep", "last"))


def _kind_summaries(events: Sequence[TraceEvent]) -> list[KindSummary]:
    order = {kind: index for index, kind in enumerate(KINDS)}
    present = sorted({e.kind for e in events}, key=lambda kind: (order.get(kind, len(KINDS)), kind))
    summaries = []
    for kind in present:
        of_kind = [e for e in events if e.kind == kind]
        total_ns = sum(e.duration_ns for e in of_kind)
        nbytes = sum(e.bytes for e in of_kind)
        gbps = nbytes / total_ns if kind in _RATE_KINDS and total_ns > 0 else None
        summaries.append(KindSummary(kind=kind, count=len(of_kind), total_ns=total_ns, bytes=nbytes,
                                     gbps=gbps))
    return summaries


def _union(intervals: Iterable[Interval]) -> list[Interval]:
    """Disjoint, sorted intervals covering the same time as ``intervals`` (zero-length ones dropped)."""
    merged: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _length(intervals: Sequence[Interval]) -> int:
    return sum(end - start for start, end in intervals)


def _intersection_length(a: Sequence[Interval], b: Sequence[Interval]) -> int:
    """Time covered by both of two disjoint, sorted interval lists."""
    total = i = j = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.3f}"


def _text_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Fixed-width lines: the first column left-aligned, the others (numbers) right-aligned."""
    widths = [max(len(row[c]) for row in [headers, *rows]) for c in range(len(headers))]

    def line(cells: list[str]) -> str:
        first, *rest = cells
        right_aligned = [cell.rjust(width) for cell, width in zip(rest, widths[1:], strict=True)]
        return "  ".join([first.ljust(widths[0]), *right_aligned]).rstrip()

    return [line(headers), *(line(row) for row in rows)]


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    def cells(tag: str, values: list[str]) -> str:
        return "".join(
            f"<{tag} style=\"text-align:{'left' if index == 0 else 'right'}\">{html.escape(value)}</{tag}>"
            for index, value in enumerate(values)
        )

    body = "".join(f"<tr>{cells('td', row)}</tr>" for row in rows)
    return f"<table><thead><tr>{cells('th', headers)}</tr></thead><tbody>{body}</tbody></table>"
