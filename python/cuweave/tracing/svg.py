"""A trace's timeline as SVG, drawn with no dependency: what ``Trace.svg()`` returns, what Jupyter shows and what
``python -m cuweave tour`` and ``trace`` write, with or without matplotlib.

The same chart as ``Trace.plot()``: one lane per stream (top to bottom in the trace's order, grouped by device),
bars coloured by kind and copies by direction, a graph replay as an outlined band behind its nodes, ranges
stacked by nesting depth, event records and waits as markers with an arrow from each record to the waits for it,
and a time axis in the unit that suits the span. Each bar says what it is and how long it took on hover.
"""

from __future__ import annotations

import html
import math
import pathlib
from itertools import groupby
from typing import Any

from cuweave.tracing.events import Lane, TraceEvent
from cuweave.tracing.plot import (_COLORS, _LABEL_MIN_FRACTION, _MARKERS, _UNKNOWN_COLOR, _bar_geometry, _bar_text,
                                   _clock_note, _range_rows, _style, _text_color, _time_scale)

_MARKER_LABELS = {kind: label for kind, (label, _) in _MARKERS.items()}

_LANE_PX = 28  # a lane's height: plot.py's unit of y
_TOP_PX, _BOTTOM_PX = 30, 44
_CHAR_PX = 6.2  # the width of one character of 11 px text, about
_LEGEND_PX = 250
_GROUP_NAME_PX = 28


class TimelineSvg(str):
    """An SVG document (a ``str``) that Jupyter shows inline and :meth:`save` writes to a file."""

    def _repr_svg_(self) -> str:
        return str(self)

    def save(self, path: str | pathlib.Path) -> pathlib.Path:
        """Writes the SVG to ``path`` (``.svg``) and returns the path."""
        path = pathlib.Path(path)
        path.write_text(str(self), encoding="utf-8")
        return path


def timeline_svg(trace: Any, *, title: str | None = None, width: int = 1100, labels: bool = True,
                 time_unit: str = "auto", begin_ns: int = 0) -> TimelineSvg:
    """The trace's timeline as SVG, ``width`` pixels wide; the arguments as for ``Trace.plot()``. The time axis
    spans ``begin_ns`` (since the trace began) to the trace's end: a later start shows a stretch of it."""
    if width < 400:
        raise ValueError(f"width must be at least 400 pixels, not {width}")
    ns_per_unit, unit_label = _time_scale(trace.duration_ns - begin_ns, time_unit)
    events: list[TraceEvent] = trace.events
    lanes: list[Lane] = trace.lanes
    label_px = min(280, 16 + _CHAR_PX * max((len(lane.label) for lane in lanes), default=8))
    left, right = label_px, width - _GROUP_NAME_PX - _LEGEND_PX
    rows = max(len(lanes), 1)
    used = {event.kind if event.kind in _MARKER_LABELS else _style(event) for event in events}
    height = _TOP_PX + max(rows * _LANE_PX, 16 * len(used)) + _BOTTOM_PX  # the legend may be the taller
    span_ns = max(trace.duration_ns - begin_ns, 1)
    pad_ns = 0.01 * span_ns  # room at both ends, as plot.py leaves

    def x(ns: float) -> float:
        return left + (ns - begin_ns + pad_ns) / (span_ns + 2 * pad_ns) * (right - left)

    def y(row: float) -> float:  # the centre of lane `row`, or a fraction of lanes from the top
        return _TOP_PX + (row + 0.5) * _LANE_PX

    row_of = {lane: index for index, lane in enumerate(lanes)}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#333"/></marker></defs>',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{width / 2:.1f}" y="18" text-anchor="middle" font-size="13">'
             f'{_escape(title or "cuweave trace")} ({_escape(_clock_note(trace.backend))})</text>']
    parts += _axis(x, left, right, _TOP_PX, _TOP_PX + rows * _LANE_PX, begin_ns, span_ns, ns_per_unit, unit_label)
    parts += _device_groups(lanes, left, right, y)
    range_rows = _range_rows(events)
    label_min_ns = _LABEL_MIN_FRACTION * span_ns if labels else None
    for index, lane in enumerate(lanes):
        parts.append(f'<text x="{left - 6}" y="{y(index) + 4:.1f}" text-anchor="end">{_escape(lane.label)}</text>')
        parts.append(f'<g class="lane" data-lane="{index}" data-label="{_escape(lane.label)}">')
        lane_events = sorted((e for e in events if e.lane == lane), key=lambda e: e.kind != "graph")  # bands first
        for event in lane_events:
            _draw_event(parts, event, index, x, y, range_rows, label_min_ns, ns_per_unit, unit_label)
        parts.append("</g>")
    parts += _arrows(events, row_of, x, y)
    if not lanes:
        parts.append(f'<text x="{(left + right) / 2:.1f}" y="{y(0) + 4:.1f}" text-anchor="middle" fill="#666">'
                     "nothing ran</text>")
    parts += _legend(used, right + _GROUP_NAME_PX + 8, _TOP_PX)
    parts.append("</svg>")
    return TimelineSvg("\n".join(parts))


