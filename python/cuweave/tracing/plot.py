"""``Trace.plot()`` and a trace's Jupyter view: a Gantt chart of what ran, one lane per stream.

Lanes run top to bottom in the trace's order, grouped by device (a line between groups, the group's name on
the right). Bars are coloured by kind, copies by direction; a graph replay is an outlined band behind its
nodes; ranges are stacked by nesting depth on their thread's lane. Event records and waits are markers,
with an arrow from each record to the waits for it. matplotlib is imported only when a chart is drawn; without
it, the chart is svg.py's.
"""

from __future__ import annotations

import base64
import io
from collections import defaultdict
from itertools import groupby
from typing import Any

from cuweave.tracing.events import Lane, TraceEvent

_MISSING_MATPLOTLIB = "Trace.plot() needs matplotlib: pip install matplotlib"

# Legend entries in legend order; copies are told apart by direction. matplotlib's "tab" colours, as hex so that
# the SVG timeline (svg.py) draws with the same ones.
_COLORS = {
    "kernel": "#1f77b4",
    "copy H2D": "#ff7f0e",
    "copy D2H": "#2ca02c",
    "copy D2D": "#d62728",
    "copy P2P": "#9467bd",
    "copy H2H": "#8c564b",
    "copy": "#e377c2",
    "memset": "#7f7f7f",
    "host callback": "#bcbd22",
    "graph replay": "#17becf",
    "range": "#9fa8da",
}
_UNKNOWN_COLOR = "#999999"
_MARKERS = {"event_record": ("event record", "o"), "event_wait": ("event wait (arrow from its record)", "D")}
_TIME_UNITS = {"us": (1e3, "µs"), "ms": (1e6, "ms"), "s": (1e9, "s")}

_BAR_HEIGHT = 0.6
_GRAPH_BAND_HEIGHT = 0.9
_RANGE_LANE_HEIGHT = 0.8  # shared by the nesting depths of a range lane
_LABEL_MIN_FRACTION = 0.04  # a bar gets a text label when at least this share of the x range wide


def plot(trace: Any, ax: Any = None, *, title: str | None = None, figsize: tuple[float, float] | None = None,
         labels: bool = True, time_unit: str = "auto") -> Any:
    """Draws the trace's Gantt chart into ``ax`` (else a new pyplot figure) and returns the Figure. Without
    matplotlib (and no ``ax``), returns the same chart as SVG instead (``Trace.svg()``, shown inline by Jupyter).

    title: text before the clock note (default "cuweave trace"); figsize: of a new figure (default 12 inches
    wide, taller with more lanes); labels: write names (copies with GB/s) on bars wide enough to hold them;
    time_unit: "us", "ms", "s" or "auto" (by the trace's duration).
    """
    try:
        _require_matplotlib()
    except ImportError:
        if ax is not None:
            raise
        from cuweave.tracing.svg import timeline_svg

        return timeline_svg(trace, title=title, labels=labels, time_unit=time_unit)
    scale = _time_scale(trace.duration_ns, time_unit)  # checked before a figure is made
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=figsize or _default_figsize(trace), layout="constrained")
    _draw(trace, ax, title=title, labels=labels, scale=scale)
    return ax.figure


def html_view(trace: Any) -> str:
    """A trace's Jupyter view: the chart as an inline PNG, then the summary tables.

    The chart is drawn on a bare Figure (not pyplot), so Jupyter does not also show it as a pyplot figure.
    Without matplotlib, the chart is cuweave's own SVG.
    """
    summary = trace.summary()._repr_html_()
    try:
        _require_matplotlib()
    except ImportError:
        from cuweave.tracing.svg import timeline_svg

        return f"{timeline_svg(trace)}\n{summary}"
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=_default_figsize(trace), layout="constrained")
    FigureCanvasAgg(figure)
    _draw(trace, figure.add_subplot(), title=None, labels=True, scale=_time_scale(trace.duration_ns, "auto"))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    image = f'<img alt="cuweave trace timeline" style="max-width:100%" src="data:image/png;base64,{encoded}">'
    return f"{image}\n{summary}"


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise ImportError(_MISSING_MATPLOTLIB) from error


def _auto_unit(duration_ns: float) -> str:
    """The time unit that suits a span of `duration_ns`: microseconds under a millisecond, and so on."""
    return "us" if duration_ns < 1e6 else "ms" if duration_ns < 1e9 else "s"


