"""cuweave.trace(): what ran where, on both backends (CUPTI on a GPU, the scheduler's record on the simulator).

The views (summary, plot, export) are tested in test_trace_views.py.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import cuweave as cw
from cuweave import _core

SPIN_S = 0.05  # long enough that the copy issued beside it ends inside it, on a GPU and the simulator


def here() -> int:
    """The line number of the caller (to check call sites)."""
    return inspect.currentframe().f_back.f_lineno


def interval(event: cw.TraceEvent) -> tuple[int, int]:
    return event.start_ns, event.end_ns


def overlaps(a: cw.TraceEvent, b: cw.TraceEvent) -> bool:
    return a.start_ns < b.end_ns and b.start_ns < a.end_ns


def lane_of(trace: cw.Trace, stream: cw.Stream) -> tuple[int, int]:
    """(stream id, device) that the trace's events on `stream` carry."""
    return _core.trace_stream_id(stream), stream.device


def on(trace: cw.Trace, stream: cw.Stream, kind: str | None = None) -> list[cw.TraceEvent]:
    return trace.select(kind, stream=stream)


@pytest.fixture
def big_copy():
    """A pinned source and device destination large enough that the copy takes measurable time."""
    nbytes = 256 << 20 if cw.backend() == "cuda" else 32 << 20
    source = cw.pinned_empty(nbytes, np.uint8)
    source[:] = 7
    return source, cw.empty(nbytes, np.uint8)


@pytest.mark.real_time
def test_a_copy_beside_a_kernel_on_another_stream_overlaps_it(stream, other_stream, big_copy):
    source, destination = big_copy
    with cw.trace() as t:
        cw.ops.spin(SPIN_S, stream=stream)
        cw.copy_async(destination, source, stream=other_stream)
    (spin,) = on(t, stream, "kernel")
    copies = on(t, other_stream, "copy")
    assert copies and all(c.direction == "H2D" for c in copies)
    assert sum(c.bytes for c in copies) == source.nbytes
    assert any(overlaps(spin, c) for c in copies), (interval(spin), [interval(c) for c in copies])
    assert t.summary().streams[0].overlap_ns > 0
    assert (destination.to_numpy() == 7).all()


def test_the_same_copy_ordered_after_the_kernel_does_not_overlap_it(stream, other_stream, big_copy):
    source, destination = big_copy
    with cw.trace() as t:
        cw.ops.spin(SPIN_S, stream=stream)
        other_stream.wait(stream.record())
        cw.copy_async(destination, source, stream=other_stream)
    (spin,) = on(t, stream, "kernel")
    copies = on(t, other_stream, "copy")
    assert copies
    assert all(c.start_ns >= spin.end_ns for c in copies), (interval(spin), [interval(c) for c in copies])
    assert all(s.overlap_ns == 0 for s in t.summary().streams)
    (wait,) = on(t, other_stream, "event_wait")
    (record,) = on(t, stream, "event_record")
    assert wait.link == record.link != 0  # the arrow between the lanes
    assert spin.end_ns <= wait.start_ns <= min(c.start_ns for c in copies)


def test_operations_from_lines_that_take_turns_in_a_loop_are_each_named_at_their_own_line(stream):
    # Call sites are cached by where in its code a frame is; a loop's lines take turns (two, as an operation making
    # a new array and the free of the one it replaced, then three).
    x = cw.zeros(256, np.float32, stream=stream)
    issued = []
    with cw.trace() as t:
        for round_ in range(6):
            issued.append(here() + 1)
            cw.ops.add(x, 1.0, out=x, stream=stream)
            issued.append(here() + 1)
            cw.ops.scale(x, 1.0, out=x, stream=stream)
            if round_ >= 3:
                issued.append(here() + 1)
                cw.ops.multiply(x, x, out=x, stream=stream)
    kernels = sorted(on(t, stream, "kernel"), key=lambda kernel: kernel.start_ns)
    assert [kernel.call_site.line for kernel in kernels] == issued
    assert {kernel.call_site.file for kernel in kernels} == {__file__}


