"""Collectives refused with errors that name the problem: bad arguments, mismatched ranks, wrong devices,
captures, a missing NCCL, and races the sanitizer sees."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import cuweave as cw
from _support import RANKS, needs_two



def per_rank(values: np.ndarray) -> list[cw.DeviceArray]:
    arrays = []
    for d in range(RANKS):
        with cw.Device(d):
            arrays.append(cw.to_device(values))
    return arrays


def test_unsupported_dtype_is_a_type_error(comms):
    with pytest.raises(TypeError, match="collectives work on int8, .* not complex64"):
        comms.all_reduce(per_rank(np.zeros(4, np.complex64)))


def test_unknown_op(comms):
    with pytest.raises(ValueError, match='op must be "sum", "prod", "max", "min" or "avg", not "mean"'):
        comms.all_reduce(per_rank(np.zeros(4, np.float32)), op="mean")


def test_out_of_the_wrong_size_or_dtype(comms):
    x = per_rank(np.zeros(4, np.float32))
    with cw.Device(0):
        with pytest.raises(ValueError, match=f"all_gather: out must hold {4 * RANKS} elements, not {4 * RANKS + 1}"):
            comms[0].all_gather(x[0], out=cw.empty(4 * RANKS + 1, np.float32))
        with pytest.raises(TypeError, match="out has dtype float64, the input float32; collectives never convert"):
            comms[0].all_reduce(x[0], out=cw.empty(4, np.float64))


@needs_two
def test_reduce_scatter_needs_a_divisible_first_axis(comms):
    with cw.Device(0):
        x = cw.zeros(RANKS * 2 + 1, np.float32)
        with pytest.raises(ValueError, match=f"length must be a multiple of {RANKS}"):
            comms[0].reduce_scatter(x)


def test_root_and_peer_out_of_range(comms):
    with cw.Device(0):
        x = cw.zeros(4, np.float32)
        with pytest.raises(ValueError, match=f"root {RANKS} is not one of the {RANKS} ranks"):
            comms[0].broadcast(x, root=RANKS)
        with pytest.raises(ValueError, match="peer -1 is not one of"):
            comms[0].send(x, peer=-1)
        with pytest.raises(ValueError, match="cannot send to itself; copy the array instead"):
            comms[0].send(x, peer=0)


def test_list_lengths_must_match_the_ranks(comms):
    with pytest.raises(ValueError, match=f"arrays has {RANKS + 1} entries for {RANKS} ranks"):
        comms.all_reduce(per_rank(np.zeros(2, np.float32)) + [None])


def test_a_closed_communicator_refuses(comms):
    made = cw.collectives.communicators([0])
    with made:
        pass
    assert made[0].closed and "closed" in repr(made[0])
    with cw.Device(0):
        with pytest.raises(ValueError, match="on a closed communicator"):
            made[0].all_reduce(cw.zeros(4, np.float32))


def test_communicators_need_distinct_devices():
    with pytest.raises(ValueError, match="each device may hold one rank"):
        cw.collectives.communicators([0, 0])
    with pytest.raises(ValueError, match="device 99 does not exist"):
        cw.collectives.communicators([99])


def test_bad_ids_and_ranks():
    with pytest.raises(ValueError, match="a communicator id is 128 bytes"):
        cw.collectives.Communicator(b"short", ranks=1, rank=0)
    uid = cw.collectives.unique_id()
    with pytest.raises(ValueError, match="rank 1 is not one of the 1 ranks"):
        cw.collectives.Communicator(uid, ranks=1, rank=1)


def test_a_capturing_stream_is_refused(comms):
    with cw.Device(0):
        x = cw.zeros(4, np.float32)
        s = cw.Stream()
        with pytest.raises(ValueError, match="not captured into graphs by cuweave yet"):
            with cw.capture(s):
                comms[0].all_reduce(x, stream=s)
        s.close()


@needs_two
def test_a_stream_of_another_device(comms):
    with cw.Device(0):
        x = cw.zeros(4, np.float32)
    other = cw.Stream(device=1)
    with pytest.raises(ValueError, match="is on device 0, the stream on device 1; use a stream of device 0"):
        comms[0].all_reduce(x, stream=other)
    other.close()


@needs_two
def test_ranks_calling_different_collectives_are_refused_naming_both(comms):
    made = cw.collectives.communicators(range(RANKS))
    x = per_rank(np.zeros(8, np.float32))
    with cw.collectives.group():
        with cw.Device(0):
            made[0].all_reduce(x[0])
        with cw.Device(1):
            with pytest.raises(ValueError, match=r"rank 1 calls broadcast of 8 float32 from root 0 as its 1st "
                               r"collective, where rank 0 called all_reduce of 8 float32 \(sum\)"):
                made[1].broadcast(x[1])
            made[1].all_reduce(x[1])  # the matching call goes through
        for rank in range(2, RANKS):
            with cw.Device(rank):
                made[rank].all_reduce(x[rank])
    for rank in range(RANKS):
        with cw.Device(rank):
            cw.current_stream().synchronize()
    made.close()


@needs_two
def test_the_sanitizer_names_a_collective_racing_with_a_write(comms):
    with cw.sanitize(on_race="raise"):
        producer = cw.Stream(device=0, name="producer")
        x = per_rank(np.zeros(1024, np.float32))
        streams = [cw.Stream(device=d, name=f"comm {d}") for d in range(RANKS)]
        for d in range(RANKS):  # the uploads, on the default streams, are done
            with cw.Device(d):
                cw.default_stream().synchronize()
        cw.ops.fill(x[0], 1.0, stream=producer)  # nothing orders this before rank 0's collective
        with pytest.raises(cw.RaceError, match="collectives.all_reduce"):
            comms.all_reduce(x, streams=streams)
        # Refused before anything was queued: once ordered, the same call goes through.
        streams[0].wait(producer.record())
        comms.all_reduce(x, streams=streams)
        for s in streams + [producer]:
            s.synchronize()
        np.testing.assert_array_equal(x[RANKS - 1].to_numpy(stream=streams[RANKS - 1]), np.ones(1024, np.float32))


@pytest.mark.skipif(cw.backend() != "sim", reason="the simulator's ranks live in one process")
def test_the_simulator_refuses_an_id_from_another_process():
    code = "import cuweave as cw, sys; sys.stdout.buffer.write(cw.collectives.unique_id())"
    env = dict(os.environ, CUWEAVE_BACKEND="sim")
    uid = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True).stdout
    with pytest.raises(cw.NcclError, match="the id was made by another process") as caught:
        cw.collectives.Communicator(uid, ranks=1, rank=0)
    assert caught.value.name == "ncclInvalidUsage" and caught.value.call == "ncclCommInitRank"


@pytest.mark.gpu
def test_a_missing_nccl_says_what_to_install():
    code = (
        "import cuweave as cw\n"
        "try:\n"
        "    cw.collectives.communicators([0])\n"
        "except cw.NcclError as e:\n"
        "    print(e.name, e.call, '|', e)\n"
    )
    env = dict(os.environ, CUWEAVE_NCCL="/nonexistent/libnccl.so.2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("NCCL_NOT_FOUND dlopen |"), out.stdout
    assert "CUWEAVE_NCCL names /nonexistent/libnccl.so.2, which could not be loaded" in out.stdout
