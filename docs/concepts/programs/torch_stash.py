"""A stash to the host on a side stream, in the shape of the bug torchrec fixed: activations are copied to pinned
memory on a side stream and dropped on the current stream, whose next allocation takes their block while the
copy may still read it. Run with record_stream or wait_stream as the argument for either fix."""

import sys

import torch

fix = sys.argv[1] if len(sys.argv) > 1 else None
side = torch.cuda.Stream()
host = torch.empty(1 << 20, pin_memory=True)
for step in range(4):
    activations = torch.randn(1 << 20, device="cuda")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        host.copy_(activations, non_blocking=True)  # stashed to the host on the side stream
    if fix == "record_stream":
        activations.record_stream(side)  # its block is reused only after the side stream's copy
    del activations  # its block goes back to the current stream's pool
    if fix == "wait_stream":
        torch.cuda.current_stream().wait_stream(side)  # the next allocation's users wait for the copy
    grads = torch.zeros(1 << 20, device="cuda")  # the current stream's next allocation: the same block
side.synchronize()
print("done")
