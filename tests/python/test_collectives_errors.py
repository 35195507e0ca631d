"""Collectives refused with errors that name the problem: bad arguments, mismatched ranks, wrong devices,
conditional bodies, a missing NCCL, and races the sanitizer sees; and ranks that fail or never come, which
the others learn of within their timeout (Note [Collective timeouts]), in threads, in processes, at Ctrl-C
and at exit."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import cuweave as cw
from _support import RANKS, SHARED_ID, UNDER_COMPUTE_SANITIZER, needs_two, run_ranks

# Timeouts are short here; a failure must come within the timeout and this much more (the watchdog polls
# every 50 ms; sanitizer builds are slow).
LATE_S = 2.0
# Under compute-sanitizer NCCL's setup alone took 10 to 30 s on two H200s: longer than these timeouts.
timed_in_seconds = pytest.mark.skipif(UNDER_COMPUTE_SANITIZER, reason="times NCCL's failures in seconds, and "
                                      "NCCL's setup alone takes longer under compute-sanitizer")



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


def test_a_conditional_body_refuses_collectives(comms):
    """A body may run any number of times, which no other rank's order could match."""
    with cw.Device(0):
        x = cw.zeros(4, np.float32)
        s = cw.Stream()
        with cw.capture(s):
            flag = cw.zeros(1, np.int32)
            with cw.if_then(flag, "==", 0):
                with pytest.raises(cw.CaptureError, match="a collective") as caught:
                    comms[0].all_reduce(x)
        assert caught.value.call == "ncclAllReduce"
        s.synchronize()
        s.close()


def test_timeouts_are_positive_seconds():
    uid = cw.collectives.unique_id()
    with pytest.raises(ValueError, match="a number of seconds above 0"):
        cw.collectives.Communicator(uid, ranks=1, rank=0, timeout=0)
    with pytest.raises(TypeError, match="timeout is a number of seconds"):
        cw.collectives.communicators([0], timeout="1")
    code = "import cuweave as cw; cw.collectives.communicators([0])"
    env = dict(os.environ, CUWEAVE_COLLECTIVE_TIMEOUT_S="soon")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert 'CUWEAVE_COLLECTIVE_TIMEOUT_S is a number of seconds above 0 (at most 1e8), not "soon"' in out.stderr


@pytest.mark.skipif(UNDER_COMPUTE_SANITIZER, reason="its two child processes set NCCL up under the tool, which took "
                    "over 42 s on two H200s beside the other files' processes; reading an environment "
                    "variable touches no device memory")
def test_the_timeout_comes_from_the_argument_or_the_environment():
    assert cw.collectives.communicators([0], timeout=250.0)[0].timeout == 250.0
    code = "import cuweave as cw; print(cw.collectives.communicators([0])[0].timeout)"
    env = dict(os.environ, CUWEAVE_COLLECTIVE_TIMEOUT_S="42")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["42.0"], out.stderr
    env.pop("CUWEAVE_COLLECTIVE_TIMEOUT_S")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["600.0"], out.stderr  # torch.distributed's NCCL default: 10 minutes


def test_a_rank_that_never_joins_times_out():
    uid = cw.collectives.unique_id()
    began = time.monotonic()
    with pytest.raises(cw.NcclError, match=r"rank 0 of 2 \(device 0\): joining was not done within 0.5 s") as caught:
        cw.collectives.Communicator(uid, ranks=2, rank=0, device=0, timeout=0.5)
    took = time.monotonic() - began
    assert 0.5 <= took < 0.5 + LATE_S, took
    assert (caught.value.name, caught.value.call) == ("ncclTimeout", "ncclCommInitRankConfig")


