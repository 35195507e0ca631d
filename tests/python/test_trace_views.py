"""Views of a trace: summary tables, Chrome trace export, matplotlib chart and Jupyter HTML.

Real traces come from a small two-stream workload (a copy, a cross-stream wait, kernels, a host callback,
a graph replay, nested ranges); exact numbers are checked on hand-built traces whose busy, idle and overlap
times are worked out below.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import sys
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest

import cuweave as cw
from cuweave.tracing.export import export
from cuweave.tracing.plot import html_view, plot
from cuweave.tracing.svg import TimelineSvg, timeline_svg
from cuweave.tracing.summary import summarize
from cuweave.tracing import KINDS, Lane, TraceEvent

from _support import svg_lanes

# Hand-built traces use a tenth of a millisecond as their time unit, so the tables print round numbers.
UNIT_NS = 100_000


@dataclasses.dataclass
class StandInTrace:
    """What the views read of a Trace, built by hand."""

    events: list[TraceEvent]
    lanes: list[Lane]
    backend: str = "cuda"

    @property
    def duration_ns(self) -> int:
        return max((e.end_ns for e in self.events), default=0)

    def summary(self):
        return summarize(self)


COPIES = Lane(("stream", 0, 1), "copies <&>", 0, 1)
COMPUTE = Lane(("stream", 0, 2), "compute", 0, 2)
PEER = Lane(("stream", 1, 3), "peer Ω", 1, 3)
RANGES = Lane(("ranges", 7), "ranges, thread 7", None, None, 7)


def _event(kind: str, start: int, end: int, lane: Lane, name: str = "", **fields) -> TraceEvent:
    return TraceEvent(kind=kind, name=name or kind, start_ns=start * UNIT_NS, end_ns=end * UNIT_NS,
                      device=lane.device, stream=lane.stream, lane=lane, **fields)


def _hand_built(backend: str = "cuda") -> StandInTrace:
    """Two devices and a range lane, in units of 0.1 ms:

    copies   copy [0,10), kernel [20,30), record at 30 (link 1)
    compute  graph [5,25) with its node [6,12), wait at 31 (link 1)
    peer     copy [28,35), wait at 36 (link 1), empty kernel at 40, memset [50,60),
             wait at 61 (link 9, whose record is not in the trace)
    ranges   outer [0,100), inner [10,50) inside it
    """
    events = [
        _event("copy", 0, 10, COPIES, bytes=4_000_000, direction="H2D", correlation=1),
        _event("kernel", 20, 30, COPIES, "void ns::fill_kernel<float>(float*, int)", correlation=2),
        _event("event_record", 30, 30, COPIES, link=1, placed=True, correlation=3),
        _event("graph", 5, 25, COMPUTE, "graph (1 nodes)", correlation=4),
        _event("kernel", 6, 12, COMPUTE, "node_kernel", graph_node=True, correlation=4),
        _event("event_wait", 31, 31, COMPUTE, link=1, placed=True, correlation=5),
        _event("copy", 28, 35, PEER, bytes=1000, direction="P2P", correlation=6),
        _event("event_wait", 36, 36, PEER, link=1, correlation=7),
        _event("kernel", 40, 40, PEER, "empty_kernel", correlation=8),
        _event("memset", 50, 60, PEER, bytes=500, correlation=9),
        _event("event_wait", 61, 61, PEER, link=9, correlation=10),
        _event("range", 0, 100, RANGES, "outer"),
        _event("range", 10, 50, RANGES, "inner", depth=1),
    ]
    events.sort(key=lambda e: e.start_ns)
    return StandInTrace(events=events, lanes=[COPIES, COMPUTE, PEER, RANGES], backend=backend)


@pytest.fixture
def named_streams():
    copies, compute = cw.Stream(name="copies"), cw.Stream(name="compute")
    yield copies, compute
    for s in (copies, compute):
        s.synchronize()
        s.close()


@pytest.fixture
def traced(named_streams):
    """A trace of a workload on two streams; the device result is checked so the trace shows real work."""
    copies, compute = named_streams
    host = np.arange(1 << 14, dtype=np.float32)
    callbacks = []
    with cw.trace() as t:
        with cw.range("step"):
            with cw.range("upload"):
                x = cw.to_device(host, stream=copies)
            compute.wait(copies.record())
            cw.ops.scale(x, 2.0, out=x, stream=compute)
            cw.ops.spin(0.005, stream=compute)
            compute.launch_host_func(callbacks.append, "fired")
        with cw.capture(compute) as cap:
            cw.ops.add(x, 1.0, out=x)
        cap.graph.replay(compute)
        result = x.to_numpy(stream=compute)
    assert np.array_equal(result, host * 2 + 1)
    assert callbacks == ["fired"]
    return t


@pytest.fixture
def pyplot():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def _busy_span(events: list[TraceEvent]) -> int:
    """From the first start to the last end of the events that took time."""
    timed = [e for e in events if e.duration_ns > 0]
    return max(e.end_ns for e in timed) - min(e.start_ns for e in timed) if timed else 0


def _linked_waits(events: list[TraceEvent]) -> list[TraceEvent]:
    records = {e.link for e in events if e.kind == "event_record" and e.link}
    return [e for e in events if e.kind == "event_wait" and e.link in records]


# Summary ---------------------------------------------------------------------------------------------------
def test_summary_kinds_match_the_trace(traced):
    summary = traced.summary()
    assert {k.kind: k.count for k in summary.kinds} == dict(traced.kinds())
    assert [k.kind for k in summary.kinds] == [kind for kind in KINDS if kind in traced.kinds()]
    for kind in summary.kinds:
        of_kind = traced.select(kind.kind)
        assert kind.total_ns == sum(e.duration_ns for e in of_kind)
        assert kind.bytes == sum(e.bytes for e in of_kind)
    copies = next(k for k in summary.kinds if k.kind == "copy")
    assert copies.bytes == 2 * (1 << 14) * 4  # the upload and the download
    assert copies.gbps == pytest.approx(copies.bytes / copies.total_ns)
    assert next(k for k in summary.kinds if k.kind == "kernel").gbps is None


def test_summary_has_a_row_per_stream_lane(traced):
    summary = traced.summary()
    stream_lanes = [lane for lane in traced.lanes if lane.device is not None]
    assert [s.lane for s in summary.streams] == stream_lanes
    assert {"copies", "compute"} <= {lane.label for lane in stream_lanes}
    for row in summary.streams:
        on_lane = traced.select(lane=row.lane)
        assert row.events == len(on_lane)
        span = _busy_span(on_lane)
        assert 0 <= row.busy_ns <= span
        assert row.idle_ns == span - row.busy_ns == row.span_ns - row.busy_ns
        assert row.busy_ns >= max(e.duration_ns for e in on_lane)
        assert 0 <= row.overlap_ns <= row.busy_ns
        assert row.longest_gap_ns <= row.idle_ns
        assert (row.gaps == 0) == (row.idle_ns == 0)


def test_graph_replay_and_its_nodes_are_busy_once(traced):
    compute = next(s for s in traced.summary().streams if s.lane.label == "compute")
    on_lane = traced.select(lane=compute.lane)
    assert any(e.graph_node for e in on_lane) and any(e.kind == "graph" for e in on_lane)
    assert compute.busy_ns <= sum(e.duration_ns for e in on_lane if not e.graph_node)


@pytest.mark.real_time  # the spin takes 5 ms only where queued work takes real time
def test_a_long_spin_shows_as_busy_time_and_a_labelled_bar(traced, pyplot):
    compute = next(s for s in traced.summary().streams if s.lane.label == "compute")
    assert compute.busy_ns >= 5_000_000
    spin = max(traced.select("kernel", lane=compute.lane), key=lambda e: e.duration_ns)
    assert spin.label in {text.get_text() for text in traced.plot().axes[0].texts}


def test_summary_numbers_on_a_hand_built_trace():
    summary = summarize(_hand_built())
    by_label = {s.lane.label: s for s in summary.streams}
    assert list(by_label) == ["copies <&>", "compute", "peer Ω"]  # the range lane is not a stream
    expected = {  # label: (events, busy, overlap, idle, gaps, longest gap), in units
        "copies <&>": (3, 20, 12, 10, 1, 10),  # overlap: [5,10) [20,25) with compute, [28,30) with peer
        "compute": (3, 20, 10, 0, 0, 0),  # the node lies inside the replay
        "peer Ω": (5, 17, 2, 15, 1, 15),  # overlap: [28,30) with copies (another device counts too)
    }
    for label, (events, busy, overlap, idle, gaps, longest) in expected.items():
        row = by_label[label]
        assert (row.events, row.gaps) == (events, gaps)
        assert (row.busy_ns, row.overlap_ns, row.idle_ns, row.longest_gap_ns) == tuple(
            units * UNIT_NS for units in (busy, overlap, idle, longest))

    kinds = {k.kind: k for k in summary.kinds}
    assert list(kinds) == ["kernel", "copy", "memset", "event_record", "event_wait", "graph", "range"]
    assert (kinds["kernel"].count, kinds["kernel"].total_ns) == (3, 16 * UNIT_NS)
    assert (kinds["copy"].count, kinds["copy"].bytes) == (2, 4_001_000)
    assert kinds["copy"].gbps == pytest.approx(4_001_000 / (17 * UNIT_NS))
    assert kinds["memset"].gbps == pytest.approx(500 / (10 * UNIT_NS))
    assert (kinds["event_wait"].count, kinds["event_wait"].total_ns, kinds["event_wait"].gbps) == (3, 0, None)
    assert kinds["range"].total_ns == 140 * UNIT_NS
    assert summary.duration_ns == 100 * UNIT_NS


def test_summary_text_is_fixed_width_tables():
    text = str(summarize(_hand_built()))
    assert "simulator" not in text
    lines = text.splitlines()
    stream_rows = [line for line in lines if line.startswith(("stream ", "copies <&>", "compute", "peer Ω"))]
    assert len(stream_rows) == 4 and len({len(line) for line in stream_rows}) == 1
    assert re.search(r"^copies <&>\s+0\s+3\s+2\.000\s+1\.200\s+1\.000\s+1\s+1\.000$", text, re.MULTILINE)
    assert re.search(r"^copy\s+2\s+1\.700\s+4 MB\s+2\.35$", text, re.MULTILINE)
    assert str(summarize(_hand_built("sim"))).splitlines()[0] == (
        "Times are the simulator's host times, not GPU times.")


def test_summary_html_escapes_labels():
    page = summarize(_hand_built("sim"))._repr_html_()
    assert page.count("<table>") == 2
    assert "copies &lt;&amp;&gt;" in page and "copies <&>" not in page
    assert "simulator&#x27;s host times" in page


def test_summary_of_a_real_trace_renders(traced):
    summary = traced.summary()
    text = str(summary)
    for row in summary.streams:
        assert row.lane.label in text
    assert ("host times" in text.splitlines()[0]) == (traced.backend == "sim")
    assert "<table>" in summary._repr_html_()


# Export ----------------------------------------------------------------------------------------------------
def _load(path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_export_writes_a_chrome_trace(traced, tmp_path):
    path = traced.export(str(tmp_path / "run.json"))
    assert path == tmp_path / "run.json"
    document = _load(path)
    assert document["displayTimeUnit"] == "ns"
    assert document["otherData"] == {"backend": traced.backend, "generator": f"cuweave {cw.__version__}"}
    records = document["traceEvents"]

    slices = [r for r in records if r["ph"] == "X"]
    assert len(slices) == sum(1 for e in traced.events if e.duration_ns > 0)
    assert sum(1 for r in records if r["ph"] == "i") == sum(1 for e in traced.events if e.duration_ns == 0)
    for record in slices:
        assert {"ts", "dur", "pid", "tid", "name", "cat"} <= record.keys()
        assert record["cat"] in KINDS and record["dur"] > 0
    copy = next(r for r in slices if r["cat"] == "copy")
    assert {"bytes", "direction", "GB/s", "call_site", "correlation"} <= copy["args"].keys()
    assert copy["args"]["call_site"].startswith(__file__)
    kernels = [e for e in traced.events if e.kind == "kernel" and e.duration_ns > 0]
    assert sorted(r["args"]["name"] for r in slices if r["cat"] == "kernel") == sorted(e.name for e in kernels)

    thread_names = {(r["pid"], r["tid"]): r["args"]["name"] for r in records if r["name"] == "thread_name"}
    assert sorted(thread_names.values()) == sorted(lane.label for lane in traced.lanes)
    assert {(r["pid"], r["tid"]) for r in records if r["ph"] in "Xi"} <= thread_names.keys()
    process_names = {r["pid"]: r["args"]["name"] for r in records if r["name"] == "process_name"}
    assert sorted(process_names.values()) == ["GPU 0", "host"]
    pid_of = {thread_names[key]: key[0] for key in thread_names}
    assert process_names[pid_of["copies"]] == process_names[pid_of["compute"]] == "GPU 0"
    sort_index = {thread_names[(r["pid"], r["tid"])]: r["args"]["sort_index"]
                  for r in records if r["name"] == "thread_sort_index"}
    assert sorted(sort_index, key=sort_index.get) == [lane.label for lane in traced.lanes]

    starts = [r for r in records if r["ph"] == "s"]
    finishes = [r for r in records if r["ph"] == "f"]
    assert len(finishes) == len(_linked_waits(traced.events)) >= 1
    assert {r["id"] for r in starts} == {r["id"] for r in finishes}
    assert all(r["bp"] == "e" for r in finishes)


def test_export_flows_join_a_record_to_each_wait(tmp_path):
    trace = _hand_built()
    records = _load(export(trace, tmp_path / "flows.json"))["traceEvents"]
    thread_of = {r["args"]["name"]: (r["pid"], r["tid"]) for r in records if r["name"] == "thread_name"}
    starts = [r for r in records if r["ph"] == "s"]
    finishes = [r for r in records if r["ph"] == "f"]
    assert [(r["id"], (r["pid"], r["tid"]), r["ts"]) for r in starts] == [(1, thread_of["copies <&>"], 3000.0)]
    assert sorted((r["id"], (r["pid"], r["tid"]), r["ts"]) for r in finishes) == [
        (1, thread_of["compute"], 3100.0), (1, thread_of["peer Ω"], 3600.0)]  # link 9 has no record: no flow
    record = next(r for r in records if r.get("cat") == "event_record")
    assert (record["ph"], record["s"], record["ts"], record["args"]["placed"]) == ("i", "t", 3000.0, True)

    processes = {r["pid"]: r["args"]["name"] for r in records if r["name"] == "process_name"}
    assert [processes[thread_of[lane.label][0]] for lane in trace.lanes] == ["GPU 0", "GPU 0", "GPU 1", "host"]
    assert len({tid for _, tid in thread_of.values()}) == len(trace.lanes)
    kernel = next(r for r in records if r.get("cat") == "kernel" and r["tid"] == thread_of["copies <&>"][1])
    assert (kernel["name"], kernel["ts"], kernel["dur"]) == ("fill_kernel<float>", 2000.0, 1000.0)
    assert kernel["args"]["name"] == "void ns::fill_kernel<float>(float*, int)"


def test_export_writes_utf8(tmp_path):
    path = export(_hand_built(), tmp_path / "names.json")
    assert "peer Ω" in path.read_bytes().decode("utf-8")


# Chart -----------------------------------------------------------------------------------------------------
def _tick_labels(ax) -> list[str]:
    return [label.get_text() for label in ax.get_yticklabels()]


def _arrows(ax) -> list:
    from matplotlib.patches import FancyArrowPatch

    return [patch for patch in ax.patches if isinstance(patch, FancyArrowPatch)]


def _marker_points(ax) -> set[tuple[float, float]]:
    return {(x, y) for line in ax.lines if line.get_marker() not in ("None", None, "")
            for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)}


def test_plot_draws_a_lane_per_stream_and_arrows_for_waits(traced, pyplot):
    from matplotlib.figure import Figure

    figure = traced.plot()
    assert isinstance(figure, Figure) and pyplot.fignum_exists(figure.number)
    ax = figure.axes[0]
    assert _tick_labels(ax) == [lane.label for lane in traced.lanes]
    assert len(_arrows(ax)) == len(_linked_waits(traced.events)) >= 1
    assert ("simulator: host times" in ax.get_title()) == (traced.backend == "sim")
    assert {"GPU 0", "host"} <= {text.get_text() for text in ax.texts}
    figure.canvas.draw()


def test_plot_of_a_hand_built_trace(pyplot):
    trace = _hand_built()
    ax = plot(trace).axes[0]
    assert _tick_labels(ax) == ["copies <&>", "compute", "peer Ω", "ranges, thread 7"]
    assert len(_arrows(ax)) == 2  # link 1 to both of its waits; link 9 has no record
    assert ax.get_title() == "cuweave trace (cuda: GPU times)"
    assert ax.get_xlabel() == "time since trace start (ms)"
    separators = [line for line in ax.lines if line.get_marker() in ("None", None, "")]
    assert sorted(line.get_ydata()[0] for line in separators) == [1.5, 2.5]  # GPU 0 | GPU 1 | host
    texts = {text.get_text() for text in ax.texts}
    assert {"GPU 0", "GPU 1", "host", "fill_kernel<float>", "H2D 4 MB 4.0 GB/s", "outer", "inner"} <= texts
    row = {lane: index for index, lane in enumerate(trace.lanes)}
    for event in trace.events:
        if event.duration_ns == 0:  # zero-length work is still drawn, as a marker
            assert (event.start_ns / 1e6, row[event.lane]) in _marker_points(ax)
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend[:6] == ["kernel", "copy H2D", "copy P2P", "memset", "graph replay", "range"]


def test_plot_options(pyplot):
    trace = _hand_built()
    figure = plot(trace, labels=False, time_unit="us", title="step 3", figsize=(6, 3))
    ax = figure.axes[0]
    assert {text.get_text() for text in ax.texts} == {"GPU 0", "GPU 1", "host"}
    assert ax.get_xlim()[1] == pytest.approx(1.01 * 100 * UNIT_NS / 1e3)
    assert ax.get_xlabel() == "time since trace start (µs)"
    assert ax.get_title() == "step 3 (cuda: GPU times)"
    assert tuple(figure.get_size_inches()) == (6, 3)
    opened = pyplot.get_fignums()
    with pytest.raises(ValueError, match="time_unit"):
        plot(trace, time_unit="minutes")
    assert pyplot.get_fignums() == opened


def test_plot_into_given_axes(pyplot):
    figure, (top, bottom) = pyplot.subplots(2, 1)
    assert plot(_hand_built(), ax=bottom) is figure
    assert _tick_labels(bottom) == [lane.label for lane in _hand_built().lanes]
    assert not top.has_data() and len(pyplot.get_fignums()) == 1


def test_plot_of_an_empty_trace(pyplot):
    with cw.trace() as t:
        pass
    ax = t.plot().axes[0]
    assert _tick_labels(ax) == [] and "nothing ran" in {text.get_text() for text in ax.texts}
    assert str(t.summary())
    ax.figure.canvas.draw()


# Jupyter ---------------------------------------------------------------------------------------------------
def test_html_view_inlines_the_chart_and_the_tables(traced, pyplot):
    opened = pyplot.get_fignums()
    page = traced._repr_html_()
    assert pyplot.get_fignums() == opened  # drawn without pyplot: nothing for Jupyter to show twice
    encoded = re.search(r'<img [^>]*src="data:image/png;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(encoded).startswith(b"\x89PNG\r\n\x1a\n")
    assert page.index("<img") < page.index("<table>")
    assert page.count("<table>") == 2


def test_views_without_matplotlib_are_cuwaves_own_svg(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    trace = _hand_built()
    drawn = plot(trace, title="no matplotlib")
    assert isinstance(drawn, TimelineSvg) and drawn._repr_svg_() == str(drawn)
    assert "no matplotlib" in drawn
    with pytest.raises(ImportError, match=r"pip install matplotlib") as raised:
        plot(trace, ax=object())  # axes to draw into need matplotlib
    assert isinstance(raised.value.__cause__, ImportError)
    page = html_view(trace)
    assert "<img" not in page and page.count("<table>") == 2
    assert page.index("<svg") < page.index("<table>")


# SVG ----------------------------------------------------------------------------------------------------------
def _svg_root(svg: str):
    return ElementTree.fromstring(svg)


def _with_class(root, name: str) -> list:
    return [element for element in root.iter() if name in (element.get("class") or "").split()]


def test_the_svg_has_a_lane_per_lane_with_its_kernels_and_escaped_labels():
    trace = _hand_built()
    svg = timeline_svg(trace, title="a <title> & more")
    lanes = svg_lanes(svg)  # parses: labels such as "copies <&>" are escaped
    assert [label for label, _ in lanes] == [lane.label for lane in trace.lanes]
    assert [kernels for _, kernels in lanes] == [1, 1, 1, 0]  # the empty kernel is a tick, still a kernel bar
    root = _svg_root(svg)
    assert len(_with_class(root, "event_record")) == 1 and len(_with_class(root, "event_wait")) == 3
    assert len(_with_class(root, "wait-arrow")) == 2  # the wait for link 9 has no traced record
    assert len(_with_class(root, "graph")) == 1 and len(_with_class(root, "range")) == 2
    assert "a &lt;title&gt; &amp; more (cuda: GPU times)" in svg


def test_each_bar_says_what_it_is_and_how_long_it_took():
    root = _svg_root(timeline_svg(_hand_built()))
    titles = [element.findtext("{http://www.w3.org/2000/svg}title") for element in _with_class(root, "bar")]
    assert "H2D 4 MB 4.0 GB/s: 1 ms" in titles  # 4 MB in 1 ms
    assert "node_kernel: 0.6 ms" in titles


@pytest.mark.parametrize("unit, ticks", [("auto", ["0", "2", "4", "6", "8", "10"]), ("us", None), ("s", None)])
def test_the_svg_time_axis_takes_the_unit_given_or_the_one_that_suits_the_span(unit, ticks):
    svg = timeline_svg(_hand_built(), time_unit=unit)
    labels = [tick.text for tick in _with_class(_svg_root(svg), "tick")]
    assert f"({dict(auto='ms', us='µs', s='s')[unit]})" in svg
    if ticks:
        assert labels == ticks
    assert len(labels) >= 2


def test_an_empty_trace_draws_an_empty_timeline_saying_so(tmp_path):
    empty = StandInTrace(events=[], lanes=[], backend="sim")
    svg = timeline_svg(empty)
    assert svg_lanes(svg) == [] and "nothing ran" in svg
    assert svg.save(tmp_path / "empty.svg").read_text(encoding="utf-8") == svg
    with pytest.raises(ValueError, match="time_unit"):
        timeline_svg(empty, time_unit="minutes")
