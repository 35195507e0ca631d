"""Where a process stands in a distributed job, read from its launcher's environment, and how its ranks share
NCCL's unique id through a rendezvous the job already has.

Launchers: torchrun (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), Slurm's srun
(``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``, ``SLURM_JOB_ID``, ``SLURM_STEP_ID``) and Open MPI's mpirun
(``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_SIZE``, ``OMPI_COMM_WORLD_LOCAL_RANK``), in that order of precedence.

Rendezvous, the first that the job has: PyTorch's TCPStore at ``MASTER_ADDR:MASTER_PORT`` (torchrun's own store
when its agent runs one, else one that rank 0 serves); mpi4py's broadcast under an MPI launcher; a file in a folder
that every rank sees (``CUWEAVE_RENDEZVOUS_DIR``, default ``~/.cache/cuweave/rendezvous``), named after the job's
run, written 0600 in a folder made 0700 and read only where no other user could have written it.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import time
from collections.abc import Mapping
from typing import Any

from cuweave import _private_paths

ID_KEY = "cuweave/nccl_unique_id"
_shared = 0  # ids shared so far by this process: the n-th init_from_env() of every rank reads the n-th key


@dataclasses.dataclass(frozen=True)
class LaunchEnvironment:
    """This process's place in the job, as its launcher describes it."""

    launcher: str  # "torchrun", "slurm", "openmpi" or "single" (no launcher: one rank)
    rank: int
    world_size: int
    local_rank: int
    master_addr: str | None = None
    master_port: int | None = None
    run_id: str | None = None  # names this run of the job (a rendezvous file's name), where the launcher gives one
    agent_store: bool = False  # torchrun's agent serves a TCPStore at MASTER_ADDR:MASTER_PORT


def _integer(environment: Mapping[str, str], name: str, launcher: str) -> int:
    text = environment.get(name)
    if text is None:
        raise ValueError(f"{launcher}'s environment lacks {name}; launch with {launcher}, or pass rank, ranks and "
                         "device to cuweave.collectives.Communicator yourself")
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not an integer") from None


def _checked(found: LaunchEnvironment) -> LaunchEnvironment:
    if found.world_size < 1 or not 0 <= found.rank < found.world_size or found.local_rank < 0:
        raise ValueError(f"{found.launcher}'s environment gives rank {found.rank} of {found.world_size} ranks "
                         f"(local rank {found.local_rank}): a rank must be in [0, ranks)")
    return found