def test_every_kind_of_operation_appears_with_its_stream_and_call_site(stream, other_stream):
    host = np.arange(4096, dtype=np.float32)
    x = cw.to_device(host, stream=stream)
    stream.synchronize()
    ran = threading.Event()
    lines = {}
    with cw.trace() as t:
        lines["copy"] = here() + 1
        y = cw.to_device(host, stream=stream)
        lines["memset"] = here() + 1
        z = cw.zeros(4096, np.float32, stream=stream)
        lines["kernel"] = here() + 1
        cw.ops.add(x, y, out=z, stream=stream)
        lines["record"] = here() + 1
        done = stream.record()
        lines["wait"] = here() + 1
        other_stream.wait(done)
        lines["callback"] = here() + 1
        other_stream.launch_host_func(ran.set)
        with cw.capture(other_stream) as cap:
            cw.ops.scale(z, 2.0, out=z)
        lines["graph"] = here() + 1
        cap.graph.replay(other_stream)
        with cw.range("read back"):
            lines["back"] = here() + 1
            result = z.to_numpy(stream=other_stream)
    np.testing.assert_array_equal(result, 4 * host)
    assert ran.is_set()

    expected = {  # kind -> (stream, line that issued it)
        "memset": (stream, lines["memset"]),
        "event_record": (stream, lines["record"]),
        "event_wait": (other_stream, lines["wait"]),
        "host_callback": (other_stream, lines["callback"]),
        "graph": (other_stream, lines["graph"]),
    }
    for kind, (where, line) in expected.items():
        events = t.select(kind)
        assert len(events) == 1, (kind, events)
        assert (events[0].stream, events[0].device) == lane_of(t, where), kind
        assert events[0].call_site.file == __file__ and events[0].call_site.line == line, (kind, events[0])
    kernels = [k for k in on(t, stream, "kernel")]
    assert len(kernels) == 1 and kernels[0].call_site.line == lines["kernel"]
    (h2d,) = t.select("copy", stream=stream)
    assert h2d.direction == "H2D" and h2d.bytes == host.nbytes and h2d.call_site.line == lines["copy"]
    d2h = [c for c in on(t, other_stream, "copy") if c.direction == "D2H"]
    assert d2h and sum(c.bytes for c in d2h) == host.nbytes and d2h[0].call_site.line == lines["back"]
    assert t.select("host_callback")[0].name == "Event.set"
    (node,) = [e for e in t.events if e.graph_node]
    assert node.kind == "kernel" and node.correlation == t.select("graph")[0].correlation
    (read_back,) = t.select("range")
    assert read_back.name == "read back" and read_back.device is None and read_back.thread == threading.get_native_id()
    assert set(t.kinds()) == {"copy", "memset", "kernel", "event_record", "event_wait", "host_callback", "graph",
                              "range"}
    # Each stream is one lane, named by what cuweave knows of it.
    assert {e.lane for e in on(t, stream)} == {t.select("memset")[0].lane}


def test_a_graph_replay_spans_its_nodes(stream):
    x = cw.to_device(np.zeros(1024, np.float32), stream=stream)
    with cw.capture(stream) as cap:
        for _ in range(3):
            cw.ops.add(x, 1.0, out=x)
    with cw.trace() as t:
        cap.graph.replay(stream)
        cap.graph.replay(stream)
    assert (x.to_numpy(stream=stream) == 6).all()
    replays = t.select("graph")
    assert len(replays) == 2
    for replay in replays:
        nodes = [e for e in t.events if e.graph_node and e.correlation == replay.correlation]
        assert len(nodes) == 3 and all(n.kind == "kernel" for n in nodes)
        assert all(replay.start_ns <= n.start_ns <= n.end_ns <= replay.end_ns for n in nodes)
    assert replays[0].end_ns <= replays[1].start_ns  # replays of one graph never overlap


