"""A mixed-precision training loop as PyTorch's AMP recipe writes it (autocast and a GradScaler), its batches copied
on a side stream ahead of use and ordered both ways: the copy stream waits for the step that last used its block
and the step waits for the copy. Ordinary, correct code: a sanitizer must find nothing."""

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cuda")
host_batches = [(torch.randn(128, 512).pin_memory(), torch.randint(0, 10, (128,)).pin_memory()) for _ in range(8)]
copies = torch.cuda.Stream()


def to_device(inputs, targets):
    copies.wait_stream(torch.cuda.current_stream())  # blocks freed by the steps so far are reused only after them
    with torch.cuda.stream(copies):
        inputs, targets = inputs.cuda(non_blocking=True), targets.cuda(non_blocking=True)
    torch.cuda.current_stream().wait_stream(copies)
    return inputs, targets


batch = to_device(*host_batches[0])
for host in host_batches[1:] + [None]:
    upcoming = to_device(*host) if host is not None else None
    inputs, targets = batch
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
    scaler.scale(loss).backward()
    scaler.step(optimizer)  # unscales, skips the step if a gradient is not finite
    scaler.update()
    batch = upcoming
torch.cuda.synchronize()
print("done")
