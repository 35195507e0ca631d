"""woven_frames_probe.py -- what keeps a woven function of PyTorch operators alive after the caller lets it go?

    python3 tools/probes/woven_frames_probe.py                                   (on a GPU, with PyTorch)
    compute-sanitizer --tool memcheck python3 tools/probes/woven_frames_probe.py

Seen once (one H200, CUDA 13.0, cuweave at 0cb0193), in the GPU test this probe repeats: under compute-sanitizer,
after `del step` and 2 s of collects the WovenFunction was still alive, its only referrers 9 frame objects (the
`__call__` and `_call` frames of its 4 calls and its `_capture` frame), so the graph and its temporaries stayed
allocated; without the tool they were released. This prints, for each such frame, its function and what refers to
it, two levels out, and whether the release happened, to find the holder. Not yet run.
"""

from __future__ import annotations

import gc
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


def referrers(obj: object, depth: int, seen: set[int], indent: str = "  ") -> None:
    if depth == 0:
        return
    for referrer in gc.get_referrers(obj):
        if id(referrer) in seen or referrer is sys._getframe():
            continue
        seen.add(id(referrer))
        print(f"{indent}<- {describe(referrer)}")
        referrers(referrer, depth - 1, seen, indent + "  ")


N = 1 << 16
with cw.sanitize():
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
    print(f"woven function released: {alive() is None}; PyTorch memory above the start: "
          f"{torch.cuda.memory_allocated() - before} bytes")
    if alive() is not None:
        for frame in [r for r in gc.get_referrers(alive()) if isinstance(r, types.FrameType)]:
            print(describe(frame))
            referrers(frame, 2, {id(frame)})