@needs_two
@timed_in_seconds
def test_a_rank_that_never_calls_makes_the_others_raise_within_the_timeout():
    """Rank 1 fails before its collective; rank 0's wait raises ncclTimeout at its timeout, naming the
    collective, the rank and the timeout, and its stream is usable afterwards."""
    uid = cw.collectives.unique_id()
    timeout = 1.0
    joined = threading.Barrier(RANKS)
    kept = []  # rank 1's communicator stays (unused) until rank 0 is done

    def rank_main(rank):
        comm = cw.collectives.Communicator(uid, ranks=RANKS, rank=rank, device=rank, timeout=timeout)
        kept.append(comm)
        joined.wait()
        if rank != 0:
            return None  # as a rank whose step raised before its collective
        s = cw.Stream(device=0)
        x = cw.to_device(np.arange(256, dtype=np.float32), stream=s)
        s.synchronize()
        began = time.monotonic()
        with pytest.raises(cw.NcclError) as caught:
            comm.all_reduce(x, stream=s)  # on a GPU, NCCL may already wait for rank 1 here
            x.to_numpy(stream=s)
        took = time.monotonic() - began
        s.synchronize()  # reported once: the stream goes on
        with pytest.raises(cw.NcclError, match="refused: the communicator failed and was aborted earlier"):
            comm.all_reduce(x, stream=s)
        s.close()
        return took, caught.value, comm.failure

    took, error, failure = run_ranks(rank_main)[0]
    assert timeout <= took < timeout + LATE_S, took
    assert (error.name, error.call) == ("ncclTimeout", "ncclAllReduce")
    # Timed out in the wait, or (on a GPU, where NCCL connects the ranks at their first collective) in queuing
    assert "all_reduce of 256 float32 (sum)" in str(error) and "rank 0 of" in str(error)
    assert "within 1 s" in str(error) and "CUWEAVE_COLLECTIVE_TIMEOUT_S" in str(error)
    assert failure is not None and "ncclTimeout" in failure
    for comm in kept:
        comm.close()


@needs_two
@timed_in_seconds
def test_a_rank_that_aborts_fails_the_others_before_their_timeout():
    """The other ranks leave their with-blocks by an exception, aborting their communicators; rank 0, waiting for them,
    raises on the simulator at once (ncclRemoteError, as NCCL reports a peer that went away), else at the
    latest at its timeout."""
    uid = cw.collectives.unique_id()
    timeout = 3.0
    queued = threading.Event()

    def rank_main(rank):
        if rank != 0:
            with pytest.raises(RuntimeError, match=f"rank {rank}'s step"):
                with cw.collectives.Communicator(uid, ranks=RANKS, rank=rank, device=rank, timeout=timeout) as comm:
                    assert queued.wait(60)
                    raise RuntimeError(f"rank {rank}'s step")
            assert comm.failure is not None and "left the with-block by an exception" in comm.failure
            return None
        comm = cw.collectives.Communicator(uid, ranks=RANKS, rank=0, device=0, timeout=timeout)
        s = cw.Stream(device=0)
        x = cw.to_device(np.ones(64, np.int32), stream=s)
        began = time.monotonic()
        with pytest.raises(cw.NcclError) as caught:
            comm.all_reduce(x, stream=s)
            queued.set()
            s.synchronize()
        queued.set()
        s.close()
        return time.monotonic() - began, caught.value

    took, error = run_ranks(rank_main)[0]
    if cw.backend() == "sim":
        assert error.name == "ncclRemoteError" and took < timeout, (took, error)
        assert re.search(r"rank \d of this communicator aborted", str(error)), error
    else:
        assert error.name in ("ncclRemoteError", "ncclTimeout", "ncclSystemError") and took < timeout + LATE_S


