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

    def synchronize(self) -> None:
        """Blocks until all work on this device, host callbacks included, has completed."""
        _core.synchronize_device(self.id)

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
