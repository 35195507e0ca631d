"""A PyTorch program with a race between two streams: `y = x * 2` on stream b reads `x` while stream a may still
be filling it."""

import torch

a, b = torch.cuda.Stream(), torch.cuda.Stream()
x = torch.empty(1 << 26, device="cuda")
with torch.cuda.stream(a):
    x.fill_(1.0)
# b.wait_stream(a)   # the fix: stream b waits for what stream a has queued
with torch.cuda.stream(b):
    y = x * 2
torch.cuda.synchronize()
print(y.sum().item())
