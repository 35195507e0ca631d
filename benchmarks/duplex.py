"""H2D and D2H copies at once, on two streams."""

from __future__ import annotations

from typing import Callable

import numpy as np

import libraries
from copies import COPY_BYTES
from in_turn import InTurnSetup, setup_of
from rows import Row, in_turn_row
from timing import Config, gbps, wall_ms

cw = torch = cupy = None  # the loaded libraries, set as they load (libraries.share_with)
libraries.share_with(globals())

DUPLEX_ROUNDS = 5           # h2d_d2h_duplex: rounds of one 256 MB copy each way, per repetition


# --------------------------------------------------------------------------- H2D and D2H at once
# DUPLEX_ROUNDS rounds of one 256 MB pinned -> device copy on stream `up` and one 256 MB device -> pinned copy
# on stream `down`, queued alternately; GB/s total = 2 * DUPLEX_ROUNDS * 256 MB / wall incl. both syncs.
# The libraries take turns within each repetition (in_turn_row).

DUPLEX_TOTAL_BYTES = 2 * DUPLEX_ROUNDS * COPY_BYTES


def cw_duplex_rounds() -> Callable[[], None]:
    up, down = cw.Stream(), cw.Stream()
    host_in, host_out = cw.pinned_empty((COPY_BYTES,), np.uint8), cw.pinned_empty((COPY_BYTES,), np.uint8)
    dev_in, dev_out = cw.empty((COPY_BYTES,), np.uint8, stream=up), cw.zeros((COPY_BYTES,), np.uint8, stream=down)

    def rounds():
        for _ in range(DUPLEX_ROUNDS):
            cw.copy_async(dev_in, host_in, stream=up)
            cw.copy_async(host_out, dev_out, stream=down)
        up.synchronize()
        down.synchronize()

    return rounds


def torch_duplex_rounds() -> Callable[[], None]:
    up, down = torch.cuda.Stream(), torch.cuda.Stream()
    host_in = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    host_out = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    dev_in = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    dev_out = torch.zeros(COPY_BYTES, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()

    def rounds():
        for _ in range(DUPLEX_ROUNDS):
            with torch.cuda.stream(up):
                dev_in.copy_(host_in, non_blocking=True)
            with torch.cuda.stream(down):
                host_out.copy_(dev_out, non_blocking=True)
        up.synchronize()
        down.synchronize()

    return rounds


def cupy_duplex_rounds() -> Callable[[], None]:
    rt = cupy.cuda.runtime
    up, down = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    host_in, host_out = cupy.cuda.alloc_pinned_memory(COPY_BYTES), cupy.cuda.alloc_pinned_memory(COPY_BYTES)
    dev_in, dev_out = cupy.empty(COPY_BYTES, dtype=cupy.uint8), cupy.zeros(COPY_BYTES, dtype=cupy.uint8)
    cupy.cuda.Device().synchronize()

    def rounds():
        for _ in range(DUPLEX_ROUNDS):
            rt.memcpyAsync(dev_in.data.ptr, host_in.ptr, COPY_BYTES, rt.memcpyHostToDevice, up.ptr)
            rt.memcpyAsync(host_out.ptr, dev_out.data.ptr, COPY_BYTES, rt.memcpyDeviceToHost, down.ptr)
        up.synchronize()
        down.synchronize()

    return rounds


DUPLEX_ROUNDS_OF = {"cuweave": cw_duplex_rounds, "torch": torch_duplex_rounds, "cupy": cupy_duplex_rounds}


def duplex_rate(rounds: Callable[[], None]) -> float:
    return gbps(DUPLEX_TOTAL_BYTES, wall_ms(rounds))


def duplex_setups(cfg: Config) -> dict[str, InTurnSetup]:
    return {lib: setup_of(make, duplex_rate) for lib, make in DUPLEX_ROUNDS_OF.items()}


ROWS: dict[str, Row] = {
    "h2d_d2h_duplex": in_turn_row(
        "H2D + D2H at once, 256 MB each way x 5 rounds, pinned, total", "GB/s", 95.0, "duplex_gbps", duplex_setups,
        DUPLEX_ROUNDS_OF),
}
