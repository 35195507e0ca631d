"""Page-locking an existing NumPy array for the duration of a block."""

from __future__ import annotations

import numpy as np

from cuweave import _core


def pinned(array: np.ndarray) -> _core.HostRegistration:
    """Page-locks ``array``'s memory (cudaHostRegister) so copies from and to it run at full speed.

    Use as ``with cuweave.pinned(a): ...``. Leaving the block waits for queued copies that use
    ``a``, then unregisters it. ``a`` must be a C-contiguous numpy.ndarray, not already registered.
    """
    return _core.register_host(array)
