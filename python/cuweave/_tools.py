"""``python -m cuweave trace`` and ``python -m cuweave sanitize``: cuweave's timeline and race sanitizer around
a program that was not written for them (its own code unchanged, run as Python would run it)."""

from __future__ import annotations

import dataclasses
import pathlib
import re
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import cuweave as cw
from cuweave import _report_page, _script, _torch_hooks

# A picture of more events than this shows the busiest stretch of the trace holding this many.
PICTURE_EVENTS = 20_000
_CALL_SITE = re.compile(r"^\s+at (.+)$", re.M)


def trace_program(target: Sequence[str], *, module: bool, out: pathlib.Path, all_threads: bool,
                  limit: int | None = None, keep: str = "last") -> int:
    """Runs the program with a trace open (keeping at most `limit` events, the first or last); then writes
    out/trace.json, out/summary.txt, out/timeline.svg (and out/timeline.png with matplotlib) and out/index.html
    (the summary and the timeline on one page), says where on stderr, and returns the program's exit code."""
    with cw.trace(all_threads=all_threads, limit=limit, keep=keep) as trace:
        code = _script.run(target, module=module)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "trace.json", out / "summary.txt"]
    trace.export(written[0])
    summary = f"{trace.summary()}"
    written[1].write_text(f"{summary}\n")
    view = _view(trace)
    notes = []
    timeline = _timeline(view) if view else None
    if timeline is None:
        notes.append("no timeline: no GPU work ran")
    else:
        written.append(timeline.save(out / "timeline.svg"))
        note = _picture(trace, out / "timeline.png")
        if note is None:
            written.append(out / "timeline.png")
        else:
            notes.append(note)
    section = _report_page.Section(title=view.title if view else "no GPU work ran", svg=str(timeline or ""),
                                   preformatted=summary, files=tuple(p.name for p in written if p.suffix != ".svg"))
    written.append(_report_page.write_page(out / "index.html", title="cuweave trace of " + " ".join(target),
                                           notes=[_clock(trace)], sections=[section], files=[]))
    if trace.dropped:
        print(f"cuweave trace: kept the {keep} {len(trace.events)} events (--limit {limit}); "
              f"{trace.dropped} more ran", file=sys.stderr)
    print(f"cuweave trace: {len(trace.events)} events on {len(trace.lanes)} lanes; wrote "
          f"{', '.join(map(str, written))}{''.join(f' ({note})' for note in notes)}", file=sys.stderr)
    return code


def _clock(trace: cw.Trace) -> str:
    return ("Times are host times of simulated work (cuweave's simulator), not GPU times." if trace.backend == "sim"
            else "Times are the GPU's.")


@dataclasses.dataclass(frozen=True)
class _View:
    """What a picture of a trace shows: the trace, or a stretch of it from `begin_ns`, and its title."""

    shown: Any
    title: str
    begin_ns: int


def _view(trace: cw.Trace) -> _View | None:
    """The stretch worth drawing: all of it; the busiest PICTURE_EVENTS events; or, when GPU work took a small
    part of the run, the span in which it ran. None when no GPU work ran."""
    events = trace.events
    if not events:
        return None
    first, last = min(e.start_ns for e in events), max(e.end_ns for e in events)
    if len(events) > PICTURE_EVENTS:
        window = _busiest(events, PICTURE_EVENTS)
        span_ms = (max(e.end_ns for e in window) - window[0].start_ns) / 1e6
        title = (f"cuweave trace: the busiest {span_ms:.3f} ms ({len(window)} of {len(events)} events; "
                 "trace.json holds them all)")
        return _View(_Window(events=window, lanes=trace.lanes, backend=trace.backend,
                             duration_ns=max(e.end_ns for e in window)), title, window[0].start_ns)
    if last - first < trace.duration_ns // 2:
        # The GPU work took a small part of the run (the rest: imports, start-up, host work): drawn over the
        # trace's whole span, its bars would be slivers at one edge.
        title = (f"cuweave trace: the {(last - first) / 1e6:.3f} ms in which GPU work ran "
                 f"(of {trace.duration_ns / 1e6:.0f} ms traced)")
        return _View(_Window(events=sorted(events, key=lambda e: e.start_ns), lanes=trace.lanes,
                             backend=trace.backend, duration_ns=last), title, first)
    return _View(trace, "cuweave trace", 0)