def test_ranges_nest_in_order_on_their_thread_lane():
    @cw.range
    def decorated():
        cw.ops.fill(x, 1.0)

    x = cw.zeros(16, np.float32)
    with cw.trace() as t:
        with cw.range("outer"):
            with cw.range("first"):
                cw.ops.fill(x, 2.0)
            with cw.range("second"):
                decorated()
    ranges = {r.name: r for r in t.select("range")}
    decorated_name = "test_ranges_nest_in_order_on_their_thread_lane.<locals>.decorated"
    assert set(ranges) == {"outer", "first", "second", decorated_name}
    outer, first, second = ranges["outer"], ranges["first"], ranges["second"]
    inner = ranges[decorated_name]
    assert (outer.depth, first.depth, second.depth, inner.depth) == (0, 1, 1, 2)
    assert outer.start_ns <= first.start_ns <= first.end_ns <= second.start_ns <= inner.start_ns
    assert inner.end_ns <= second.end_ns <= outer.end_ns
    assert len({r.lane for r in ranges.values()}) == 1 and outer.lane.device is None
    assert outer.lane in t.lanes and t.lanes[-1] == outer.lane  # host lanes after the streams


def _nvtx_recorder(tmp_path) -> str:
    """Builds data/nvtx_recorder.c (needs a C compiler and the CUDA toolkit's nvtx3 headers, as building
    cuweave does); skips where they are missing."""
    import shutil

    compiler = shutil.which("cc") or shutil.which("gcc")
    nvcc = shutil.which("nvcc")
    roots = [os.environ.get("CUDA_HOME"), os.path.dirname(os.path.dirname(nvcc)) if nvcc else None, "/usr/local/cuda"]
    include = next((os.path.join(r, "include") for r in roots
                    if r and os.path.isfile(os.path.join(r, "include", "nvtx3", "nvToolsExt.h"))), None)
    if compiler is None or include is None:
        pytest.skip("needs a C compiler and the CUDA toolkit's nvtx3 headers")
    library = tmp_path / "libnvtx_recorder.so"
    source = os.path.join(os.path.dirname(__file__), "data", "nvtx_recorder.c")
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-I", include, source, "-o", str(library), "-ldl"],
                   check=True, capture_output=True, timeout=120)
    return str(library)


def test_ranges_are_nvtx_ranges_that_tools_see(tmp_path):
    script = (
        "import cuweave as cw\n"
        "@cw.range('decorated')\n"
        "def step():\n"
        "    pass\n"
        "with cw.range('outer'):\n"
        "    step()\n"
        "    with cw.range('inner'):\n"
        "        pass\n"
    )
    out = tmp_path / "nvtx.log"
    env = dict(os.environ, NVTX_INJECTION64_PATH=_nvtx_recorder(tmp_path), NVTX_RECORDER_OUT=str(out))
    child = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert out.read_text().splitlines() == ["push outer", "push decorated", "pop", "push inner", "pop", "pop"]


def test_a_range_closed_twice_is_an_error():
    with pytest.raises(ValueError, match="no cuweave.range is open"):
        with cw.range("once"):
            _core.range_pop()
    assert _core.open_ranges() == 0


def test_traces_of_two_threads_do_not_mix():
    barrier = threading.Barrier(2)
    results: dict[str, tuple[cw.Trace, cw.Stream, int]] = {}
    errors: list[BaseException] = []

    def work(name: str, kernels: int) -> None:
        try:
            s = cw.Stream(name=name)
            x = cw.zeros(256, np.float32, stream=s)
            s.synchronize()
            with cw.trace() as t:
                barrier.wait()  # both traces are open at once
                for _ in range(kernels):
                    cw.ops.add(x, 1.0, out=x, stream=s)
                barrier.wait()
            assert (x.to_numpy(stream=s) == kernels).all()
            results[name] = (t, s, threading.get_native_id())
        except BaseException as error:  # noqa: BLE001 - re-raised by the test
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(name, n)) for name, n in (("first", 3), ("second", 5))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for name, kernels in (("first", 3), ("second", 5)):
        t, s, thread_id = results[name]
        assert len(t.select("kernel")) == kernels
        assert {e.thread for e in t.events} == {thread_id}
        assert {(e.stream, e.device) for e in t.events} == {lane_of(t, s)}
        assert [lane.label for lane in t.lanes] == [name]


