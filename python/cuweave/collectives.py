"""Collectives among GPUs on cuweave streams: NCCL on a GPU, the simulator's rendezvous without one.

One process per GPU, launched by ``torchrun``, ``srun`` or ``mpirun``::

    comm = cw.collectives.init_from_env()            # rank, ranks and device from the launcher's environment

or with the id passed by hand::

    uid = cw.collectives.unique_id() if rank == 0 else None
    uid = comm_world.bcast(uid)                      # mpi4py, a file, a socket: any way to pass bytes
    comm = cw.collectives.Communicator(uid, ranks=size, rank=rank, device=rank)
    comm.all_reduce(grads, stream=comm_stream)       # in place, ordered on comm_stream

One process driving all its GPUs::

    comms = cw.collectives.communicators([0, 1])
    comms.all_reduce([x0, x1], streams=[s0, s1])     # one call: the ranks' collectives are issued together

Every rank calls the same collectives in the same order; a collective completes on a rank's stream once
every rank's stream has reached it, and the arrays it uses stay alive until then. One thread calling the
collectives of several ranks one at a time must do so inside ``with cw.collectives.group():`` (the list
methods of ``communicators()`` do it for you): the collectives are queued on their streams when the
group ends, so queue other work on those streams after it.

No rank waits forever: joining and every collective must be done within the communicator's timeout
(``timeout=`` seconds, else ``CUWEAVE_COLLECTIVE_TIMEOUT_S``, else 10 minutes). Past it, or when NCCL
reports that a peer went away, the communicator is aborted and the waits for its unfinished collectives
(``stream.synchronize()``, ``to_numpy``, event and transfer waits) raise ``cuweave.NcclError`` (``name``
``"ncclTimeout"``, ``"ncclRemoteError"``, ...) naming the collective and the rank; later collectives on
it are refused. A rank that leaves ``with comm:`` by an exception, or calls ``comm.abort()``, aborts its
communicator, so that the other ranks fail at once instead of at their timeout; at exit, communicators
with unfinished collectives are aborted.

Collectives are captured into graphs like any work (``with cuweave.capture(s): comm.all_reduce(...)``);
each replay meets the other ranks' replays or calls in the order each rank issues them.

NCCL is loaded when first needed, from the ``nvidia-nccl-cu13`` wheel, the library path, or
``CUWEAVE_NCCL=/path/to/libnccl.so.2``; without it, collectives raise ``cuweave.NcclError``
(``name == "NCCL_NOT_FOUND"``) saying what to install.
"""

from __future__ import annotations

import atexit
from collections.abc import Sequence
from typing import Any

from cuweave import _core, _launch
from cuweave._core import CollectiveGroup, Communicator

__all__ = ["Communicator", "Communicators", "communicators", "from_process_group", "group", "init_from_env",
           "unique_id"]


def unique_id() -> bytes:
    """A new id (128 bytes) for the ranks of one communicator: make it once, give it to every rank."""
    return _core.collective_unique_id()


def init_from_env(*, device: Any = None, timeout: float | None = None) -> Communicator:
    """The communicator of this process's rank, in a job launched by ``torchrun``, Slurm's ``srun`` or Open MPI's
    ``mpirun`` (one process per GPU). The rank, the number of ranks and the local rank come from the launcher's
    environment; rank 0 makes NCCL's id and the job's own rendezvous carries it to the others: PyTorch's TCPStore
    at ``MASTER_ADDR:MASTER_PORT`` (torchrun's), else mpi4py's broadcast, else a file named after the run in
    ``CUWEAVE_RENDEZVOUS_DIR`` (a folder every rank sees; default ``~/.cache/cuweave/rendezvous``), written for this
    user alone. ``device``: default the local rank's GPU (local rank modulo the GPUs this process sees).
    ``timeout``: seconds for the rendezvous, joining and each collective (as for ``Communicator``). A process
    started without a launcher is the one rank of a job of one."""
    place = _launch.launch_environment()
    if device is None:
        device = place.local_rank % max(_core.device_count(), 1)
    # First: connecting may load PyTorch's NCCL. It waits as long as the communicator would.
    rendezvous = _launch.Rendezvous(place, timeout_s=_core.collective_timeout_s(timeout))
    uid = rendezvous.share(unique_id() if place.rank == 0 else None)
    communicator = Communicator(uid, ranks=place.world_size, rank=place.rank, device=device, timeout=timeout)
    rendezvous.finish()  # every rank has joined, so every rank has read the id
    return communicator