@needs_two
@timed_in_seconds
def test_a_wait_for_work_before_the_failed_collective_does_not_raise(comms):
    """Failures reach the waits that cover them only: an event recorded before the collective, and the
    streams of other communicators, report nothing."""
    # On a GPU NCCL connects the ranks at their first collective, which must meet first, and may take seconds.
    made = cw.collectives.communicators(range(RANKS), timeout=0.5 if cw.backend() == "sim" else 5.0)
    streams = [cw.Stream(device=d) for d in range(RANKS)]
    made.all_reduce([cw.to_device(np.ones(16, np.float32), stream=t) for t in streams], streams=streams)
    for t in streams:
        t.synchronize()
        t.close()
    s = cw.Stream(device=0)
    x = cw.to_device(np.ones(16, np.float32), stream=s)
    before = s.record()
    made[0].all_reduce(x, stream=s)  # rank 0 alone: never completes
    after = s.record()
    with pytest.raises(cw.NcclError, match="ncclTimeout"):
        after.synchronize()
    before.synchronize()
    s.synchronize()  # reported once, by the wait for `after`
    assert made[0].failure is not None and made[1].failure is None
    s.close()


@needs_two
@pytest.mark.skipif(cw.backend() == "cuda", reason="NCCL documents deadlocks in cudaGraphLaunch for captured "
                    "collectives of several GPUs in one process (test_collectives.py: one process per rank there)")
def test_a_graph_replay_whose_peer_never_replays_times_out_and_is_then_refused(comms):
    made = cw.collectives.communicators(range(RANKS), timeout=0.5)
    streams = [cw.Stream(device=d) for d in range(RANKS)]
    xs = [cw.to_device(np.full(8, d + 1.0, np.float64), stream=s) for d, s in enumerate(streams)]
    made.all_reduce(xs, streams=streams)  # the ranks meet once (on a GPU: NCCL connects them)
    for s in streams:
        s.synchronize()  # within the short timeout, whatever the schedule
    with cw.capture(streams[0]) as captured:
        made[0].all_reduce(xs[0])
    captured.graph.replay(streams[0])  # rank 1 never replays its part
    began = time.monotonic()
    with pytest.raises(cw.NcclError, match="a replay of a graph holding all_reduce of 8 float64") as caught:
        streams[0].synchronize()
    assert caught.value.name == "ncclTimeout" and time.monotonic() - began < 0.5 + LATE_S
    with pytest.raises(cw.NcclError, match="is refused: the communicator failed"):
        captured.graph.replay(streams[0])
    for s in streams:
        s.synchronize()
        s.close()


# A child that joins a communicator alone (rank 1 never comes), or leaves a collective unfinished (rank 0
# calls it, rank 1 never does), then waits for it or exits; for the latter the ranks first meet once, so that
# on a GPU NCCL has connected them and the lone call returns.
UNFINISHED = r"""
import signal, sys, time
import numpy as np
import cuweave as cw
# Ctrl-C raises KeyboardInterrupt, as in a terminal, even where the tests run with SIGINT ignored (started in
# the background by a shell without job control), which the child would inherit.
signal.signal(signal.SIGINT, signal.default_int_handler)
if sys.argv[1] == "join":
    print("waiting", flush=True)
    cw.collectives.Communicator(cw.collectives.unique_id(), ranks=2, rank=0, device=0, timeout=600)
comms = cw.collectives.communicators([0, 1], timeout=600)
xs = []
for d in range(2):
    with cw.Device(d):
        xs.append(cw.to_device(np.ones(1024, np.float32)))
comms.all_reduce(xs)
with cw.Device(0):
    comms[0].all_reduce(xs[0])
    print("waiting", flush=True)
    if sys.argv[1] == "wait":
        xs[0].to_numpy()
print("exiting", flush=True)
"""


# Long before the collective's 600 s timeout. Under compute-sanitizer the child runs under the tool too, and its
# exit (NCCL's abort, then the tool's own teardown) took 23 s on two H200s.
ENDS_WITHIN_S = 60 if UNDER_COMPUTE_SANITIZER else 10


