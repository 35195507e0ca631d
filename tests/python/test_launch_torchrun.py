"""Launched with torchrun on two GPUs: cuweave.collectives.init_from_env() in each rank (one process per GPU) joins
one communicator through torchrun's own store; an all-reduce and a captured training step give every rank the same
result; a rank that never calls the collective, or aborts, makes the other raise NcclError within its timeout; and
two torchrun "nodes" on one host (--nnodes 2 with a local rendezvous endpoint) take the multi-node path."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

import cuweave as cw
from _support import UNDER_COMPUTE_SANITIZER

# The rank program is Python in a string: test_the_rank_program_compiles checks it on every machine.
_NEEDS_TORCHRUN_ON_TWO_GPUS = [
    pytest.mark.gpu,
    pytest.mark.skipif(cw.device_count() < 2, reason="needs two GPUs"),
    pytest.mark.skipif(shutil.which("torchrun") is None, reason="needs torchrun (PyTorch)"),
    pytest.mark.skipif(UNDER_COMPUTE_SANITIZER, reason="launches NCCL jobs of several processes: too slow under "
                       "compute-sanitizer, whose tools see each process of the job"),
]


def needs_torchrun_on_two_gpus(test):
    for mark in _NEEDS_TORCHRUN_ON_TWO_GPUS:
        test = mark(test)
    return test


RANK_PROGRAM = textwrap.dedent(r"""
    import os, sys, time
    import numpy as np
    import cuweave as cw

    import faulthandler
    # A rank still running after this long prints every thread's stack and exits: the test then fails with
    # where it stood, rather than hanging.
    faulthandler.dump_traceback_later(float(os.environ.get("RANK_STACKS_AFTER_S", "90")), exit=True)
    scenario = sys.argv[1]

    def say(line):  # one write per line: the ranks share torchrun's output, unbuffered under PYTHONUNBUFFERED
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    comm = cw.collectives.init_from_env(timeout=float(os.environ.get("TIMEOUT_S", "60")))
    rank, ranks = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    with cw.Device(comm.device):
        s = cw.Stream()
        if scenario == "all_reduce":
            x = cw.to_device(np.full(1 << 20, rank + 1.0, np.float32), stream=s)
            comm.all_reduce(x, stream=s)
            assert (x.to_numpy(stream=s) == ranks * (ranks + 1) / 2).all()
            say(f"rank {rank} of {ranks} on device {comm.device}: all_reduce ok")
        elif scenario.startswith("captured_step"):   # captured_step:MODE
            w = cw.to_device(np.ones(1024, np.float32), stream=s)
            g = cw.to_device(np.full(1024, rank + 1.0, np.float32), stream=s)
            with s, cw.capture(s, mode=scenario.split(":")[1]) as cap:   # gradient, all-reduce, update
                cw.ops.scale(g, 2.0, out=g)
                comm.all_reduce(g, stream=s)
                cw.ops.axpy(-0.001, g, w, out=w)     # w -= 0.001 * g
            say(f"rank {rank}: captured")
            for replay in range(3):
                cap.graph.replay(s)
                say(f"rank {rank}: replay {replay} queued")
            got = w.to_numpy(stream=s)
            say(f"rank {rank}: step {got[0]!r}")
        elif scenario in ("hang", "abort"):
            x = cw.to_device(np.ones(16, np.float32), stream=s)
            s.synchronize()
            if rank == 1:
                if scenario == "abort":
                    comm.abort()                     # tells rank 0 at once
                time.sleep(float(os.environ["TIMEOUT_S"]) + 10)   # never calls the collective
                say("rank 1: done")
                os._exit(0)                           # as a process that died: no goodbye to the others
            else:
                start = time.monotonic()
                try:  # NCCL connects the ranks at their first collective: queuing it may be what fails
                    comm.all_reduce(x, stream=s)
                    s.synchronize()
                    say("rank 0: NO ERROR")
                except cw.NcclError as error:
                    say(f"rank 0: {error.name} after {time.monotonic() - start:.1f} s")
