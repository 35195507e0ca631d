"""Launched like other distributed jobs: where a process stands is read from torchrun's, Slurm's or Open MPI's
environment, and NCCL's id reaches every rank through the job's rendezvous (here: the file rendezvous, between
threads and between processes; PyTorch's TCPStore and mpi4py on the GPU machine). Runs on every backend: the id
exchange moves bytes only."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import cuweave as cw
from cuweave import _launch

TORCHRUN = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_USE_AGENT_STORE": "True"}
SLURM = {"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1", "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0"}
OPENMPI = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
           "PMIX_NAMESPACE": "prterun-host-1234@1"}


def test_torchruns_environment_gives_rank_ranks_local_rank_and_its_store():
    place = _launch.launch_environment(TORCHRUN)
    assert (place.launcher, place.rank, place.world_size, place.local_rank) == ("torchrun", 3, 8, 1)
    assert (place.master_addr, place.master_port, place.run_id, place.agent_store) == ("10.0.0.1", 29500, "abc", True)


def test_slurms_and_open_mpis_environments_and_the_order_among_launchers():
    slurm = _launch.launch_environment(SLURM)
    assert (slurm.launcher, slurm.rank, slurm.world_size, slurm.local_rank, slurm.run_id) == (
        "slurm", 5, 16, 1, "slurm-4242.0")
    mpi = _launch.launch_environment(OPENMPI)
    assert (mpi.launcher, mpi.rank, mpi.world_size, mpi.local_rank) == ("openmpi", 2, 4, 0)
    assert mpi.run_id == "openmpi-prterun-host-1234@1"
    # torchrun inside a Slurm allocation: torchrun's ranks are this process's
    assert _launch.launch_environment({**SLURM, **TORCHRUN}).launcher == "torchrun"
    assert _launch.launch_environment({}) == _launch.LaunchEnvironment("single", 0, 1, 0)


@pytest.mark.parametrize("environment, says", [
    ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' is not an integer"),
    ({"RANK": "2", "WORLD_SIZE": "2"}, "rank 2 of 2 ranks"),
    ({"SLURM_PROCID": "0"}, "lacks SLURM_NTASKS"),
])
def test_a_launch_environment_that_cannot_be_right_is_refused_naming_the_variable(environment, says):
    with pytest.raises(ValueError, match=says):
        _launch.launch_environment(environment)


def exchange_in_threads(folder, ranks: int, value: bytes) -> list[bytes]:
    got: list = [None] * ranks

    def rank(r: int) -> None:
        place = _launch.LaunchEnvironment("slurm", r, ranks, r)
        got[r] = _launch.share_by_file(value if r == 0 else None, place, folder, "run-1", timeout_s=20)

    threads = [threading.Thread(target=rank, args=(r,)) for r in reversed(range(ranks))]  # readers first
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


def test_the_file_rendezvous_gives_every_rank_rank_zeros_id_written_for_this_user_alone(tmp_path):
    previous = os.umask(0)  # whatever the umask: the folder is 0700 and the file 0600
    try:
        value = os.urandom(128)
        folder = tmp_path / "shared" / "rendezvous"
        assert exchange_in_threads(folder, 4, value) == [value] * 4
    finally:
        os.umask(previous)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "run-1.id").stat().st_mode) == 0o600


def test_a_rendezvous_file_others_could_have_written_is_refused(tmp_path):
    folder = tmp_path / "rendezvous"
    folder.mkdir(mode=0o700)
    planted = folder / "run-1.id"
    planted.write_bytes(b"x" * 128)
    os.chmod(planted, 0o666)
    with pytest.raises(PermissionError, match="another user could have written"):
        _launch.share_by_file(None, _launch.LaunchEnvironment("slurm", 1, 2, 1), folder, "run-1", timeout_s=5)


def test_a_rank_waiting_for_an_id_that_never_comes_says_what_to_check(tmp_path):
    with pytest.raises(TimeoutError, match="CUWEAVE_RENDEZVOUS_DIR"):
        _launch.share_by_file(None, _launch.LaunchEnvironment("slurm", 1, 2, 1), tmp_path, "never", timeout_s=0.2)


def test_without_any_rendezvous_the_error_names_the_ways_to_get_one(monkeypatch):
    monkeypatch.setattr(_launch, "_torch_store", lambda place, timeout_s: None)
    monkeypatch.setattr(_launch, "_mpi_world", lambda place: None)
    monkeypatch.delenv("CUWEAVE_RENDEZVOUS_NAME", raising=False)
    place = _launch.LaunchEnvironment("openmpi", 1, 2, 1)
    with pytest.raises(ValueError, match="CUWEAVE_RENDEZVOUS_NAME"):
        _launch.Rendezvous(place, timeout_s=1)


def test_two_processes_launched_as_slurm_tasks_share_one_id_through_the_file_rendezvous(tmp_path):
    program = textwrap.dedent("""
        import os
        from cuweave import _launch
        place = _launch.launch_environment()
        value = os.urandom(128) if place.rank == 0 else None
        rendezvous = _launch.Rendezvous(place, timeout_s=60)
        got = rendezvous.share(value)  # no finish(): rank 0 would remove the file another rank may not have read
        print(rendezvous.carrier, got.hex())
    """)
    runs = []
    for rank in (1, 0):  # the reader starts first
        env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_LOCALID=str(rank),
                   SLURM_JOB_ID=f"test-{os.getpid()}", SLURM_STEP_ID="0", CUWEAVE_RENDEZVOUS_DIR=str(tmp_path))
        for name in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(name, None)
        runs.append(subprocess.Popen([sys.executable, "-c", program], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True))
    outputs = [run.communicate(timeout=120) for run in runs]
    assert all(run.returncode == 0 for run in runs), [err for _, err in outputs]
    (carried_1, id_1), (carried_0, id_0) = (out.split() for out, _ in outputs)
    assert carried_0 == carried_1 == "file" and id_0 == id_1 and len(bytes.fromhex(id_0)) == 128


def test_a_process_started_without_a_launcher_is_the_one_rank_of_a_job_of_one(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(name, raising=False)
    # Joining takes NCCL's setup, which compute-sanitizer stretches past half a minute on a busy machine.
    communicator = cw.collectives.init_from_env(timeout=180)
    x = cw.to_device(np.arange(8, dtype=np.float32))
    assert np.array_equal(communicator.all_reduce(x).to_numpy(), np.arange(8, dtype=np.float32))
    assert "rank 0 of 1" in repr(communicator)
    communicator.close()


def test_torchruns_variables_for_a_job_of_one_need_no_rendezvous(monkeypatch):
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": "1"}.items():  # port 1: a store there would fail at once
        monkeypatch.setenv(name, value)
    communicator = cw.collectives.init_from_env(timeout=30)
    assert "rank 0 of 1" in repr(communicator)
    communicator.close()
