"""Activation offloading as PyTorch provides it: `torch.autograd.graph.save_on_cpu(pin_memory=True)` keeps the
tensors saved for backward in pinned host memory, copied there in the forward pass and back in the backward pass.
Ordinary, correct code: a sanitizer must find nothing."""

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU()) for _ in range(4)])
model = model.cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    inputs = torch.randn(256, 1024, device="cuda")
    with torch.autograd.graph.save_on_cpu(pin_memory=True):
        loss = model(inputs).square().mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
torch.cuda.synchronize()
print("done")