""")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def torchrun(tmp_path, scenario: str, *arguments: str, env: dict | None = None) -> subprocess.Popen:
    script = tmp_path / "rank.py"
    script.write_text(RANK_PROGRAM)
    environment = dict(os.environ, **(env or {}))
    run_name = f"{scenario.replace(':', '-')}-{len(list(tmp_path.glob('*.out')))}"
    output = open(tmp_path / f"{run_name}.out", "w+")  # a file, not a pipe: workers that outlive torchrun hold no read
    run = subprocess.Popen(["torchrun", *arguments, str(script), scenario], env=environment, cwd=tmp_path,
                           stdout=output, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    run.output, run.script = output, script
    return run


def ended(run: subprocess.Popen, timeout: float = 120) -> tuple[int | None, str]:
    """torchrun's exit status (None where it still ran after `timeout`: then killed with its workers, which torchrun
    starts each in a session of its own, found by the script's path) and what it printed; its output file closed."""
    try:
        run.wait(timeout=timeout)
        returncode = run.returncode
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        subprocess.run(["pkill", "-KILL", "-f", str(run.script)], check=False)
        run.wait()
        returncode = None
    run.output.seek(0)
    out = run.output.read()
    run.output.close()
    return returncode, out


def finished(*runs: subprocess.Popen, timeout: float = 120) -> list[str]:
    """Each run's output once all ended with 0; every run is waited for (or killed) before any fails the test, so
    none outlives it."""
    results = [ended(run, timeout) for run in runs]
    for returncode, out in results:
        if returncode is None:
            pytest.fail(f"torchrun still ran after {timeout:.0f} s (killed); its output:\n{out[-6000:]}")
        assert returncode == 0, out[-6000:]
    return [out for _, out in results]


def test_the_rank_program_compiles():
    compile(RANK_PROGRAM, "rank.py", "exec")


@needs_torchrun_on_two_gpus
def test_torchrun_two_ranks_all_reduce(tmp_path):
    [out] = finished(torchrun(tmp_path, "all_reduce", "--nproc-per-node", "2", "--master-port", str(free_port())))
    assert "rank 0 of 2 on device 0: all_reduce ok" in out and "rank 1 of 2 on device 1: all_reduce ok" in out


@needs_torchrun_on_two_gpus
@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_torchrun_two_ranks_replay_a_captured_training_step_alike(tmp_path, mode):
    # Every capture mode: NCCL's own threads work beside the capture, which a global one watches too.
    [out] = finished(torchrun(tmp_path, f"captured_step:{mode}", "--nproc-per-node", "2", "--master-port",
                            str(free_port())))
    steps = dict(re.findall(r"rank (\d): step (\S+)$", out, re.MULTILINE))
    assert len(steps) == 2 and steps["0"] == steps["1"], out[-2000:]


# An abort before the ranks connected reaches the other rank as NCCL's ncclRemoteError only where a socket
# carries it: two GPUs of one host connect through NVLink, and the other rank's timeout ends its wait.
@needs_torchrun_on_two_gpus
@pytest.mark.parametrize("scenario, names", [("hang", ("ncclTimeout",)), ("abort", ("ncclRemoteError", "ncclTimeout"))])
def test_a_rank_that_fails_makes_the_other_raise_within_its_timeout(tmp_path, scenario, names):
    [out] = finished(torchrun(tmp_path, scenario, "--nproc-per-node", "2", "--master-port", str(free_port()),
                            env={"TIMEOUT_S": "10"}))
    line = next((line for line in out.splitlines() if line.startswith("rank 0:")), out[-2000:])
    assert any(name in line for name in names), out[-3000:]
    assert float(line.split("after ")[1].split(" s")[0]) < 10 + 5  # its 10 s timeout, and the watchdog's poll


@needs_torchrun_on_two_gpus
def test_two_torchrun_nodes_on_one_host_take_the_multi_node_path(tmp_path):
    endpoint = f"127.0.0.1:{free_port()}"
    runs = [torchrun(tmp_path, "all_reduce", "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "1",
                     "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", f"cuweave-{os.getpid()}",
                     env={"CUDA_VISIBLE_DEVICES": str(node)})
            for node in (0, 1)]
    outs = finished(*runs)
    joined = "\n".join(outs)
    assert "of 2 on device 0: all_reduce ok" in joined and joined.count("all_reduce ok") == 2, joined[-3000:]