def _escape(text: str) -> str:
    return html.escape(str(text), quote=True)


def _duration_text(ns: float, ns_per_unit: float, unit_label: str) -> str:
    return f"{ns / ns_per_unit:.3g} {unit_label}"


def _draw_event(parts: list[str], event: TraceEvent, row: int, x: Any, y: Any, range_rows: dict[Lane, int],
                label_min_ns: float | None, ns_per_unit: float, unit_label: str) -> None:
    """Appends the event's bar, tick or marker."""
    tip = f"<title>{_escape(_bar_text(event))}: {_duration_text(event.duration_ns, ns_per_unit, unit_label)}</title>"
    if event.kind in _MARKER_LABELS:  # where the record completed, where the waiting stream went on
        cx, cy = x(event.end_ns), y(row)
        if event.kind == "event_record":
            parts.append(f'<circle class="marker {event.kind}" cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" fill="black"/>')
        else:
            parts.append(f'<polygon class="marker {event.kind}" points="{cx:.1f},{cy - 4:.1f} {cx + 4:.1f},{cy:.1f} '
                         f'{cx:.1f},{cy + 4:.1f} {cx - 4:.1f},{cy:.1f}" fill="black"/>')
        return
    style = _style(event)
    color = _COLORS.get(style, _UNKNOWN_COLOR)
    kind_class = event.kind.replace("_", "-")
    if event.duration_ns <= 0:  # zero-length work: a tick, so it does not vanish
        tx = x(event.start_ns)
        parts.append(f'<line class="bar {kind_class}" x1="{tx:.1f}" x2="{tx:.1f}" y1="{y(row) - 9:.1f}" '
                     f'y2="{y(row) + 9:.1f}" stroke="{color}" stroke-width="2">{tip}</line>')
        return
    top, bar_height = _bar_box(event, row, range_rows)
    left_px, right_px = x(event.start_ns), x(event.end_ns)
    bar_width = max(right_px - left_px, 1.0)  # the shortest kernel still shows
    if event.kind == "graph":
        paint = f'fill="{color}" fill-opacity="0.15" stroke="{color}" stroke-width="1.2"'
    else:
        paint = f'fill="{color}" stroke="white" stroke-width="0.3"'
    parts.append(f'<rect class="bar {kind_class}" x="{left_px:.1f}" y="{top:.1f}" width="{bar_width:.1f}" '
                 f'height="{bar_height:.1f}" {paint}>{tip}</rect>')
    if label_min_ns is not None and event.kind != "graph" and event.duration_ns >= label_min_ns:
        text = _fitted(_bar_text(event), bar_width - 4)
        if text:
            parts.append(f'<text x="{left_px + 2:.1f}" y="{top + bar_height / 2 + 3.5:.1f}" font-size="9" '
                         f'fill="{_text_color(color)}" pointer-events="none">{_escape(text)}</text>')


def _bar_box(event: TraceEvent, row: int, range_rows: dict[Lane, int]) -> tuple[float, float]:
    """(top, height) in pixels of plot.py's bar geometry on lane `row`."""
    bottom, height, _ = _bar_geometry(event, row, range_rows)  # in lanes; lane `row` spans row - 0.5 .. row + 0.5
    return _TOP_PX + (bottom + 0.5) * _LANE_PX, height * _LANE_PX


def _fitted(text: str, pixels: float) -> str:
    """`text` cut to what `pixels` hold at 9 px (an ellipsis marks the cut); empty when not even 3 characters fit."""
    fits = int(pixels / (_CHAR_PX * 0.85))
    if fits < 3:
        return ""
    return text if len(text) <= fits else text[: fits - 1] + "…"


