"""Which backend runs cuweave's work: CUDA or the host simulator (chosen once, at first use)."""

from __future__ import annotations

from cuweave import _core


def backend() -> str:
    """The active backend, ``"cuda"`` or ``"sim"``, chosen at first use: ``CUWEAVE_BACKEND`` (``cuda``,
    ``sim`` or ``auto``, the default: CUDA when a GPU is usable, else the simulator) or use_backend()."""
    return _core.backend_name()


def use_backend(name: str) -> None:
    """Chooses the backend (``"cuda"``, ``"sim"`` or ``"auto"``) before the first cuweave operation.

    Raises ValueError once another backend is in use; set ``CUWEAVE_BACKEND`` to choose at start-up.
    """
    _core.select_backend(name)


def unavailable_reason() -> str:
    """Why no CUDA GPU is usable here ("" when one is)."""
    return _core.cuda_unavailable_reason()
