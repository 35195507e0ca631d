"""What of an operation's cost under cw.sanitize() is the sanitizer's core, PyTorch's hooks, and CuPy's hooks (the
launch watch, through CUPTI)? Host µs per operation, over plain, of a compiled kernel (2 arrays, 2 scalars), a
built-in op chained in place and a chain making a new array per step, each plainly, with the CuPy watch alone, with
the sanitizer's core, the core and one library's hooks, and all of cw.sanitize(); the medians of 9 rounds of 2,000
calls, the modes taken in turn. Runs with whichever cuweave Python imports; needs PyTorch and
CuPy.

    python3 tools/probes/sanitizer_cost_split.py

Found (one H200, at 3020bee, cuweave's launches through cuLaunchKernel): over plain, the CuPy watch alone +0.225
(compiled), +0.333 (chain), +0.394 (new arrays); the core +0.289, +0.311, +0.619; the core and PyTorch's hooks
+0.360, +0.315, +0.618 (PyTorch's hooks: within the rounds' spread); the core and CuPy's +0.576, +0.699,
+1.025; all of cw.sanitize() +0.521, +0.586, +0.980. The watch's callbacks at each of cuweave's launches were most of
what cw.sanitize() adds beyond its core (Note [cuweave's launches beside the launch watch]). With cuweave's launches
through the one launch call the watch leaves off (one H200): the watch alone +0.024, +0.061, -0.032; the core +0.315,
+0.360, +0.523; all of cw.sanitize() +0.249, +0.424, +0.465.
"""

import contextlib
import statistics
import time

import cupy
import numpy as np
import torch  # noqa: F401 - imported, as in a program using both: cw.sanitize() then attaches PyTorch's hooks

import cuweave as cw
from cuweave import _cupy_hooks, _torch_hooks

AXPBY = r"""
extern "C" __global__ void axpby(float* y, const float* x, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = a * x[i] + b * y[i];
}
"""
CALLS, ROUNDS = 2000, 9


@contextlib.contextmanager
def hooks_alone(*hooks):
    """The hooks cw.sanitize() attaches, without the sanitizer's core."""
    for hook in hooks:
        hook.attach()
    try:
        yield
    finally:
        for hook in hooks:
            hook.detach()


@contextlib.contextmanager
def core_with(*hooks):
    """The sanitizer's core, with some of the hooks cw.sanitize() attaches."""
    cw._core.sanitizer.enable("raise")
    try:
        with hooks_alone(*hooks):
            yield
    finally:
        cw._core.sanitizer.disable()


MODES = {
    "plain": contextlib.nullcontext,
    "cupy watch": lambda: hooks_alone(_cupy_hooks),
    "core": core_with,
    "core+torch": lambda: core_with(_torch_hooks),
    "core+cupy": lambda: core_with(_cupy_hooks),
    "sanitize()": cw.sanitize,
}


def main() -> None:
    arrays = [cw.zeros(256, np.float32) for _ in range(2)]
    axpby = cw.compile(AXPBY, "axpby")
    axpby_arguments = (arrays[0], arrays[1], np.float32(1.0), np.float32(0.5))
    (cupy.zeros(256, cupy.float32) + 1).sum()  # CuPy has compiled kernels, as in a program using it
    cupy.cuda.Device().synchronize()
    chain = {"x": arrays[0]}

    def new_array() -> None:
        chain["x"] = cw.ops.add(chain["x"], 1.0)

    kinds = {
        "compiled": lambda: axpby(1, 256, axpby_arguments),
        "chain": lambda: cw.ops.add(arrays[0], 1.0, out=arrays[0]),
        "new arrays": new_array,
    }

    def one_round(kind: str, mode: str) -> float:
        issue = kinds[kind]
        with MODES[mode]():
            began = time.perf_counter_ns()
            for _ in range(CALLS):
                issue()
            ended = time.perf_counter_ns()
        cw.synchronize()
        return (ended - began) / CALLS / 1e3

    samples = {(kind, mode): [] for kind in kinds for mode in MODES}
    for kind in kinds:
        for mode in MODES:
            one_round(kind, mode)  # warm
    for _ in range(ROUNDS):
        for kind in kinds:
            for mode in MODES:
                samples[kind, mode].append(one_round(kind, mode))
    print(f"{'host µs per operation':22}" + "".join(f"{mode:>12}" for mode in MODES))
    for kind in kinds:
        plain = samples[kind, "plain"]
        print(f"{kind:22}" + "".join(f"{statistics.median(samples[kind, mode]):12.3f}" for mode in MODES))
        print(f"{'  over plain':22}" + "".join(
            f"{statistics.median([a - b for a, b in zip(samples[kind, mode], plain)]):+12.3f}" for mode in MODES))


if __name__ == "__main__":
    main()
