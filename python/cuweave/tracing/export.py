"""``Trace.export(path)``: the trace as Chrome trace JSON, which ui.perfetto.dev and chrome://tracing open.

Each device is a process ("GPU 0", ...) with one thread per stream, and the host is one process with a
thread per thread's ranges, in the trace's lane order. Work with a duration is a complete ("X") event,
zero-length work an instant ("i") event, and each event wait is a flow arrow from the event record it
waited for (when the record is in the trace too).
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Sequence
from typing import Any

from cuweave.tracing.events import Lane, TraceEvent

_NS_PER_US = 1000


def export(trace: Any, path: str | os.PathLike[str]) -> pathlib.Path:
    """Writes ``trace`` to ``path`` as Chrome trace JSON (UTF-8) and returns the path."""
    from cuweave import __version__

    document = {
        "traceEvents": _trace_events(trace.events, trace.lanes),
        "displayTimeUnit": "ns",
        "otherData": {"backend": trace.backend, "generator": f"cuweave {__version__}"},
    }
    target = pathlib.Path(path)
    target.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return target


def _trace_events(events: Sequence[TraceEvent], lanes: Sequence[Lane]) -> list[dict[str, Any]]:
    """The ``traceEvents`` list: process and thread metadata first, then the events by start time (of two
    starting together, the longer first, so viewers nest a graph's nodes in its replay), each event record or
    wait followed by its flow event."""
    pids = _process_ids(lanes)
    tids = {lane: index + 1 for index, lane in enumerate(lanes)}
    records = {e.link: e for e in events if e.kind == "event_record" and e.link}
    waited_links = {e.link for e in events if e.kind == "event_wait" and e.link in records}

    output = _metadata(lanes, pids, tids)
    for event in sorted(events, key=lambda e: (e.start_ns, -e.duration_ns)):
        place = {"pid": pids[event.lane.device], "tid": tids[event.lane], "ts": event.start_ns / _NS_PER_US}
        output.append(_slice(event, place))
        if event.kind == "event_record" and event.link in waited_links:
            output.append({"ph": "s", "id": event.link, "cat": "event", "name": "event", **place})
        elif event.kind == "event_wait" and event.link in records:
            output.append({"ph": "f", "bp": "e", "id": event.link, "cat": "event", "name": "event", **place})
    return output


def _process_ids(lanes: Sequence[Lane]) -> dict[int | None, int]:
    """A pid per device (by device number), then one for the host (lanes with no device)."""
    keys = sorted({lane.device for lane in lanes}, key=lambda key: (key is None, key or 0))
    return {key: index + 1 for index, key in enumerate(keys)}


def _process_name(key: int | None) -> str:
    return "host" if key is None else f"GPU {key}"


def _metadata(lanes: Sequence[Lane], pids: dict[int | None, int],
              tids: dict[Lane, int]) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    for key, pid in pids.items():
        output.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": _process_name(key)}})
        output.append({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}})
    for index, lane in enumerate(lanes):
        place = {"pid": pids[lane.device], "tid": tids[lane]}
        output.append({"ph": "M", "name": "thread_name", **place, "args": {"name": lane.label}})
        output.append({"ph": "M", "name": "thread_sort_index", **place, "args": {"sort_index": index}})
    return output


def _slice(event: TraceEvent, place: dict[str, Any]) -> dict[str, Any]:
    """A complete event for work with a duration, else a thread-scoped instant event."""
    common = {"name": event.label, "cat": event.kind, **place, "args": _arguments(event)}
    if event.duration_ns > 0:
        return {"ph": "X", **common, "dur": event.duration_ns / _NS_PER_US}
    return {"ph": "i", "s": "t", **common}


def _arguments(event: TraceEvent) -> dict[str, Any]:
    """What the viewer shows for a selected event: the full name, its size and rate, where it came from."""
    arguments: dict[str, Any] = {"correlation": event.correlation}
    if event.name:
        arguments["name"] = event.name
    if event.bytes:
        arguments["bytes"] = event.bytes
    if event.direction:
        arguments["direction"] = event.direction
    if event.gbps is not None:
        arguments["GB/s"] = round(event.gbps, 3)
    if event.call_site is not None:
        arguments["call_site"] = str(event.call_site)
    if event.link:
        arguments["link"] = event.link
    if event.kind == "range":
        arguments["depth"] = event.depth
    if event.graph_node:
        arguments["graph_node"] = True
    if event.placed:
        arguments["placed"] = True  # the time was inferred from its neighbours, not observed
    return arguments
