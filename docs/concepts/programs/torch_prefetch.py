"""A side-stream prefetcher, in the shape of timm's PrefetchLoader before its fix: each batch is copied on a side
stream while the model reads the one before; a batch dropped goes back to the side stream's pool, and the next
copy takes its block while the model's reads of it may still be queued. Run with record_stream or wait_stream
as the argument for either fix."""

import sys

import torch

fix = sys.argv[1] if len(sys.argv) > 1 else None
model = torch.nn.Linear(1024, 10).cuda()
host_batches = [torch.randn(256, 1024).pin_memory() for _ in range(6)]
side = torch.cuda.Stream()


def prefetch(host):
    if fix == "wait_stream":
        side.wait_stream(torch.cuda.current_stream())  # the copy waits for the reads queued so far
    with torch.cuda.stream(side):
        batch = host.to("cuda", non_blocking=True)
    torch.cuda.current_stream().wait_stream(side)
    if fix == "record_stream":
        batch.record_stream(torch.cuda.current_stream())  # its block is reused only after this stream's reads
    return batch


batch = prefetch(host_batches[0])
for host in host_batches[1:]:
    upcoming = prefetch(host)
    model(batch).sum().backward()  # reads the batch, forward and backward, on the current stream
    batch = upcoming  # the batch just read is dropped: its block goes back to the side stream's pool
torch.cuda.synchronize()
print("done")
