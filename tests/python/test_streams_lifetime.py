"""Stream lifetimes: closing with queued work, adopted owners kept alive, arrays keep their stream."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import cuweave as cw
from _support import Gate, released


def test_close_with_queued_work_still_completes_it():
    reader = cw.Stream()
    try:
        buf = cw.zeros((1 << 16,), np.float32, stream=reader)
        reader.synchronize()
        s = cw.Stream()
        with Gate(s) as gate:
            cw.ops.fill(buf, 7.0, stream=s)
            filled = s.record()
            s.close()  # must neither drop nor wait for the queued work: it returns with the fill held
            assert filled.query() is False
            gate.open()
            cw.synchronize()
        assert filled.query() is True
        assert np.all(buf.to_numpy(stream=reader) == 7)
    finally:
        reader.close()


def test_dropping_a_stream_with_queued_work_still_completes_it():
    reader = cw.Stream()
    try:
        buf = cw.zeros((1 << 16,), np.float32, stream=reader)
        reader.synchronize()
        s = cw.Stream()
        with Gate(s) as gate:
            cw.ops.fill(buf, 5.0, stream=s)
            filled = s.record()
            del s  # with the fill held behind the gate
            gc.collect()
            assert filled.query() is False
            gate.open()
            cw.synchronize()
        assert filled.query() is True
        assert np.all(buf.to_numpy(stream=reader) == 5)
    finally:
        reader.close()


def test_device_array_keeps_its_stream_usable():
    s = cw.Stream()
    d = cw.zeros((16,), np.float32, stream=s)
    del s
    gc.collect()
    assert d.stream.closed is False
    cw.ops.fill(d, 3.0, stream=d.stream)
    d.stream.synchronize()
    assert np.all(d.to_numpy() == 3)


class _Owner:
    """Stands for a peer's stream object: owns a cuweave stream until it dies."""

    def __init__(self):
        self.inner = cw.Stream()

    def __cuda_stream__(self):
        return (0, self.inner.handle)


def test_from_external_keeps_the_foreign_object_alive():
    owner = _Owner()
    ref = weakref.ref(owner)
    ext = cw.Stream.from_external(owner)
    del owner
    gc.collect()
    assert ref() is not None, "the adopted stream's owner was released"
    cw.ops.spin(0.01, stream=ext)
    ext.synchronize()
    assert ext.query() is True
    del ext
    assert released(ref), "dropping the adopted stream did not release its owner"


@pytest.mark.gpu  # cupy
def test_from_external_keeps_a_cupy_stream_alive(cupy):
    cs = cupy.cuda.Stream(non_blocking=True)
    handle = cs.ptr
    ext = cw.Stream.from_external(cs)
    del cs
    gc.collect()
    cw.ops.spin(0.01, stream=ext)  # a destroyed stream handle would raise a CudaError here
    ext.synchronize()
    assert ext.handle == handle


class _Wrapper:
    """Stands for a peer's wrapper of a cuweave stream (torch.cuda.ExternalStream, CuPy's Stream.from_external)."""

    def __init__(self, stream):
        self.stream = stream

    def __cuda_stream__(self):
        return (0, self.stream.handle)


def test_adoptions_of_a_stream_close_with_it():
    # Note [Adoptions of a handle cuweave destroys]: a closed stream's handle is gone, and CUDA does not refuse it.
    s = cw.Stream()
    by_handle = cw.Stream.from_external(s.handle)
    by_protocol = cw.Stream.from_external(_Wrapper(s))
    s.close()
    assert by_handle.closed and by_protocol.closed
    with pytest.raises(ValueError, match="adopted a stream that cuweave has since closed"):
        by_handle.synchronize()
    with pytest.raises(ValueError, match="adopted a stream that cuweave has since closed"):
        cw.ops.spin(0.001, stream=by_protocol)
    assert repr(by_handle) == "<cuweave.Stream closed>"


def test_adoptions_of_a_dropped_stream_close_as_it_goes():
    s = cw.Stream()
    adopted = cw.Stream.from_external(s.handle)
    del s
    gc.collect()
    assert adopted.closed


def test_an_adoption_of_another_librarys_stream_is_not_closed_by_cuweave():
    foreign = cw._core.backend_calls.create_stream(0)  # a stream cuweave did not make
    try:
        first, second = cw.Stream.from_external(foreign), cw.Stream.from_external(foreign)
        del first
        gc.collect()
        assert not second.closed
        second.synchronize()
    finally:
        cw._core.backend_calls.destroy_stream(foreign)


