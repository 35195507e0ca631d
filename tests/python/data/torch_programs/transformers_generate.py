"""A Hugging Face transformers model (a small GPT-2 built from its config, no download): a forward pass with a
loss, then greedy `generate()`. Ordinary code on PyTorch's current stream: a sanitizer must find nothing."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded

import torch
import transformers

torch.manual_seed(0)
config = transformers.GPT2Config(vocab_size=512, n_positions=128, n_embd=128, n_layer=2, n_head=4)
model = transformers.GPT2LMHeadModel(config).cuda().eval()
tokens = torch.randint(0, 512, (4, 32), device="cuda")
with torch.no_grad():
    loss = model(tokens, labels=tokens).loss
    generated = model.generate(tokens, attention_mask=torch.ones_like(tokens), max_new_tokens=8, do_sample=False,
                               pad_token_id=0)
assert generated.shape == (4, 40), generated.shape
print(f"loss {loss.item():.3f}")
print("done")
