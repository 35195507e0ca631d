"""Bad event arguments and misuse."""

from __future__ import annotations

import pytest

import cuweave as cw


def test_interprocess_with_timing_is_value_error_naming_the_fix():
    with pytest.raises(ValueError) as info:
        cw.Event(timing=True, interprocess=True)
    msg = str(info.value)
    assert "timing" in msg and "interprocess" in msg, msg


@pytest.mark.parametrize("untimed", ["start", "end", "both"])
def test_elapsed_time_without_timing_is_value_error(stream, untimed):
    start = cw.Event(timing=untimed == "end")
    end = cw.Event(timing=untimed == "start")
    start.record(stream)
    end.record(stream)
    end.synchronize()
    with pytest.raises(ValueError, match=r"timing=True"):
        start.elapsed_time(end)


@pytest.mark.parametrize("bad", [None, 1.0, "end"])
def test_elapsed_time_against_a_non_event_is_type_error(bad):
    with pytest.raises(TypeError):
        cw.Event(timing=True).elapsed_time(bad)


def test_ipc_handle_of_a_local_event_is_value_error():
    with pytest.raises(ValueError):
        cw.Event().ipc_handle()


def test_from_ipc_handle_of_a_non_bytes_is_type_error():
    with pytest.raises(TypeError):
        cw.Event.from_ipc_handle("not bytes")


@pytest.mark.gpu  # IPC events need a GPU: the simulator refuses every handle (see the test below)
@pytest.mark.parametrize("bad", [b"", b"x" * 10], ids=["empty", "short"])
def test_from_ipc_handle_rejects_bad_handles(bad):
    with pytest.raises((TypeError, ValueError)):
        cw.Event.from_ipc_handle(bad)


IPC_CALLS = {
    "ipc_handle": lambda: cw.Event(interprocess=True).ipc_handle(),
    "from_ipc_handle": lambda: cw.Event.from_ipc_handle(bytes(64)),
}


@pytest.mark.skipif(cw.backend() != "sim", reason="the simulator's refusal of interprocess events")
@pytest.mark.parametrize("call", list(IPC_CALLS.values()), ids=list(IPC_CALLS))
def test_interprocess_events_are_not_supported_on_the_simulator(call):
    with pytest.raises(cw.DeviceUnavailableError) as info:  # a CudaError, with CUDA's name for the refusal
        call()
    err = info.value
    assert "need the CUDA backend and a GPU" in str(err)
    assert err.name == "cudaErrorNotSupported"
    assert err.code == 801
    assert err.call.startswith("cudaIpc"), err.call


@pytest.mark.parametrize("bad", [object(), 1.5, "stream"])
def test_record_on_a_non_stream_is_type_error(bad):
    with pytest.raises(TypeError):
        cw.Event().record(bad)
