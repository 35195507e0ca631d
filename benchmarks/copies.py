"""Copies between pinned host memory and the device, timed with CUDA events."""

from __future__ import annotations

import functools

import numpy as np

import libraries
from rows import Row
from timing import Config, gbps_of

cw = torch = cupy = None  # the loaded libraries, set as they load (libraries.share_with)
libraries.share_with(globals())

COPY_BYTES = 256 * 2**20    # "256 MB" copies


# --------------------------------------------------------------------------- pinned H2D / D2H, 256 MB
# Each: pinned host buffer + device buffer, one non-blocking stream, the copy bracketed by timing events.


def cw_copy_gbps(cfg: Config, h2d: bool) -> float:
    s = cw.Stream()
    host = cw.pinned_empty((COPY_BYTES,), np.uint8)
    dev = cw.empty((COPY_BYTES,), np.uint8, stream=s)
    start, end = cw.Event(timing=True), cw.Event(timing=True)
    dst, src = (dev, host) if h2d else (host, dev)

    def one_copy_ms():
        start.record(s)
        cw.copy_async(dst, src, stream=s)
        end.record(s)
        end.synchronize()
        return start.elapsed_time(end)

    return gbps_of(COPY_BYTES, one_copy_ms, cfg.reps)


def torch_copy_gbps(cfg: Config, h2d: bool) -> float:
    s = torch.cuda.Stream()
    host = torch.empty(COPY_BYTES, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dst, src = (dev, host) if h2d else (host, dev)

    def one_copy_ms():
        start.record(s)
        with torch.cuda.stream(s):
            dst.copy_(src, non_blocking=True)
        end.record(s)
        end.synchronize()
        return start.elapsed_time(end)

    return gbps_of(COPY_BYTES, one_copy_ms, cfg.reps)


def cupy_copy_gbps(cfg: Config, h2d: bool) -> float:
    rt = cupy.cuda.runtime
    s = cupy.cuda.Stream(non_blocking=True)
    host = cupy.cuda.alloc_pinned_memory(COPY_BYTES)
    dev = cupy.empty(COPY_BYTES, dtype=cupy.uint8)
    cupy.cuda.Device().synchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()  # timing enabled by default
    if h2d:
        dst, src, kind = dev.data.ptr, host.ptr, rt.memcpyHostToDevice
    else:
        dst, src, kind = host.ptr, dev.data.ptr, rt.memcpyDeviceToHost

    def one_copy_ms():
        start.record(s)
        rt.memcpyAsync(dst, src, COPY_BYTES, kind, s.ptr)
        end.record(s)
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end)

    return gbps_of(COPY_BYTES, one_copy_ms, cfg.reps)


ROWS: dict[str, Row] = {
    "pinned_h2d": Row(
        "pinned H2D copy, 256 MB", "GB/s", 53.0, "pinned_h2d_gbps",
        {"cuweave": functools.partial(cw_copy_gbps, h2d=True),
         "torch": functools.partial(torch_copy_gbps, h2d=True),
         "cupy": functools.partial(cupy_copy_gbps, h2d=True)}),
    "pinned_d2h": Row(
        "pinned D2H copy, 256 MB", "GB/s", 53.0, "pinned_d2h_gbps",
        {"cuweave": functools.partial(cw_copy_gbps, h2d=False),
         "torch": functools.partial(torch_copy_gbps, h2d=False),
         "cupy": functools.partial(cupy_copy_gbps, h2d=False)}),
}