def _time_scale(duration_ns: int, time_unit: str) -> tuple[float, str]:
    """(nanoseconds per unit, unit label) for the x axis."""
    if time_unit == "auto":
        time_unit = _auto_unit(duration_ns)
    if time_unit not in _TIME_UNITS:
        raise ValueError(f"time_unit must be 'auto' or one of {', '.join(map(repr, _TIME_UNITS))}, "
                         f"not {time_unit!r}")
    return _TIME_UNITS[time_unit]


def _default_figsize(trace: Any) -> tuple[float, float]:
    return (12.0, max(2.5, 1.5 + 0.5 * len(trace.lanes)))


def _style(event: TraceEvent) -> str:
    """The legend entry (and colour) of a bar."""
    if event.kind == "copy":
        return f"copy {event.direction}" if event.direction else "copy"
    return {"host_callback": "host callback", "graph": "graph replay"}.get(event.kind, event.kind)


def _draw(trace: Any, ax: Any, *, title: str | None, labels: bool, scale: tuple[float, str]) -> None:
    events: list[TraceEvent] = trace.events
    lanes: list[Lane] = trace.lanes
    ns_per_unit, unit_label = scale
    span_ns = max(trace.duration_ns, 1)
    row = {lane: index for index, lane in enumerate(lanes)}

    label_min_ns = _LABEL_MIN_FRACTION * span_ns if labels else None
    used = _draw_work(ax, events, row, ns_per_unit, label_min_ns)
    _draw_wait_arrows(ax, events, row, ns_per_unit)
    ax.set_yticks(range(len(lanes)), [lane.label for lane in lanes])
    ax.set_ylim(max(len(lanes), 1) - 0.5, -0.5)  # the first lane on top; one empty row when nothing ran
    ax.set_xlim(-0.01 * span_ns / ns_per_unit, 1.01 * span_ns / ns_per_unit)
    ax.set_xlabel(f"time since trace start ({unit_label})")
    ax.grid(axis="x", color="0.9", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_title(f"{title or 'cuweave trace'} ({_clock_note(trace.backend)})")
    if not lanes:
        ax.text(0.5, 0.5, "nothing ran", transform=ax.transAxes, ha="center", va="center", color="0.4")
    _draw_device_groups(ax, lanes)
    _draw_legend(ax, used)


def _draw_work(ax: Any, events: list[TraceEvent], row: dict[Lane, int], ns_per_unit: float,
               label_min_ns: float | None) -> set[str]:
    """Bars for work with a duration (labelled when at least ``label_min_ns`` long), markers for the rest;
    returns the styles drawn."""
    from matplotlib.colors import to_rgba
    from matplotlib.transforms import Bbox, ScaledTranslation, TransformedBbox

    range_rows = _range_rows(events)
    inset = ax.transData + ScaledTranslation(2 / 72, 0, ax.figure.dpi_scale_trans)  # bar labels start here
    bars: dict[tuple[str, float, float, int], list[tuple[float, float]]] = defaultdict(list)
    points: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for event in events:
        y = row[event.lane]
        start, end = event.start_ns / ns_per_unit, event.end_ns / ns_per_unit
        if event.kind in _MARKERS:  # where the record completed, where the waiting stream went on
            points[event.kind][0].append(end)
            points[event.kind][1].append(y)
            continue
        style = _style(event)
        if event.duration_ns <= 0:
            points[style][0].append(start)
            points[style][1].append(y)
            continue
        bottom, height, zorder = _bar_geometry(event, y, range_rows)
        bars[(style, bottom, height, zorder)].append((start, end - start))
        if label_min_ns is not None and event.kind != "graph" and event.duration_ns >= label_min_ns:
            text = ax.text(start, bottom + height / 2, _bar_text(event), transform=inset, ha="left",
                           va="center", fontsize=7, zorder=3, clip_on=True,
                           color=_text_color(_COLORS.get(style, _UNKNOWN_COLOR)))
            bar_box = Bbox.from_extents(start, bottom, end, bottom + height)
            text.set_clip_box(TransformedBbox(bar_box, ax.transData))  # a long name is cut at its bar's end

    for (style, bottom, height, zorder), spans in bars.items():
        color = _COLORS.get(style, _UNKNOWN_COLOR)
        if style == "graph replay":
            ax.broken_barh(spans, (bottom, height), facecolors=to_rgba(color, 0.15), edgecolors=color,
                           linewidths=1.2, zorder=zorder)
        else:
            ax.broken_barh(spans, (bottom, height), facecolors=color, edgecolors="white", linewidths=0.3,
                           zorder=zorder)
    for style, (xs, ys) in points.items():
        if style in _MARKERS:
            ax.plot(xs, ys, linestyle="none", marker=_MARKERS[style][1], markersize=4, color="black", zorder=4)
        else:  # zero-length work: a tick, so it does not vanish
            ax.plot(xs, ys, linestyle="none", marker="|", markersize=14, markeredgewidth=2,
                    color=_COLORS.get(style, _UNKNOWN_COLOR), zorder=4)
    return {style for style, *_ in bars} | set(points)


def _draw_wait_arrows(ax: Any, events: list[TraceEvent], row: dict[Lane, int], ns_per_unit: float) -> None:
    """An arrow from each event record to each wait for it (none for a wait whose record is not traced)."""
    from matplotlib.patches import FancyArrowPatch

    records = {e.link: e for e in events if e.kind == "event_record" and e.link}
    for wait in (e for e in events if e.kind == "event_wait" and e.link in records):
        record = records[wait.link]
        ax.add_patch(FancyArrowPatch((record.end_ns / ns_per_unit, row[record.lane]),
                                     (wait.end_ns / ns_per_unit, row[wait.lane]),
                                     arrowstyle="-|>", mutation_scale=9, color="0.2", linewidth=0.8,
                                     shrinkA=2, shrinkB=2, zorder=5))


def _draw_legend(ax: Any, used: set[str]) -> None:
    """The legend of the styles drawn, right of the device group names."""
    from matplotlib.colors import to_rgba
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.transforms import ScaledTranslation

    handles = [
        Patch(facecolor=to_rgba(color, 0.15), edgecolor=color, label=style) if style == "graph replay"
        else Patch(facecolor=color, label=style)
        for style, color in _COLORS.items() if style in used
    ]
    handles += [Line2D([], [], linestyle="none", marker=marker, markersize=4, color="black", label=label)
                for kind, (label, marker) in _MARKERS.items() if kind in used]
    if handles:
        beside_group_names = ax.transAxes + ScaledTranslation(24 / 72, 0, ax.figure.dpi_scale_trans)
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1, 1), bbox_transform=beside_group_names,
                  borderaxespad=0, fontsize=8, frameon=False)


