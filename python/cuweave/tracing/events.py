"""What a trace holds: each thing that ran (TraceEvent), the lane it ran on (Lane) and the Python line that
issued it (CallSite), with the short texts a chart or table shows for them."""

from __future__ import annotations

import dataclasses
from typing import Any

KINDS = ("kernel", "copy", "memset", "event_record", "event_wait", "host_callback", "graph", "range")


@dataclasses.dataclass(frozen=True)
class CallSite:
    """The Python line that issued an operation."""

    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.function})"


@dataclasses.dataclass(frozen=True)
class Lane:
    """One row of a timeline: a stream of a device, or a host thread's ranges."""

    key: tuple[Any, ...]  # ("stream", device, stream id) or ("ranges", thread id)
    label: str
    device: int | None  # None for host lanes
    stream: int | None
    thread: int | None = None


@dataclasses.dataclass(frozen=True)
class TraceEvent:
    """One thing that ran. Times are nanoseconds since the trace began, on the backend's trace clock."""

    kind: str  # one of KINDS
    name: str
    start_ns: int
    end_ns: int
    device: int | None  # None for ranges (host)
    stream: int | None  # the backend's stream id; None for ranges
    lane: Lane
    bytes: int = 0
    direction: str | None = None  # copies: "H2D", "D2H", "D2D", "H2H", "P2P"
    call_site: CallSite | None = None
    correlation: int = 0  # the API call that issued it (in issue order; 0 for host callbacks and ranges);
    # graph nodes share their replay's
    link: int = 0  # an event record and the waits for that recording share it
    thread: int = 0  # the issuing host thread's native id
    depth: int = 0  # ranges: how many enclosing ranges were open
    graph_node: bool = False  # ran as a node of the graph replay with this correlation
    placed: bool = False  # the time was not observed but inferred from its neighbours (see Trace docs)

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def gbps(self) -> float | None:
        """Copies and memsets: bytes per nanosecond (GB/s), or None."""
        if self.kind not in ("copy", "memset") or self.duration_ns <= 0:
            return None
        return self.bytes / self.duration_ns

    @property
    def label(self) -> str:
        """A short text for a chart: kernel name without namespaces and parameters, copy direction and size."""
        if self.kind == "kernel":
            return short_kernel_name(self.name)
        if self.kind == "copy":
            return f"{self.direction or 'copy'} {format_bytes(self.bytes)}"
        if self.kind == "memset":
            return f"memset {format_bytes(self.bytes)}"
        if self.kind in ("event_record", "event_wait"):
            return "record" if self.kind == "event_record" else "wait"
        return self.name or self.kind


def short_kernel_name(name: str) -> str:
    """``void ns::(anonymous namespace)::fill_kernel<float>(float*, ...)`` -> ``fill_kernel<float>``."""
    text = name
    depth = 0
    for index, char in enumerate(text):  # drop the parameter list: the first '(' outside template brackets
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0 and not text.startswith("(anonymous", index):
            text = text[:index]
            break
    if " " in text.split("<", 1)[0]:  # a return type before the name
        head, _, tail = text.partition("<")
        text = head.rsplit(" ", 1)[-1] + ("<" + tail if tail else "")
    head, sep, tail = text.partition("<")
    return head.rsplit("::", 1)[-1] + sep + tail


def format_bytes(count: int) -> str:
    """``count`` bytes for people: three significant digits in B, KB, MB or GB (powers of 1000)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count} B"
