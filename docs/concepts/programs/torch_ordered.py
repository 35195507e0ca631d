"""torch_race.py with its fix, a few steps long: copies on one stream, compute on another, ordered by waits."""

import torch

copy, compute = torch.cuda.Stream(), torch.cuda.Stream()
host = torch.randn(8, 1 << 22).pin_memory()
weights = torch.randn(1 << 22, device="cuda")
for step in range(8):
    with torch.cuda.stream(copy):
        batch = host[step].to("cuda", non_blocking=True)
    compute.wait_stream(copy)
    with torch.cuda.stream(compute):
        batch.record_stream(compute)
        weights.add_(batch * 0.01)
torch.cuda.synchronize()
print(float(weights.sum()))
