"""torch_woven_exit_probe.py -- does a woven function of PyTorch operators leave PyTorch's tensors safe to free?

    python3 tools/probes/torch_woven_exit_probe.py [keep|del|weave]     (on a GPU, with PyTorch)

`keep` ends the process with the tensors alive, `del` frees them one by one after the woven function is gone, and
`weave` runs the same operators in a plain cw.weave() block, for comparison.

Found (one H200, CUDA 13.0, PyTorch's image on the device machine, cuweave at 6f4adf0; with an earlier form of this
script, the same operators and steps): the woven function's results are right at every call (3 calls, 3 kernel
nodes, 1 capture), but freeing a tensor it touched aborts the process, at exit (`keep`) or at the first `del`
(`del`, with nothing else holding the tensor: 0 referrers): PyTorch's caching allocator throws
cudaErrorContextIsDestroyed from insert_events, the event it records on each stream the tensor's record_stream
named. `weave` ends cleanly. The likely cause, not yet confirmed by a fix: the weave's hooks tell record_stream the
stream each operator is placed on, and under cw.woven the weave's first stream is the capture's stream, made for the
capture and destroyed after it, so PyTorch later records an event on a destroyed stream. (With the sanitizer on, the
operators also go unchecked: their streams are first met inside the capture, and a RuntimeWarning says so.)

Fixed (one H200, with the fix): `keep`, `del` and `weave` all end cleanly, every call right. Under a capture the
hooks no longer tell record_stream; the graph keeps the tensors instead (Note [PyTorch under a weave]).
"""

from __future__ import annotations

import gc
import sys

import torch

import cuweave as cw

N = 1 << 16
x = torch.arange(N, dtype=torch.float32, device="cuda")
out, doubled, shifted = (torch.empty_like(x) for _ in range(3))
torch.cuda.synchronize()


def operators() -> None:
    torch.mul(x, 2, out=doubled)
    torch.add(x, 1, out=shifted)  # independent of the first
    torch.add(doubled, shifted, out=out)


mode = sys.argv[1] if len(sys.argv) > 1 else "keep"
if mode == "weave":
    with cw.weave():
        operators()
    torch.cuda.synchronize()
else:
    @cw.woven
    def step(x_view: cw.DeviceArray, out_view: cw.DeviceArray) -> None:
        operators()

    for shift in (0, 10, 20):
        if shift:
            x.add_(10)
        torch.cuda.synchronize()
        step(cw.asarray(x), cw.asarray(out))
        cw.synchronize()
        expected = 3 * (torch.arange(N, dtype=torch.float32) + shift) + 1
        print(f"call with x + {shift}: right: {torch.equal(out.cpu(), expected)}", flush=True)
    del step
    gc.collect()
    if mode == "del":
        for name in ("x", "out", "doubled", "shifted"):
            print(f"freeing {name} ({len(gc.get_referrers(globals()[name])) - 1} other referrers)", flush=True)
            del globals()[name]
            gc.collect()
print(f"{mode}: end", flush=True)