@pytest.mark.parametrize("then", ["join", pytest.param("wait", marks=needs_two), pytest.param("exit", marks=needs_two)])
def test_ctrl_c_or_exit_with_an_unfinished_collective_ends_the_process(tmp_path, then):
    """Ctrl-C while joining, or in the wait for a collective, raises KeyboardInterrupt and the process ends,
    long before the timeout; so does a process that simply ends with the collective unfinished (its
    communicator is aborted at exit)."""
    script = tmp_path / "unfinished.py"
    script.write_text(UNFINISHED)
    with subprocess.Popen([sys.executable, str(script), then], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as child:
        try:
            line = child.stdout.readline().strip()
            assert line == "waiting", f"child said {line!r}; stderr:\n{child.stderr.read()}"
            if then != "exit":
                time.sleep(0.3)  # into the wait
                child.send_signal(signal.SIGINT)
            began = time.monotonic()
            code = child.wait(timeout=4 * ENDS_WITHIN_S)
            took = time.monotonic() - began
            stderr = child.stderr.read()
        finally:
            if child.poll() is None:
                child.kill()
    assert took < ENDS_WITHIN_S, took
    if then == "exit":
        assert code == 0, stderr
    else:
        assert code != 0 and "KeyboardInterrupt" in stderr, (code, stderr)


def test_exit_leaves_a_communicator_whose_collectives_completed_usable(comms):
    """What Python's exit runs aborts only communicators with unfinished collectives. One whose collectives
    completed, though the watchdog has not yet seen it, stays: NCCL's abort waits for every graph that
    captured the communicator to be destroyed, and at exit those graphs still live."""
    xs = per_rank(np.ones(1 << 10, np.float32))
    for _ in range(20):  # a round that beats the watchdog's poll (every 50 ms) reaches the exit's check
        comms.all_reduce(xs, op="avg")
        for d, x in enumerate(xs):
            with cw.Device(d):
                x.to_numpy()  # waits for the collective
        cw._core.abort_unfinished_collectives()
    ys = []
    for d in range(RANKS):
        with cw.Device(d):
            ys.append(cw.to_device(np.full(16, d + 1.0, np.float32)))
    comms.all_reduce(ys)  # refused, had the exit's check aborted them
    for d, y in enumerate(ys):
        with cw.Device(d):
            np.testing.assert_array_equal(y.to_numpy(), RANKS * (RANKS + 1) / 2)


# Two processes joining through a file. On a GPU rank 1 dies right after joining and rank 0's collective
# fails within its timeout. The simulator's ids work only inside their process: rank 1 is refused, and
# rank 0's joining times out instead. Either way rank 0 reports the error and ends.
TWO_PROCESSES = SHARED_ID + r"""
timeout = float(sys.argv[3])
began = time.monotonic()
try:
    with cw.Device(rank if cw.backend() == "cuda" else 0):
        comm = cw.collectives.Communicator(uid, ranks=2, rank=rank, timeout=timeout)
        if rank == 1:
            os._exit(3)  # dies without a word
        x = cw.to_device(np.ones(1 << 16, np.float32))
        comm.all_reduce(x)
        x.to_numpy()
    print("completed")
except cw.NcclError as error:
    print(error.name, error.call, time.monotonic() - began)
"""


@pytest.mark.skipif(cw.backend() == "cuda" and cw.device_count() < 2, reason="needs two GPUs")
@timed_in_seconds
def test_a_process_whose_peer_dies_or_never_comes_fails_within_its_timeout(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(TWO_PROCESSES)
    path = tmp_path / "uid"
    timeout = 2.0
    ranks = [subprocess.Popen([sys.executable, str(script), str(r), str(path), str(timeout)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in ranks]
    assert ranks[0].returncode == 0, outs[0][1]
    name, call, took = outs[0][0].split()
    if cw.backend() == "sim":
        assert (name, call) == ("ncclTimeout", "ncclCommInitRankConfig"), outs[0]
        assert "ncclInvalidUsage ncclCommInitRankConfig" in outs[1][0], outs[1]  # rank 1: another process's id
    else:
        assert name in ("ncclTimeout", "ncclRemoteError", "ncclSystemError") and ranks[1].returncode == 3, outs
    assert float(took) < timeout + LATE_S


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
    assert caught.value.name == "ncclInvalidUsage" and caught.value.call == "ncclCommInitRankConfig"


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