def _nice_step(span_units: float) -> float:
    """A tick step of 1, 2 or 5 times a power of ten giving about 8 ticks over the span."""
    raw = span_units / 8
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    return next(step * power for step in (1, 2, 5, 10) if step * power >= raw)


def _axis(x: Any, left: float, right: float, top: float, bottom: float, begin_ns: float, span_ns: float,
          ns_per_unit: float, unit_label: str) -> list[str]:
    """Vertical grid lines with tick labels (time since the trace began) under the lanes, and the axis title."""
    step = _nice_step(span_ns / ns_per_unit)
    parts = [f'<line x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}" stroke="#444"/>']
    tick = math.ceil(begin_ns / ns_per_unit / step) * step
    while tick * ns_per_unit <= (begin_ns + span_ns) * 1.0001:
        px = x(tick * ns_per_unit)
        parts.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{top}" y2="{bottom}" stroke="#e6e6e6"/>')
        parts.append(f'<text class="tick" x="{px:.1f}" y="{bottom + 14}" text-anchor="middle">{tick:g}</text>')
        tick = round(tick + step, 12)
    parts.append(f'<text x="{(left + right) / 2:.1f}" y="{bottom + 32}" text-anchor="middle">'
                 f"time since trace start ({_escape(unit_label)})</text>")
    return parts


def _device_groups(lanes: list[Lane], left: float, right: float, y: Any) -> list[str]:
    """A line between the lanes of different devices (and the host's), and each group's name on the right."""
    parts, first = [], 0
    for device, members in groupby(lanes, key=lambda lane: lane.device):
        count = len(list(members))
        name = "host" if device is None else f"GPU {device}"
        middle = (y(first) + y(first + count - 1)) / 2
        size = 11 if count > 1 else 8  # the name of a one-lane group fits its lane
        parts.append(f'<text x="{right + 14}" y="{middle:.1f}" font-weight="bold" font-size="{size}" '
                     f'text-anchor="middle" transform="rotate(90 {right + 14} {middle:.1f})">{name}</text>')
        if first:
            line_y = y(first) - _LANE_PX / 2
            parts.append(f'<line x1="{left}" x2="{right}" y1="{line_y:.1f}" y2="{line_y:.1f}" stroke="#4d4d4d" '
                         'stroke-width="1.2"/>')
        first += count
    return parts


def _arrows(events: list[TraceEvent], row_of: dict[Lane, int], x: Any, y: Any) -> list[str]:
    """An arrow from each event record to each wait for it (none for a wait whose record is not traced)."""
    records = {e.link: e for e in events if e.kind == "event_record" and e.link}
    parts = []
    for wait in (e for e in events if e.kind == "event_wait" and e.link in records):
        record = records[wait.link]
        parts.append(f'<line class="wait-arrow" x1="{x(record.end_ns):.1f}" y1="{y(row_of[record.lane]):.1f}" '
                     f'x2="{x(wait.end_ns):.1f}" y2="{y(row_of[wait.lane]):.1f}" stroke="#333" stroke-width="0.8" '
                     'marker-end="url(#arrow)"/>')
    return parts


def _legend(used: set[str], left: float, top: float) -> list[str]:
    """The legend of the styles drawn, in plot.py's order, markers last."""
    parts, row = [], 0
    for style, color in _COLORS.items():
        if style not in used:
            continue
        opacity = ' fill-opacity="0.15"' if style == "graph replay" else ""
        parts.append(f'<rect x="{left}" y="{top + row * 16}" width="12" height="10" fill="{color}"{opacity} '
                     f'stroke="{color}"/><text x="{left + 17}" y="{top + row * 16 + 9}">{_escape(style)}</text>')
        row += 1
    for kind, label in _MARKER_LABELS.items():
        if kind in used:
            cx, cy = left + 6, top + row * 16 + 5
            mark = (f'<circle cx="{cx}" cy="{cy}" r="3" fill="black"/>' if kind == "event_record" else
                    f'<polygon points="{cx},{cy - 4} {cx + 4},{cy} {cx},{cy + 4} {cx - 4},{cy}" fill="black"/>')
            parts.append(f'{mark}<text x="{left + 17}" y="{top + row * 16 + 9}">{_escape(label)}</text>')
            row += 1
    return parts
