"""The graphs a graph function or a woven function keeps: one per call signature, the least recently used
evicted first (with a GraphCacheWarning), and the count of hits, misses (captures) and evictions."""

from __future__ import annotations

import collections
import warnings
from collections.abc import Callable, Hashable
from typing import Any

from cuweave.errors import GraphCacheWarning


class GraphCache:
    """`owner` and `signature` name the function and what a signature is made of in the eviction warning."""

    def __init__(self, owner: str, function: Callable[..., Any], signature: str, max_graphs: int) -> None:
        if isinstance(max_graphs, bool) or not isinstance(max_graphs, int) or max_graphs < 1:
            raise ValueError(f"max_graphs must be a positive int, not {max_graphs!r}")
        self.max_graphs = max_graphs
        self.stats = {"hits": 0, "misses": 0, "evictions": 0}  # counted by the owner's fast paths too
        self._graphs: collections.OrderedDict[Hashable, Any] = collections.OrderedDict()
        self._what = f"{owner} {getattr(function, '__name__', 'function')!r}"
        self._signature = signature

    def __len__(self) -> int:
        return len(self._graphs)

    def peek(self, key: Hashable) -> Any:
        """The entry for `key`, or None; counts nothing and keeps the order."""
        return self._graphs.get(key)

    def get(self, key: Hashable) -> Any:
        """The entry for `key` (a hit: now the most recently used), or None."""
        entry = self._graphs.get(key)
        if entry is not None:
            self._graphs.move_to_end(key)
            self.stats["hits"] += 1
        return entry

    def add(self, key: Hashable, entry: Any, *, stacklevel: int) -> None:
        """Keeps a new capture's entry (a miss); beyond max_graphs, evicts the least recently used, and warns at
        the caller `stacklevel` frames above this call's caller."""
        self.stats["misses"] += 1
        self._graphs[key] = entry
        if len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)
            self.stats["evictions"] += 1
            warnings.warn(
                f"{self._what} has met {self.stats['misses']} signatures ({self._signature}) and evicts graphs "
                f"from its cache of {self.max_graphs}; each new signature is a new capture. Pad inputs to a few "
                f"fixed shapes, or raise max_graphs.",
                GraphCacheWarning,
                stacklevel=stacklevel + 2,
            )

    def info(self, **more: int) -> dict[str, int]:
        """What cache_info() returns: graphs held, max_graphs, the counts, and the owner's own (`more`)."""
        return {"graphs": len(self._graphs), "max_graphs": self.max_graphs, **self.stats, **more}