def test_memory_of_an_adoption_outlives_the_work_queued_through_it_after_the_stream_closes():
    reader = cw.Stream()
    try:
        s = cw.Stream()
        adopted = cw.Stream.from_external(s.handle)
        buf = cw.zeros((1 << 16,), np.float32, stream=adopted)
        out = cw.zeros((1 << 16,), np.float32, stream=reader)
        reader.synchronize()
        with Gate(s) as gate:
            cw.ops.fill(buf, 7.0, stream=adopted)
            cw.copy_async(out, buf, stream=adopted)
            done = adopted.record()
            s.close()
            del buf  # freed once the adoption's closing event completes, not now
            gc.collect()
            assert done.query() is False
            gate.open()
            cw.synchronize()
        assert np.all(out.to_numpy(stream=reader) == 7)
    finally:
        reader.close()


@pytest.mark.cupti
def test_a_trace_that_ends_after_an_adopted_stream_closed_ends(tmp_path):
    # The trace's end names every live stream's lane, asking CUPTI each one's id; with a destroyed handle
    # cuptiGetStreamIdEx crashed on an H200 (and the simulator stops the process there, as the GPU did).
    program = tmp_path / "program.py"
    program.write_text(
        "import cuweave as cw\n"
        "s = cw.Stream()\n"
        "adopted = cw.Stream.from_external(s.handle)\n"
        "s.close()\n"
        "with cw.trace() as t:\n"
        "    cw.ops.spin(0.001)\n"
        "print('lanes', len(t.lanes) > 0)\n"
    )
    done = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "lanes True" in done.stdout


ADOPTING_PROGRAM = (
    "import numpy as np\n"
    "import cuweave as cw\n"
    "handle = cw._core.backend_calls.create_stream(0)\n"
    "adopted = cw.Stream.from_external(handle)\n"
)


def stops_after(tmp_path, program: str, before: str, after: str, **run) -> str:
    """Runs `program` (ADOPTING_PROGRAM, then its own lines) in a process of its own, which must stop where
    CUDA crashes: having printed `before`, not `after`. Returns what it printed on stderr."""
    path = tmp_path / "program.py"
    path.write_text(ADOPTING_PROGRAM + program)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, **run)
    assert done.returncode != 0 and before in done.stdout and after not in done.stdout, done.stdout + done.stderr
    return done.stderr


@pytest.mark.skipif(cw.backend() != "sim", reason="the simulator's stop where CUDA crashes")
def test_memory_freed_on_an_adopted_stream_its_owner_destroyed_stops_the_simulator(tmp_path):
    # cudaFreeAsync on a destroyed stream crashed the process on an H200; the simulator stops there too, naming
    # the call, rather than passing over an error the free's caller cannot raise.
    program = """\
memory = cw.zeros(16, np.float32, stream=adopted)
cw.synchronize()
cw._core.backend_calls.destroy_stream(handle)
print('destroyed', flush=True)
del memory
print('freed', flush=True)
"""
    # Without the sanitizer, whose question about the stream (cudaStreamQuery) would come before the free.
    unsanitized = {name: value for name, value in os.environ.items() if name != "CUWEAVE_SANITIZE"}
    said = stops_after(tmp_path, program, "destroyed", "freed", env=unsanitized)
    assert "cudaFreeAsync was given the handle" in said and "outlive the memory" in said, said


@pytest.mark.skipif(cw.backend() != "sim", reason="the simulator's stop where CUDA crashes")
def test_an_adoption_outliving_its_stream_under_the_sanitizer_stops_the_simulator(tmp_path):
    # The sanitizer asks CUDA whether an adopted stream with work it saw queued is idle (its owner may have
    # synchronized it unseen). Asked of a destroyed stream, that crashed the sanitized suite on an H200; the
    # simulator stops there too, naming the call and the rule.
    program = """\
data = cw.zeros(16, np.float32)
cw.synchronize()
with cw.sanitize():
    cw.ops.fill(data, 1.0, stream=adopted)
    cw._core.backend_calls.synchronize(adopted)  # done, unseen by the sanitizer: still asked about
    cw._core.backend_calls.destroy_stream(handle)
    print('destroyed', flush=True)
    cw.ops.fill(data, 2.0)
    print('checked', flush=True)
"""
    said = stops_after(tmp_path, program, "destroyed", "checked")
    assert "cudaStreamQuery was given the handle" in said and "outlive its adoption" in said, said


def test_reads_of_an_array_whose_stream_was_closed_wait_for_its_work():
    # The stream's handle is gone, but the event it recorded as it closed orders every later read: a host read,
    # a DLPack export and a CUDA Array Interface consumer all see the written values.
    stream = cw.Stream()
    cw.ops.spin(0.05, stream=stream)
    written = cw.full(4096, 7.0, np.float32, stream=stream)
    stream.close()
    assert written.to_numpy().tolist() == [7.0] * 4096
    stream = cw.Stream()
    cw.ops.spin(0.05, stream=stream)
    shared = cw.full(4096, 5.0, np.float32, stream=stream)
    stream.close()
    assert shared.__cuda_array_interface__["stream"] is not None  # consumers order after a stream that waited
    assert np.all(cw.from_dlpack(shared).to_numpy() == 5.0)
