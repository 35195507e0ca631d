"""Eager launches of a tiny kernel: compiled (cw.compile) and built in (cw.ops)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

import libraries
from raw_cuda import CUPY_HERE, IN_PROCESS_RAW, in_turn_here, paired_with_raw_here, raw_in_process
from rows import Row
from timing import Config, launch_cost_rep, launch_cost_us, median_of

cw = torch = cupy = None  # the loaded libraries, set as they load (libraries.share_with)
libraries.share_with(globals())


# --------------------------------------------------------------------------- eager tiny-kernel launch


INCREMENT = r'extern "C" __global__ void increment(float* x) { x[0] += 1.0f; }'


def cw_tiny_kernel_launch_rep(cfg: Config) -> tuple[Callable[[], float], Callable[[], None]]:
    """A kernel compiled with cw.compile (as CuPy's RawKernel) that increments one float, 1 thread: one
    repetition, and a check to call after the last."""
    kernel = cw.compile(INCREMENT, "increment")
    s = cw.Stream()
    x = cw.zeros(1, np.float32, stream=s)
    args = (x,)

    def check() -> None:
        assert x.to_numpy(stream=s)[0] > 0

    return launch_cost_rep(lambda: kernel(1, 1, args, stream=s), s.synchronize, cfg), check


def measured_then_checked(rep_and_check: tuple[Callable[[], float], Callable[[], None]],
                          measure: Callable[[Callable[[], float]], Any]) -> Any:
    """`measure` of a repetition, then its check."""
    rep, check = rep_and_check
    result = measure(rep)
    check()
    return result


def cw_tiny_kernel_launch(cfg: Config) -> float:
    return measured_then_checked(cw_tiny_kernel_launch_rep(cfg), lambda rep: median_of(cfg.reps, rep))


def cw_tiny_kernel_launch_paired(cfg: Config) -> dict[str, float]:
    """cw_tiny_kernel_launch in turn with raw CUDA's launch loop in this process."""
    return measured_then_checked(cw_tiny_kernel_launch_rep(cfg), lambda rep: paired_with_raw_here(
        rep, lambda: raw_in_process().raw_tiny_kernel_launch_us(1, cfg.n), cfg))


def cw_tiny_builtin_launch_rep(cfg: Config) -> tuple[Callable[[], float], Callable[[], None]]:
    """cw.ops.add(x, 1.0, out=x) on a one-element float32 array, the built-in kernel on one element: one
    repetition, and a check to call after the last."""
    s = cw.Stream()
    x = cw.zeros(1, np.float32, stream=s)
    add = cw.ops.add

    def check() -> None:
        assert x.to_numpy(stream=s)[0] > 0

    return launch_cost_rep(lambda: add(x, 1.0, out=x, stream=s), s.synchronize, cfg), check


def cw_tiny_builtin_launch(cfg: Config) -> float:
    return measured_then_checked(cw_tiny_builtin_launch_rep(cfg), lambda rep: median_of(cfg.reps, rep))


def cw_tiny_builtin_launch_paired(cfg: Config) -> dict[str, float]:
    """cw_tiny_builtin_launch in turn with raw CUDA's launch loop where its helper was built and CuPy's RawKernel
    launch (its nearest kernel) where CuPy is loaded, all in this process: the targets are ratios to both, and a
    process's state moves each."""
    others = {}
    try:
        raw = raw_in_process()
        others[IN_PROCESS_RAW] = lambda: raw.raw_tiny_kernel_launch_us(1, cfg.n)
    except RuntimeError:  # no raw helper (run.py says why under the table): the peers alone
        pass
    if cupy is not None:
        others[CUPY_HERE] = cupy_tiny_kernel_launch_rep(cfg)
    return measured_then_checked(cw_tiny_builtin_launch_rep(cfg),
                                 lambda rep: in_turn_here({"cuweave": rep, **others}, cfg))


def torch_tiny_kernel_launch(cfg: Config) -> float:
    x = torch.zeros(1, dtype=torch.float32, device="cuda")
    stream = torch.cuda.Stream()  # non-blocking, as torch creates them
    with torch.cuda.stream(stream):
        return launch_cost_us(lambda: x.add_(1), stream.synchronize, cfg)


def cupy_tiny_kernel_launch_rep(cfg: Config) -> Callable[[], float]:
    """One repetition of CuPy's tiny launch: a RawKernel of the same source on a non-blocking stream of its own."""
    kernel = cupy.RawKernel(INCREMENT, "increment")
    x = cupy.zeros(1, dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    args = (x,)
    launches = launch_cost_rep(lambda: kernel((1,), (1,), args), stream.synchronize, cfg)

    def rep() -> float:
        with stream:  # CuPy's kernels launch on its current stream
            return launches()

    return rep


def cupy_tiny_kernel_launch(cfg: Config) -> float:
    return median_of(cfg.reps, cupy_tiny_kernel_launch_rep(cfg))


ROWS: dict[str, Row] = {
    "tiny_kernel_launch": Row(
        "tiny kernel launch, wall incl. sync", "us", 2.9, "tiny_kernel_launch_us",
        {"cuweave": cw_tiny_kernel_launch_paired, "torch": torch_tiny_kernel_launch,
         "cupy": cupy_tiny_kernel_launch}),
    "tiny_builtin_launch": Row(
        "built-in kernel launch (cw.ops.add, 1 element), wall incl. sync", "us", None, "tiny_kernel_launch_us",
        {"cuweave": cw_tiny_builtin_launch_paired, "torch": torch_tiny_kernel_launch,
         "cupy": cupy_tiny_kernel_launch}),
}