def test_a_trace_for_all_threads_sees_other_threads_work(stream, other_stream):
    x = cw.zeros(64, np.float32, stream=other_stream)
    other_stream.synchronize()

    def elsewhere() -> None:
        cw.ops.add(x, 1.0, out=x, stream=other_stream)

    with cw.trace(all_threads=True) as everything, cw.trace() as mine:
        cw.ops.spin(0.0, stream=stream)
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
    assert len(everything.select("kernel")) == 2
    assert len(mine.select("kernel")) == 1
    assert (x.to_numpy(stream=other_stream) == 1).all()


def test_prefetch_copies_belong_to_the_trace_of_the_line_that_made_the_iterator():
    batches = [np.full(1 << 16, i, np.float32) for i in range(3)]
    with cw.trace() as t:
        line = here() + 1
        for i, batch in enumerate(cw.prefetch(batches, depth=2)):
            assert (batch.to_numpy() == i).all()
    h2d = [c for c in t.select("copy") if c.direction == "H2D"]
    assert len(h2d) == 3
    assert {c.call_site.line for c in h2d} == {line} and {c.call_site.file for c in h2d} == {__file__}
    assert all(c.thread != threading.get_native_id() for c in h2d)  # issued by the prefetch thread


def test_work_outside_the_block_is_not_recorded(stream):
    x = cw.zeros(64, np.float32, stream=stream)
    cw.ops.add(x, 1.0, out=x, stream=stream)
    with cw.trace() as t:
        cw.ops.scale(x, 3.0, out=x, stream=stream)
    cw.ops.add(x, 1.0, out=x, stream=stream)
    assert (x.to_numpy(stream=stream) == 4).all()
    assert [e.kind for e in t.events] == ["kernel"]
    assert not _core.trace_active()


def test_leaving_the_block_waits_for_the_work_issued_in_it(stream):
    with cw.trace() as t:
        cw.ops.spin(0.02, stream=stream)
    assert stream.query()
    (spin,) = t.select("kernel")
    assert spin.end_ns <= t.duration_ns


def test_cuweave_bookkeeping_is_left_out(stream):
    host = cw.pinned_empty(1 << 20, np.uint8)
    device = cw.empty(1 << 20, np.uint8, stream=stream)
    with cw.trace() as t:
        cw.copy_async(device, host, stream=stream).wait()
        device.to_numpy(stream=stream)
    assert sorted(t.kinds()) == ["copy"], t.kinds()


def test_named_streams_name_their_lanes(stream):
    named = cw.Stream(name="loader", priority="high")
    with cw.trace() as t:
        cw.ops.spin(0.0, stream=named)
        cw.ops.spin(0.0, stream=cw.default_stream())
        cw.ops.spin(0.0, stream=stream)
    labels = [lane.label for lane in t.lanes]
    high = cw.Device(0).properties.priority_range[1]
    assert labels[0] == "legacy default stream"  # first on its device
    assert f"loader (priority {high})" in labels
    assert f"stream {_core.trace_stream_id(stream)}" in labels
    assert repr(named).startswith("<cuweave.Stream 'loader' owned")


def test_a_trace_is_read_after_its_block_and_used_once():
    t = cw.trace()
    with pytest.raises(RuntimeError, match="never ran"):
        t.events  # noqa: B018
    with t:
        with pytest.raises(RuntimeError, match="still open"):
            t.events  # noqa: B018
        assert t.recording and "recording" in repr(t)
    with pytest.raises(ValueError, match="already used"):
        with t:
            pass
    assert t.events == [] and "nothing ran" in repr(t)
    with pytest.raises(ValueError, match="unknown kind"):
        t.select("kernels")