def _range_rows(events: list[TraceEvent]) -> dict[Lane, int]:
    """How many nesting depths each range lane stacks."""
    rows: dict[Lane, int] = {}
    for event in events:
        if event.kind == "range":
            rows[event.lane] = max(rows.get(event.lane, 1), event.depth + 1)
    return rows


def _bar_geometry(event: TraceEvent, y: int, range_rows: dict[Lane, int]) -> tuple[float, float, int]:
    """(bottom, height, zorder) of a bar on lane row ``y``: a graph replay is a taller band behind its
    nodes; ranges share their lane by depth, outermost on top (y grows downwards)."""
    if event.kind == "graph":
        return y - _GRAPH_BAND_HEIGHT / 2, _GRAPH_BAND_HEIGHT, 1
    if event.kind == "range":
        height = _RANGE_LANE_HEIGHT / range_rows[event.lane]
        return y - _RANGE_LANE_HEIGHT / 2 + event.depth * height, height, 2
    return y - _BAR_HEIGHT / 2, _BAR_HEIGHT, 2


def _bar_text(event: TraceEvent) -> str:
    if event.kind in ("copy", "memset") and event.gbps is not None:
        return f"{event.label} {event.gbps:.1f} GB/s"
    return event.label


def _text_color(color: str) -> str:
    """Black on light bars, white on dark ones (`color`: "#rrggbb")."""
    red, green, blue = (int(color[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.55 else "white"


def _clock_note(backend: str) -> str:
    return "simulator: host times" if backend == "sim" else f"{backend}: GPU times"


def _draw_device_groups(ax: Any, lanes: list[Lane]) -> None:
    """A line between the lanes of different devices (and the host's), and each group's name on the right."""
    from matplotlib.transforms import ScaledTranslation

    right_of_axes = ax.get_yaxis_transform() + ScaledTranslation(4 / 72, 0, ax.figure.dpi_scale_trans)
    first = 0
    for device, members in groupby(lanes, key=lambda lane: lane.device):
        count = len(list(members))
        name = "host" if device is None else f"GPU {device}"
        ax.text(1, first + (count - 1) / 2, name, transform=right_of_axes, rotation=90, ha="left", va="center",
                fontsize=9, fontweight="bold")
        if first:
            ax.axhline(first - 0.5, color="0.3", linewidth=1.2)
        first += count
