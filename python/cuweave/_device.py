"""Devices: which GPUs there are, what they can do, and which one is current."""

from __future__ import annotations

from cuweave import _core


class Device:
    """One GPU, by ordinal. ``with Device(i):`` makes it the current device for the block."""

    __slots__ = ("id", "_previous")

    def __init__(self, ordinal: int = 0) -> None:
        self.id = _core.checked_device(ordinal)
        self._previous: list[int] = []

    @property
    def properties(self) -> _core.DeviceProperties:
        return _core.device_properties(self.id)

    @property
    def sm_resources(self) -> _core.SMResources:
        """The device's SMs as partitions split them: how many, the fewest a partition may have, and the
        step a partition's size is rounded up to."""
        return _core.sm_resources(self.id)

    def partition(self, sms: int, *, groups: int = 1) -> tuple[_core.SMPartition, ...]:
        """Splits this device's SMs: ``groups`` partitions of at least ``sms`` SMs each (rounded up as
        ``sm_resources`` says), then one partition of the SMs left over, if any are.

        Kernels on a stream made on a partition, ``cuweave.Stream(partition=p)``, run on its SMs only::

            reserved, rest = cuweave.Device(0).partition(16)
            collectives = cuweave.Stream(partition=reserved)   # always has its 16 SMs
            compute = cuweave.Stream(partition=rest)

        Raises ValueError, naming what fits, when the device cannot hold ``groups`` partitions of ``sms``.
        """
        return tuple(_core.partition_sms(self.id, sms, groups))

    def synchronize(self) -> None:
        """Blocks until all work on this device, host callbacks included, has completed."""
        _core.synchronize_device(self.id)

    def graph_memory(self) -> dict[str, int]:
        """Bytes of graph memory on this device (the memory of graphs captured with ``graph_memory=True``):
        ``used``, what their allocations hold now, and ``reserved``, what the device keeps for them, between
        replays too, until :meth:`trim_graph_memory`."""
        used, reserved = _core.graph_memory_use(self.id)
        return {"used": used, "reserved": reserved}

    def trim_graph_memory(self) -> None:
        """Gives back the graph memory this device keeps that no graph's allocation holds now. The next replay of
        a graph that needs it maps it again."""
        _core.trim_graph_memory(self.id)

    def __enter__(self) -> Device:
        self._previous.append(_core.current_device())
        _core.set_current_device(self.id)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _core.set_current_device(self._previous.pop())

    def __index__(self) -> int:
        return self.id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("cuweave.Device", self.id))

    def __repr__(self) -> str:
        return f"<cuweave.Device {self.id}>"


def current_device() -> Device:
    """This thread's current device, as a Device (``with Device(i):`` sets it for a block)."""
    return Device(_core.current_device())


def synchronize() -> None:
    """Blocks until all work on the current device, host callbacks included, has completed."""
    _core.synchronize_device(_core.current_device())


def is_available() -> bool:
    """True when this machine has a usable CUDA GPU, whatever the active backend. Never raises."""
    return _core.cuda_device_count() > 0


def device_count() -> int:
    """Devices of the active backend: GPUs on the CUDA backend (0 without a GPU or driver when CUDA is
    forced), simulated devices on the simulator. Never raises."""
    return _core.device_count()
