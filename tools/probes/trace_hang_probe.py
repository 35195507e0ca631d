"""Probe: a traced record + wait loop after an earlier trace (optionally one that ran PyTorch work)."""
import sys
import time

import cuweave as cw

use_torch = "torch" in sys.argv
s = cw.Stream()
with cw.trace():
    if use_torch:
        import torch

        tensor = torch.ones(10, device="cuda")
        with torch.cuda.stream(torch.cuda.ExternalStream(s.handle)):
            tensor.add_(1)
    else:
        cw.ops.spin(0.001, stream=s)
a, b = cw.Stream(), cw.Stream()
event = cw.Event()
with cw.trace() as t:
    start = time.perf_counter()
    for i in range(1, 60001):
        a.record(event)
        b.wait(event)
        if i % 5000 == 0:
            print(f"{i}: {(time.perf_counter() - start) / i * 1e6:.2f} us/pair", flush=True)
print("closed", len(t.events), flush=True)