def _timeline(view: _View) -> Any:
    from cuweave.tracing.plot import _auto_unit
    from cuweave.tracing.svg import timeline_svg

    unit = _auto_unit(max(view.shown.duration_ns - view.begin_ns, 1))
    return timeline_svg(view.shown, title=view.title, time_unit=unit, begin_ns=view.begin_ns)


def _picture(trace: cw.Trace, path: pathlib.Path) -> str | None:
    """Draws the timeline into `path` with matplotlib; returns why not (no matplotlib, nothing ran), else None."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return "no timeline.png: it needs matplotlib (pip install matplotlib)"
    view = _view(trace)
    if view is None:
        return "no timeline.png: no GPU work ran"
    figure = Figure(figsize=(14.0, max(2.5, 1.5 + 0.5 * len(trace.lanes))), layout="constrained")
    FigureCanvasAgg(figure)
    if view.shown is trace:
        trace.plot(ax=figure.add_subplot(), title=view.title)
    else:
        _plot(view.shown, figure, view.title)
    figure.savefig(path, dpi=110)
    return None


@dataclasses.dataclass
class _Window:
    """What the chart reads of a trace, for a stretch of it."""

    events: list
    lanes: list
    backend: str
    duration_ns: int


def _plot(window: _Window, figure: Any, title: str) -> None:
    """Draws a stretch of a trace: the axis spans the stretch, in a unit that suits its length."""
    from cuweave.tracing.plot import _auto_unit, _time_scale, plot

    start = window.events[0].start_ns
    span = max(window.duration_ns - start, 1)
    unit = _auto_unit(span)
    axes = figure.add_subplot()
    plot(window, ax=axes, title=title, time_unit=unit)
    ns_per_unit = _time_scale(span, unit)[0]
    axes.set_xlim((start - 0.01 * span) / ns_per_unit, (window.duration_ns + 0.01 * span) / ns_per_unit)


def _busiest(events: list[cw.TraceEvent], count: int) -> list[cw.TraceEvent]:
    """The `count` consecutive events (by start) that began within the shortest time."""
    ordered = sorted(events, key=lambda e: e.start_ns)
    best = min(range(len(ordered) - count + 1), key=lambda i: ordered[i + count - 1].start_ns - ordered[i].start_ns)
    return ordered[best:best + count]


def sanitize_program(target: Sequence[str], *, module: bool, warn: bool) -> int:
    """Runs the program with the sanitizer on. Without `warn` the first race raises RaceError in the program
    (its report names both call sites; exit code 1). With `warn` each race is reported once per pair of call
    sites, the run goes on, and the exit code is 1 if there was any race (else the program's)."""
    _torch_hooks.wait_for_native_hook()  # a PyTorch program pays its hook's first build, not the mode's cost
    if not warn:
        with cw.sanitize():
            return _script.run(target, module=module)
    seen: dict[tuple[str, ...], int] = {}
    show = warnings.showwarning

    def report(message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if not issubclass(category, cw.RaceWarning):
            show(message, category, filename, lineno, file, line)
            return
        sites = tuple(_CALL_SITE.findall(str(message)))
        seen[sites] = seen.get(sites, 0) + 1
        if seen[sites] == 1:
            print(f"cuweave sanitize: race {len(seen)}\n{message}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("always", cw.RaceWarning)
        warnings.showwarning = report
        with cw.sanitize(on_race="warn"):
            code = _script.run(target, module=module)
    races = sum(seen.values())
    print(f"cuweave sanitize: {races} race{'s' if races != 1 else ''} at {len(seen)} distinct pair"
          f"{'s' if len(seen) != 1 else ''} of call sites", file=sys.stderr)
    return code if races == 0 else (code or 1)
