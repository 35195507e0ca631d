"""Builds cuweave's PyTorch hook into PyTorch's extensions cache (run by cuweave in a process of its own)."""

from cuweave._torch_native import _load

if __name__ == "__main__":
    _load()