def from_process_group(group: Any = None, *, device: Any = None, timeout: float | None = None) -> Communicator:
    """A communicator with the ranks of a ``torch.distributed`` process group (default: the whole world), in the
    group's rank order; the group itself carries NCCL's id. ``device``: default PyTorch's current CUDA device."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        raise ValueError("torch.distributed is not initialized: call torch.distributed.init_process_group() first, "
                         "or use cuweave.collectives.init_from_env()")
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    source = 0 if group is None else dist.get_global_rank(group, 0)
    carried = [unique_id() if rank == 0 else None]
    dist.broadcast_object_list(carried, src=source, group=group)
    if device is None:
        device = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return Communicator(carried[0], ranks=size, rank=rank, device=device, timeout=timeout)


def group() -> CollectiveGroup:
    """``with group():`` issues the collectives called inside it together, when it ends (nestable; one
    thread). Needed where one thread calls the collectives of several ranks of one communicator."""
    return CollectiveGroup()


class Communicators(Sequence[Communicator]):
    """The communicators of one process, one per device (rank r on ``devices[r]``).

    Index it for one rank's communicator, or call a collective on all ranks at once with lists: one array
    (and optionally one stream, one output) per rank, in rank order.
    """

    def __init__(self, devices: Sequence[Any], *, timeout: float | None = None) -> None:
        self._ranks: list[Communicator] = Communicator.for_devices(list(devices), timeout=timeout)

    def __len__(self) -> int:
        return len(self._ranks)

    def __getitem__(self, rank: Any) -> Any:
        return self._ranks[rank]

    def __repr__(self) -> str:
        devices = ", ".join(str(c.device) for c in self._ranks)
        return f"<cuweave.collectives.Communicators on devices [{devices}]>"

    def close(self) -> None:
        for communicator in self._ranks:
            communicator.close()

    def abort(self) -> None:
        """Aborts every rank's communicator (see ``Communicator.abort``)."""
        for communicator in self._ranks:
            communicator.abort()

    def __enter__(self) -> Communicators:
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _each(self, name: str, arrays: Sequence[Any], streams: Sequence[Any] | None, outs: Sequence[Any] | None,
              **options: Any) -> list[Any]:
        for what, given in (("arrays", arrays), ("streams", streams), ("out", outs)):
            if given is not None and len(given) != len(self._ranks):
                raise ValueError(f"{name}: {what} has {len(given)} entries for {len(self._ranks)} ranks; "
                                 "give one per rank, in rank order")
        results = []
        with CollectiveGroup():
            for rank, communicator in enumerate(self._ranks):
                if outs is not None:
                    options["out"] = outs[rank]
                stream = None if streams is None else streams[rank]
                results.append(getattr(communicator, name)(arrays[rank], stream=stream, **options))
        return results

    def all_reduce(self, arrays: Sequence[Any], *, op: str = "sum", out: Sequence[Any] | None = None,
                   streams: Sequence[Any] | None = None) -> list[Any]:
        """Each rank's array (or out) becomes op over all ranks' arrays; returns the results."""
        return self._each("all_reduce", arrays, streams, out, op=op)

    def broadcast(self, arrays: Sequence[Any], *, root: int = 0, out: Sequence[Any] | None = None,
                  streams: Sequence[Any] | None = None) -> list[Any]:
        """Every rank's array (or out) becomes the root's array; returns the results."""
        return self._each("broadcast", arrays, streams, out, root=root)

    def reduce(self, arrays: Sequence[Any], *, root: int = 0, op: str = "sum", out: Sequence[Any] | None = None,
               streams: Sequence[Any] | None = None) -> list[Any]:
        """The root's array (or out) becomes op over all ranks' arrays; returns it for the root, None for others."""
        return self._each("reduce", arrays, streams, out, root=root, op=op)

    def all_gather(self, arrays: Sequence[Any], *, out: Sequence[Any] | None = None,
                   streams: Sequence[Any] | None = None) -> list[Any]:
        """Each rank gets an array of shape ``(ranks, *array.shape)`` holding every rank's array."""
        return self._each("all_gather", arrays, streams, out)

    def reduce_scatter(self, arrays: Sequence[Any], *, op: str = "sum", out: Sequence[Any] | None = None,
                       streams: Sequence[Any] | None = None) -> list[Any]:
        """Rank r gets op over all ranks of part r of their arrays (split along the first axis)."""
        return self._each("reduce_scatter", arrays, streams, out, op=op)


def communicators(devices: Sequence[Any] | None = None, *, timeout: float | None = None) -> Communicators:
    """One communicator per device (default: every device), for one process driving them all. ``timeout``:
    seconds that joining and each collective may take (default: ``CUWEAVE_COLLECTIVE_TIMEOUT_S``, else 600)."""
    if devices is None:
        devices = list(range(_core.device_count()))
    return Communicators(devices, timeout=timeout)


# A collective waiting for a rank that never comes would keep the process from ending (Note [Collective
# timeouts]): at exit, communicators with unfinished collectives are aborted.
atexit.register(_core.abort_unfinished_collectives)