def test_an_exception_in_the_block_still_closes_the_trace(stream):
    with pytest.raises(ZeroDivisionError):
        with cw.trace() as t:
            cw.ops.spin(0.0, stream=stream)
            1 / 0  # noqa: B018
    assert not t.recording and not _core.trace_active()
    assert t.kinds()["kernel"] == 1


def test_a_callbacks_work_belongs_to_the_trace_that_launched_it(stream, other_stream):
    x = cw.zeros(64, np.float32, stream=other_stream)
    other_stream.synchronize()

    def callback() -> None:
        cw.ops.add(x, 1.0, out=x, stream=other_stream)

    with cw.trace() as t:
        stream.launch_host_func(callback)
        stream.synchronize()
    (run,) = t.select("host_callback")
    (kernel,) = t.select("kernel")
    assert kernel.call_site.function.endswith("callback") and kernel.thread != threading.get_native_id()
    assert run.start_ns <= kernel.start_ns or cw.backend() == "cuda"  # the GPU may start it later
    assert (x.to_numpy(stream=other_stream) == 1).all()


# GPU only -------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_cupti_intervals_agree_with_event_timings(stream):
    with cw.trace() as t:
        cw.ops.spin(0.001, stream=stream)  # the first traced launch of a kernel pays for instrumentation
        with cw.timer(stream) as timer:
            cw.ops.spin(0.05, stream=stream)
    spin = t.select("kernel")[-1]
    assert abs(spin.duration_ns / 1e6 - timer.ms) / timer.ms < 0.05, (spin.duration_ns, timer.ms)


@pytest.mark.gpu
def test_other_libraries_kernels_on_cuweave_streams_appear(stream, torch, cupy):
    tensor = torch.ones(1000, device="cuda")
    torch.cuda.synchronize()
    with cw.trace() as t:
        with torch.cuda.stream(torch.cuda.ExternalStream(stream.handle)):
            tensor.add_(1)
        with cupy.cuda.Stream.from_external(stream):  # the __cuda_stream__ protocol
            array = cupy.arange(1000) * 2
        stream.synchronize()
    names = [k.name for k in on(t, stream, "kernel")]
    assert any("at::native" in name for name in names), names
    assert any("cupy" in name for name in names), names
    assert float(tensor[0]) == 2 and int(array[-1]) == 1998


@pytest.mark.gpu
def test_compiled_kernel_graph_nodes_carry_their_names(stream):
    kernel = cw.compile('extern "C" __global__ void bump(float* p) { p[threadIdx.x] += 1.0f; }', "bump")
    x = cw.zeros(32, np.float32, stream=stream)
    with cw.capture(stream) as cap:
        kernel((1,), (32,), (x,))
        kernel((1,), (32,), (x,))
    with cw.trace() as t:
        cap.graph.replay(stream)
    nodes = [e for e in t.events if e.graph_node]
    assert [n.name for n in nodes] == ["bump", "bump"]
    assert (x.to_numpy(stream=stream) == 2).all()


@pytest.mark.gpu
def test_tracing_says_what_is_missing_without_cupti(tmp_path):
    script = "import cuweave as cw\ntry:\n    with cw.trace():\n        pass\nexcept cw.CudaError as e:\n    print(e)\n"
    env = dict(os.environ, CUWEAVE_CUPTI=str(tmp_path / "libcupti.so.13"))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "CUPTI_NOT_FOUND" in out.stdout and "CUWEAVE_CUPTI" in out.stdout, out.stdout


def test_the_export_is_a_chrome_trace(stream, tmp_path):
    with cw.trace() as t:
        cw.ops.spin(0.001, stream=stream)
    path = t.export(tmp_path / "run.json")
    data = json.loads(path.read_text())
    (kernel,) = [e for e in data["traceEvents"] if e.get("cat") == "kernel"]
    assert kernel["ph"] == "X" and kernel["dur"] > 0 and {"ts", "pid", "tid", "name"} <= set(kernel)