def launch_environment(environment: Mapping[str, str] | None = None) -> LaunchEnvironment:
    """Reads torchrun's, Slurm's or Open MPI's variables (in that order); a process with none of them is the one
    rank of a job of one."""
    env = os.environ if environment is None else environment
    port = env.get("MASTER_PORT")
    if "RANK" in env and "WORLD_SIZE" in env:
        return _checked(LaunchEnvironment(
            "torchrun", _integer(env, "RANK", "torchrun"), _integer(env, "WORLD_SIZE", "torchrun"),
            int(env.get("LOCAL_RANK", "0")), env.get("MASTER_ADDR"), int(port) if port else None,
            env.get("TORCHELASTIC_RUN_ID"), env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"))
    if "SLURM_PROCID" in env:
        job = env.get("SLURM_JOB_ID")
        run = f"slurm-{job}.{env.get('SLURM_STEP_ID', '0')}" if job else None
        return _checked(LaunchEnvironment(
            "slurm", _integer(env, "SLURM_PROCID", "slurm"), _integer(env, "SLURM_NTASKS", "slurm"),
            int(env.get("SLURM_LOCALID", "0")), env.get("MASTER_ADDR"), int(port) if port else None, run))
    if "OMPI_COMM_WORLD_RANK" in env:
        job = env.get("OMPI_MCA_ess_base_jobid") or env.get("PMIX_NAMESPACE")
        return _checked(LaunchEnvironment(
            "openmpi", _integer(env, "OMPI_COMM_WORLD_RANK", "openmpi"),
            _integer(env, "OMPI_COMM_WORLD_SIZE", "openmpi"), int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")),
            env.get("MASTER_ADDR"), int(port) if port else None, f"openmpi-{job}" if job else None))
    return LaunchEnvironment("single", 0, 1, 0)


# --- sharing the id -------------------------------------------------------------------------------------------


def _torch_store(place: LaunchEnvironment, timeout_s: float) -> Any | None:
    """PyTorch's TCPStore at MASTER_ADDR:MASTER_PORT, if PyTorch is installed and the job names that address."""
    if place.master_addr is None or place.master_port is None:
        return None
    try:
        import datetime

        from torch.distributed import TCPStore
    except ImportError:
        return None
    # Under torchrun's agent the store exists and every rank is its client; otherwise rank 0 serves it.
    serve = place.rank == 0 and not place.agent_store
    return TCPStore(place.master_addr, place.master_port, place.world_size, is_master=serve,
                    timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=False)


def _mpi_world(place: LaunchEnvironment) -> Any | None:
    if place.launcher not in ("openmpi", "slurm"):
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    world = MPI.COMM_WORLD
    return world if world.Get_size() == place.world_size else None


def rendezvous_folder(environment: Mapping[str, str] | None = None) -> pathlib.Path:
    env = os.environ if environment is None else environment
    if env.get("CUWEAVE_RENDEZVOUS_DIR"):
        return pathlib.Path(env["CUWEAVE_RENDEZVOUS_DIR"])
    return pathlib.Path(os.path.expanduser("~")) / ".cache" / "cuweave" / "rendezvous"


def share_by_file(value: bytes | None, place: LaunchEnvironment, folder: pathlib.Path, name: str,
                  timeout_s: float) -> bytes:
    """Rank 0 writes `value` to `folder`/`name` (0600, whole, in a folder made 0700); the others wait for it and
    read it, refusing a file or folder that another user could have written."""
    path = folder / f"{name}.id"
    if place.rank == 0:
        _private_paths.make_private_folder(folder)
        _private_paths.write_private_file(path, value)
        return value
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {place.rank} waited {timeout_s:.0f} s for rank 0's id in {path}: is "
                               "CUWEAVE_RENDEZVOUS_DIR a folder that every rank sees, and did rank 0 start?")
        time.sleep(0.05)
    reason = _private_paths.untrusted_reason(path)
    if reason is not None:
        raise PermissionError(f"refusing the rendezvous file {path}: {reason}; another user could have written "
                              "the id, and so joined this job's communicator")
    return path.read_bytes()


class Rendezvous:
    """The job's rendezvous, connected: `share(value)` gives rank 0's value to every rank; `finish()` once every
    rank has it. Connecting comes before rank 0 makes NCCL's id: connecting may load PyTorch, and with it PyTorch's
    NCCL, which cuweave then uses too; a rank that made its id before would use another NCCL than its peers (seen:
    NCCL refused "rank 0 version 22803 rank 1 version 22809" under torchrun on two H100s)."""

    def __init__(self, place: LaunchEnvironment, *, timeout_s: float,
                 environment: Mapping[str, str] | None = None) -> None:
        global _shared
        _shared += 1
        self.place, self.timeout_s = place, timeout_s
        self.carrier, self._store, self._world, self._file = "none", None, None, None
        if place.world_size == 1:
            return
        self._store = _torch_store(place, timeout_s)  # kept until finish(): rank 0's may serve the others
        if self._store is not None:
            self.carrier, self._key = "torch.distributed.TCPStore", f"{ID_KEY}/{_shared}"
            return
        self._world = _mpi_world(place)
        if self._world is not None:
            self.carrier = "mpi4py"
            return
        env = os.environ if environment is None else environment
        name = env.get("CUWEAVE_RENDEZVOUS_NAME") or place.run_id
        if name is None:
            raise ValueError(f"no rendezvous for {place.launcher}'s ranks: install PyTorch (and set MASTER_ADDR and "
                             "MASTER_PORT) or mpi4py, or set CUWEAVE_RENDEZVOUS_NAME to a name unique to this run "
                             "(and CUWEAVE_RENDEZVOUS_DIR to a folder every rank sees)")
        self.carrier, self._folder, self._name = "file", rendezvous_folder(env), name

    def share(self, value: bytes | None) -> bytes:
        """Rank 0's `value`, on every rank (`value` is None on the others)."""
        if self.carrier == "none":
            return value
        if self.carrier == "torch.distributed.TCPStore":
            if self.place.rank == 0:
                self._store.set(self._key, value)
            return bytes(self._store.get(self._key))
        if self.carrier == "mpi4py":
            return self._world.bcast(value, root=0)
        got = share_by_file(value, self.place, self._folder, self._name, self.timeout_s)
        self._file = self._folder / f"{self._name}.id"
        return got

    def finish(self) -> None:
        """Once every rank has the value: rank 0 removes its file, and its store stops serving."""
        if self._file is not None and self.place.rank == 0:
            self._file.unlink(missing_ok=True)
        self._store = None
