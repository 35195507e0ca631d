"""woven_frames_probe.py -- what keeps a woven function of PyTorch operators alive after the caller lets it go?

    python3 tools/probes/woven_frames_probe.py                                   (on a GPU, with PyTorch)
    compute-sanitizer --tool memcheck python3 tools/probes/woven_frames_probe.py

Seen (one H200, CUDA 13.0, cuweave at ce9f474): run plainly, the woven function and its PyTorch memory are released.
Under `compute-sanitizer --tool memcheck` they are not (524,288 bytes of PyTorch memory stay), with cuweave's
sanitizer on or off and with or without the racing write (PROBE_SANITIZE, PROBE_RACE: 1 or 0). The finished frames
that refer to the function (the `_capture` frame and each call's `__call__` and `_call` frames) each carry 3
references that no object Python's garbage collector tracks accounts for: native code outside Python's objects holds
them, only while the tool runs. Which native code, this probe cannot say.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
import types
import weakref

import torch

import cuweave as cw


def describe(obj: object) -> str:
    if isinstance(obj, types.FrameType):
        return f"frame {obj.f_code.co_qualname} ({obj.f_code.co_filename.rsplit('/', 1)[-1]}:{obj.f_lineno})"
    if isinstance(obj, types.TracebackType):
        return f"traceback at {obj.tb_frame.f_code.co_qualname}:{obj.tb_lineno}"
    if isinstance(obj, BaseException):
        return f"exception {type(obj).__name__}: {str(obj)[:120]}"
    if isinstance(obj, (list, dict, tuple)):
        return f"{type(obj).__name__} of {len(obj)}"
    return type(obj).__qualname__


N = 1 << 16
SANITIZE = os.environ.get("PROBE_SANITIZE", "1") == "1"
RACE = os.environ.get("PROBE_RACE", "1") == "1"
with cw.sanitize() if SANITIZE else contextlib.nullcontext():
    x = torch.arange(N, dtype=torch.float32, device="cuda")
    out = torch.empty_like(x)
    torch.cuda.synchronize()

    @cw.woven(streams=3)
    def step(x_view: cw.DeviceArray, out_view: cw.DeviceArray) -> None:
        doubled = torch.mul(x, 2)
        shifted = torch.add(x, 1)
        torch.add(doubled, shifted, out=out)

    before = torch.cuda.memory_allocated()
    for _ in range(3):
        step(cw.asarray(x), cw.asarray(out))
        cw.synchronize()
    if RACE:
        other = cw.Stream()
        step(cw.asarray(x), cw.asarray(out))
        try:
            cw.ops.fill(cw.asarray(out), 0.0, stream=other)
        except cw.RaceError:
            print("the racing write was named")
        other.synchronize()
    cw.synchronize()
    alive = weakref.ref(step)
    del step
    for _ in range(200):
        cw.collect()
        gc.collect()
        if alive() is None:
            break
        time.sleep(0.01)
    print(f"sanitize {SANITIZE}, race {RACE}: woven function released: {alive() is None}; "
          f"PyTorch memory above the start: {torch.cuda.memory_allocated() - before} bytes")
    if alive() is not None:
        frames = [r for r in gc.get_referrers(alive()) if isinstance(r, types.FrameType)]
        for frame in frames:
            visible = [r for r in gc.get_referrers(frame) if r is not frames and r is not globals()]
            # getrefcount's argument, `frames`, the loop variable `frame`: 3 references of the probe's own.
            print(f"{describe(frame)}: references {sys.getrefcount(frame) - 3}, of them gc-visible {len(visible)}: "
                  f"{[describe(r) for r in visible]}; locals {sorted(frame.f_locals)}")
