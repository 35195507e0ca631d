"""A timm model trained for a few steps from a PyTorch DataLoader with pinned memory, as timm's train script feeds
it: by default each batch is copied with `non_blocking=True` on the current stream; with the argument
`prefetch_loader`, through timm's PrefetchLoader as installed, which copies and normalizes each batch on a side
stream. The first line printed says whether that PrefetchLoader makes its stream wait for the consumer before
each copy (timm's fix of 2026-09); without that wait, the copy of a batch can take the block of one the model may
still be reading."""

import inspect
import sys

import timm
import timm.data.loader
import torch

prefetching = len(sys.argv) > 1 and sys.argv[1] == "prefetch_loader"
waits = "wait_stream(consumer" in inspect.getsource(timm.data.loader.PrefetchLoader.__iter__)
print(f"timm {timm.__version__}; its PrefetchLoader waits for the consumer: {'yes' if waits else 'no'}", flush=True)

torch.manual_seed(0)
images = torch.randint(0, 256, (64, 3, 64, 64), dtype=torch.uint8)
labels = torch.randint(0, 10, (64,))
dataset = torch.utils.data.TensorDataset(images, labels)
loader = torch.utils.data.DataLoader(dataset, batch_size=16, shuffle=True, pin_memory=True)
model = timm.create_model("resnet18", pretrained=False, num_classes=10).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
mean = torch.tensor([0.485 * 255, 0.456 * 255, 0.406 * 255], device="cuda").view(1, 3, 1, 1)
std = torch.tensor([0.229 * 255, 0.224 * 255, 0.225 * 255], device="cuda").view(1, 3, 1, 1)
prefetcher = timm.data.loader.PrefetchLoader(loader)  # normalizes on its side stream


def epoch_batches():
    if prefetching:
        return prefetcher  # each iteration is an epoch
    return ((x.cuda(non_blocking=True).float().sub_(mean).div_(std), y.cuda(non_blocking=True)) for x, y in loader)


for epoch in range(2):
    for inputs, targets in epoch_batches():
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
torch.cuda.synchronize()
print("done")
