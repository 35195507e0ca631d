"""What ran where: ``with cuweave.trace() as t:`` records every GPU operation issued in the block.

Kernels (cuweave's, compiled, built-in, and other libraries' on any stream), copies with direction and
bytes, memsets, event records and waits, host callbacks, graph replays with their nodes and
``cuweave.range`` ranges, each with start and end times, its stream and device, and the Python line that
issued it. On a GPU the times come from CUPTI (the GPU's clock); on the simulator from its scheduler (host
time). Then::

    t.events          # TraceEvent records, by start time
    t.summary()       # per stream: busy, overlap, idle; per kind: count and time
    t.svg()           # the timeline as SVG, one lane per stream (no dependency)
    t.plot()          # the same chart with matplotlib (a Figure)
    t.export("run.json")   # Chrome trace / Perfetto (ui.perfetto.dev)

In Jupyter, a trace shows itself (its chart and summary). A trace takes the operations of the thread that
opened it (and of cuweave's helper threads working for it, such as prefetch's); ``all_threads=True``
takes every thread's. Leaving the block waits until the work issued in it has finished. cuweave's own
bookkeeping (the events that lifetimes and staging slots follow) is left out.
"""

from cuweave.tracing.events import KINDS, CallSite, Lane, TraceEvent, format_bytes, short_kernel_name
from cuweave.tracing.recording import Trace, trace
from cuweave.tracing.summary import KindSummary, StreamSummary, TraceSummary

__all__ = [
    "KINDS",
    "CallSite",
    "KindSummary",
    "Lane",
    "StreamSummary",
    "Trace",
    "TraceEvent",
    "TraceSummary",
    "format_bytes",
    "short_kernel_name",
    "trace",
]
