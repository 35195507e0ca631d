"""Where does a PyTorch operator spend its host time inside cw.weave()? (The weave benchmark's torch_add row: 6.2 µs
plain, 35.1 µs woven, 20.1 µs sanitized, H200.)

Found (two H200s, 2026-11-28; each step timed inside the weave, so the PyTorch calls among them also pass the mode
and read high): `with torch.cuda.stream(s)` 16.7-17.2 µs against 1.0 µs for the same switch through torch._C's
get/set of the current stream; record_stream x2 20.5 µs; the tensors' spans 3.7-4.0 µs; _core.weave.place 1.3 µs; the
schema read 0.3 µs. With the switch through torch._C, the weave benchmark's torch_add row read +17.8 µs woven over
plain (8.1 -> 25.8 µs) where the same machine read +37.0 µs before (8.9 -> 45.9 µs). Again on one H200 (2026-11-29,
the same reading inside the weave): record_stream x2 11.0 µs, `with torch.cuda.stream(s)` 9.4 against 0.5 through
torch._C, the spans 0.7, _core.weave.place 0.7; torch.add 6.5 plain, 28.2 woven, 28.5 sanitized.

Times, per call, each step the dispatch mode takes for one torch.add(x, y) of 256 floats inside a weave, beside the
whole operator plain, woven and sanitized: medians of --rounds rounds of --calls calls, host µs.

    python3 tools/probes/torch_weave_cost_probe.py [--calls 2000] [--rounds 7]
"""

from __future__ import annotations

import argparse

import torch

import cuweave as cw
from cuweave import _core, _torch_hooks
from probe_timing import per_call_us


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    x = torch.ones(256, device="cuda")
    y = torch.ones(256, device="cuda")
    add = torch.ops.aten.add.Tensor
    ranges = [(*_torch_hooks._span(t), False) for t in (x, y)]
    rows: dict[str, float] = {}

    def measure(name: str, step) -> None:
        step()  # warm-up: caches, the weave's first placement
        rows[name] = per_call_us(step, args.calls, args.rounds)
        torch.cuda.synchronize()

    measure("torch.add, plain", lambda: torch.add(x, y))
    with cw.sanitize():
        measure("torch.add, sanitized", lambda: torch.add(x, y))
    with cw.weave(streams=4):
        measure("torch.add, woven", lambda: torch.add(x, y))
        stream = _core.weave.place(ranges)
        torch_stream = _torch_hooks._torch_stream(torch, stream).stream
        measure("  the schema read (cached)", lambda: _torch_hooks._operator(add))
        measure("  the tensors' spans", lambda: [_torch_hooks._span(t) for t in (x, y)])
        measure("  tensor.device.index x2", lambda: (x.device.index, y.device.index))
        measure("  _core.current_stream()", _core.current_stream)
        measure("  _core.weave.place(ranges)", lambda: _core.weave.place(ranges))
        measure("  PyTorch's view of the stream", lambda: _torch_hooks._torch_stream(torch, stream))
        measure("  record_stream x2", lambda: (x.record_stream(torch_stream), y.record_stream(torch_stream)))

        def switch() -> None:
            with torch.cuda.stream(torch_stream):
                pass

        measure("  with torch.cuda.stream(s)", switch)
        ids = _torch_hooks._torch_stream(torch, stream).ids

        def switch_by_ids() -> None:
            previous = torch._C._cuda_getCurrentStream(ids[1])
            torch._C._cuda_setStream(*ids)
            torch._C._cuda_setStream(*previous)

        measure("  the same through torch._C", switch_by_ids)
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            measure("  the operator with no mode", lambda: add(x, y))
        measure("  the whole _place()", lambda: _torch_hooks._place(torch, ranges, [x, y]))
        out = add(x, y)
        begin, size = _torch_hooks._span(out)
        measure("  _core.weave.allocated", lambda: _core.weave.allocated(begin, size, stream))
    print(f"cuweave {cw.__version__}, PyTorch {torch.__version__} on {torch.cuda.get_device_name()}: host µs per call, "
          f"medians of {args.rounds} rounds of {args.calls}")
    for name, us in rows.items():
        print(f"  {name:34s} {us:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
