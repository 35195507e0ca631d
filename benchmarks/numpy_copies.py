"""Copies from and to ordinary (pageable) NumPy memory, wall time: cuweave's staged path beside the peers."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import statistics
from typing import Callable, Iterator

import numpy as np

import libraries
from copies import COPY_BYTES
from rows import Row
from timing import Config, gbps, gbps_of, gc_disabled, wall_ms

cw = torch = cupy = None  # the loaded libraries, set as they load (libraries.share_with)
libraries.share_with(globals())

# numpy_to_device's figures taken in turn with it (cw_numpy_to_device_in_turn).
HOST_COPY_IN_TURN = "host NumPy -> pinned copy, in turn"
PINNED_H2D_IN_TURN = "pinned H2D wall, in turn"
STAGED_OVER_HOST_COPY = "cuweave / host copy, per rep"
STAGED_OVER_PINNED = "cuweave / pinned H2D, per rep"
HOST_COPY_OVER_PINNED = "host copy / pinned H2D, per rep"


# --------------------------------------------------------------------------- NumPy <-> device, 256 MB, wall
# From / to ordinary (pageable) NumPy memory: wall time of one call including the synchronize, so host-side
# staging counts. The source array is made (and every page touched) once, outside the timing.


@functools.cache
def host_float64() -> np.ndarray:
    """The 256 MB ordinary float64 NumPy array of the numpy_to_device rows."""
    return np.arange(COPY_BYTES // 8, dtype=np.float64)


@contextlib.contextmanager
def host_copy(threads: int) -> Iterator[Callable[[], None]]:
    """One copy of the numpy_to_device array into pinned memory (NumPy's copyto, which releases the GIL) by
    `threads` threads, each taking one slice: what limits the staged path, whose copy threads do the same work."""
    a = host_float64()
    pinned = cw.pinned_empty(a.shape, a.dtype)
    bounds = np.linspace(0, a.size, threads + 1).astype(int)
    slices = [slice(begin, end) for begin, end in zip(bounds[:-1], bounds[1:])]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:

        def copy():
            list(pool.map(lambda part: np.copyto(pinned[part], a[part]), slices))

        copy()
        yield copy


def host_memcpy_gbps(threads: int = 1) -> float:
    """This host's NumPy -> pinned copy rate with `threads` threads (host_copy)."""
    with host_copy(threads) as copy:
        return gbps_of(COPY_BYTES, lambda: wall_ms(copy), 3)


def describe_copy_thread_tuning(direction: str, tuning: dict, pool_threads: int) -> str:
    """One line on how many copy threads a staged direction chose as it ran, and what each count copied."""
    rates = ", ".join(f"{c['threads']}: {c['gb_per_s']:.1f}" if c["samples"] else f"{c['threads']}: -"
                      for c in tuning["candidates"])
    state = "settled" if tuning["settled"] else "still trying counts"
    return (f"{direction.replace('_', ' ')}: uses {tuning['threads']} of {pool_threads} copy threads, chosen as "
            f"transfers ran ({state}); host copy GB/s by thread count, medians of recent 64 MB segments: {rates}")


def cw_staged_copy() -> Callable[[], None]:
    """One cw.copy_async of the numpy_to_device array into a preallocated device array, and its synchronize."""
    a, s = host_float64(), cw.Stream()
    dev = cw.empty(a.shape, a.dtype, stream=s)

    def copy():
        cw.copy_async(dev, a, stream=s)
        s.synchronize()

    return copy


def cw_numpy_to_device(cfg: Config) -> float:
    """Into a preallocated device array: the copy alone (the allocating to_device is numpy_to_device_alloc)."""
    return gbps_of(COPY_BYTES, functools.partial(wall_ms, cw_staged_copy()), cfg.reps)


def cw_numpy_to_device_in_turn(cfg: Config) -> dict[str, float]:
    """cw_numpy_to_device, and in turn with it within each repetition what bounds it: this host's NumPy -> pinned
    copy, and a pinned -> device copy (wall time with the synchronize, as the staged row). The host's copy is
    the faster of two thread counts each repetition: the pool's, and the count the staged copies chose as they
    ran (Note [Copy threads chosen as transfers run]). The target (>= 0.8x pinned H2D where the host's copy
    allows it) compares figures taken at the same moments: measured minutes apart, a shared host's drift made
    the host's copy look slower than the staged path it bounds (tools/probes/numpy_to_device_order_probe.py)."""
    staged, s = cw_staged_copy(), cw.Stream()
    pinned_source = cw.pinned_empty((COPY_BYTES,), np.uint8)
    pinned_target = cw.empty((COPY_BYTES,), np.uint8, stream=s)

    def pinned():
        cw.copy_async(pinned_target, pinned_source, stream=s)
        s.synchronize()

    def rate(copy: Callable[[], None]) -> float:
        return gbps(COPY_BYTES, wall_ms(copy))

    staged()  # a segment or more for the tuner before its choice is read
    stats = cw.staging_stats()
    counts = sorted({stats["copy_threads"], stats["to_device"]["threads"]})
    with contextlib.ExitStack() as stack, gc_disabled():
        host_copies = [stack.enter_context(host_copy(threads)) for threads in counts]
        staged(), pinned()  # warm-up (host_copy warmed itself up)
        reps = [(rate(staged), max(rate(copy) for copy in host_copies), rate(pinned)) for _ in range(cfg.reps)]
    return {"cuweave": statistics.median(r[0] for r in reps),
            HOST_COPY_IN_TURN: statistics.median(r[1] for r in reps),
            PINNED_H2D_IN_TURN: statistics.median(r[2] for r in reps),
            STAGED_OVER_HOST_COPY: statistics.median(r[0] / r[1] for r in reps),
            STAGED_OVER_PINNED: statistics.median(r[0] / r[2] for r in reps),
            HOST_COPY_OVER_PINNED: statistics.median(r[1] / r[2] for r in reps)}


def cw_numpy_to_device_alloc(cfg: Config) -> float:
    a, s = host_float64(), cw.Stream()

    def copy():
        dev = cw.to_device(a, stream=s)
        s.synchronize()
        return dev

    return gbps_of(COPY_BYTES, lambda: wall_ms(copy), cfg.reps)


def torch_numpy_to_device(cfg: Config) -> float:
    a = host_float64()
    dev = torch.empty(a.shape, dtype=torch.float64, device="cuda")
    stream = torch.cuda.current_stream()
    stream.synchronize()

    def copy():
        dev.copy_(torch.from_numpy(a))
        stream.synchronize()

    return gbps_of(COPY_BYTES, lambda: wall_ms(copy), cfg.reps)


def torch_numpy_to_device_alloc(cfg: Config) -> float:
    a, stream = host_float64(), torch.cuda.current_stream()

    def copy():
        dev = torch.from_numpy(a).to("cuda")
        stream.synchronize()
        return dev

    return gbps_of(COPY_BYTES, lambda: wall_ms(copy), cfg.reps)


def torch_numpy_to_device_pin(cfg: Config) -> float:
    """pin_memory() (a host copy into torch's cached pinned memory, timed) + an async copy + sync."""
    a, stream = host_float64(), torch.cuda.current_stream()

    def copy():
        dev = torch.from_numpy(a).pin_memory().to("cuda", non_blocking=True)
        stream.synchronize()
        return dev

    return gbps_of(COPY_BYTES, lambda: wall_ms(copy), cfg.reps)


def cupy_numpy_to_device(cfg: Config) -> float:
    a, stream = host_float64(), cupy.cuda.get_current_stream()

    def copy():
        dev = cupy.asarray(a)
        stream.synchronize()
        return dev

    return gbps_of(COPY_BYTES, lambda: wall_ms(copy), cfg.reps)


def cw_device_to_numpy(cfg: Config, pinned: bool | None) -> float:
    """d.to_numpy(): a new NumPy array, returned once the copy is complete. pinned=None (the default): on
    pooled pinned memory once the size recurs (from the second call on, i.e. after the warm-up repetition);
    pinned=True: always pinned; pinned=False: always ordinary (pageable) memory."""
    s = cw.Stream()
    dev = cw.zeros((COPY_BYTES // 8,), np.float64, stream=s)
    return gbps_of(COPY_BYTES, lambda: wall_ms(lambda: dev.to_numpy(stream=s, pinned=pinned)), cfg.reps)


def torch_device_to_numpy(cfg: Config, pinned: bool) -> float:
    dev = torch.zeros(COPY_BYTES // 8, dtype=torch.float64, device="cuda")
    stream = torch.cuda.current_stream()
    stream.synchronize()

    def to_pinned():
        host = torch.empty(dev.shape, dtype=dev.dtype, pin_memory=True)
        host.copy_(dev, non_blocking=True)
        stream.synchronize()
        return host.numpy()

    return gbps_of(COPY_BYTES, lambda: wall_ms(to_pinned if pinned else lambda: dev.cpu().numpy()), cfg.reps)


def cupy_device_to_numpy(cfg: Config, pinned: bool) -> float:
    import cupyx

    dev = cupy.zeros(COPY_BYTES // 8, dtype=cupy.float64)
    cupy.cuda.get_current_stream().synchronize()

    def to_pinned():
        host = cupyx.empty_pinned(dev.shape, dtype=dev.dtype)
        dev.get(out=host)  # blocking
        return host

    return gbps_of(COPY_BYTES, lambda: wall_ms(to_pinned if pinned else lambda: cupy.asnumpy(dev)), cfg.reps)


ROWS: dict[str, Row] = {
    "numpy_to_device": Row(
        "NumPy (pageable) -> device, 256 MB, into a preallocated array, wall", "GB/s", 45.0, "pageable_h2d_gbps",
        {"cuweave": cw_numpy_to_device_in_turn, "torch": torch_numpy_to_device, "cupy": cupy_numpy_to_device}),
    "numpy_to_device_alloc": Row(
        "NumPy (pageable) -> new device array, 256 MB, wall", "GB/s", None, "pageable_h2d_gbps",
        {"cuweave": cw_numpy_to_device_alloc, "torch": torch_numpy_to_device_alloc, "cupy": cupy_numpy_to_device}),
    "numpy_to_device_torch_pin": Row(
        "NumPy -> device via torch pin_memory(), 256 MB, wall", "GB/s", None, None,
        {"torch": torch_numpy_to_device_pin}),
    "device_to_numpy": Row(
        "device -> new NumPy array (default call), 256 MB, wall", "GB/s", 45.0, "pageable_d2h_gbps",
        {"cuweave": functools.partial(cw_device_to_numpy, pinned=None),
         "torch": functools.partial(torch_device_to_numpy, pinned=False),
         "cupy": functools.partial(cupy_device_to_numpy, pinned=False)}),
    "device_to_numpy_ordinary": Row(
        "device -> new NumPy array in ordinary memory (cuweave pinned=False), 256 MB, wall", "GB/s", None,
        "pageable_d2h_gbps",
        {"cuweave": functools.partial(cw_device_to_numpy, pinned=False),
         "torch": functools.partial(torch_device_to_numpy, pinned=False),
         "cupy": functools.partial(cupy_device_to_numpy, pinned=False)}),
    "device_to_numpy_pinned": Row(
        "device -> new NumPy array on pooled pinned memory, 256 MB, wall", "GB/s", None, None,
        {"cuweave": functools.partial(cw_device_to_numpy, pinned=True),
         "torch": functools.partial(torch_device_to_numpy, pinned=True),
         "cupy": functools.partial(cupy_device_to_numpy, pinned=True)}),
}
