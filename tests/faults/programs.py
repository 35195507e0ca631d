"""The programs the fault sweep runs (tools/fault-sweep): small versions of what the suite's programs do, each
touching one area (copies, prefetch, graphs, graph functions, the weave, collectives, traces). Each takes a dict
`keep` for what the sweep inspects once the program's own references are gone (a stream pool's leases), and
checks its own results: under injected faults it must either finish with the right results or raise."""

from __future__ import annotations

import numpy as np

import cuweave as cw

N = 1 << 12


def copies(keep: dict) -> None:
    host = np.arange(N, dtype=np.float32)
    s = cw.Stream()
    x = cw.to_device(host, stream=s)
    y = cw.empty(N, np.float32, stream=s)
    cw.copy_async(y, x, stream=s).wait()
    block = cw.pinned_pool().allocate(N * 4)  # returns to the pool as its last reference goes
    back = y.to_numpy(stream=s, pinned=True)
    assert np.array_equal(back, host)
    again = cw.ops.scale(y, 2.0, out=cw.empty(N, np.float32, stream=s), stream=s).to_numpy(stream=s)
    assert np.array_equal(again, 2 * host)
    del block
    s.close()


def prefetch(keep: dict) -> None:
    batches = [np.full(N, i, np.float32) for i in range(6)]
    with cw.Stream() as compute:
        for i, d in enumerate(cw.prefetch(batches, depth=2)):
            total = cw.ops.sum(d).to_numpy(stream=compute)
            assert float(total) == i * N
    # dict batches: each copied in one batch, which a fault may stop part way
    pairs = ({"x": np.full(N, i, np.float32), "y": np.full(16, -i, np.float32)} for i in range(4))
    with cw.Stream() as compute:
        for i, d in enumerate(cw.prefetch(pairs, depth=2)):
            assert float(cw.ops.sum(d["x"]).to_numpy(stream=compute)) == i * N
            assert float(cw.ops.sum(d["y"]).to_numpy(stream=compute)) == -16 * i


def graphs(keep: dict) -> None:
    s = cw.Stream()
    x = cw.to_device(np.ones(N, np.float32), stream=s)
    with s, cw.capture(s) as cap:
        cw.ops.scale(x, 2.0, out=x)
        cw.ops.add(x, 1.0, out=x)
    for _ in range(3):
        cap.graph.replay(s)
    assert np.array_equal(x.to_numpy(stream=s), np.full(N, 15.0, np.float32))  # ((1*2+1)*2+1)*2+1
    s.close()


def graph_functions(keep: dict) -> None:
    @cw.graph_function
    def step(x, y):
        return cw.ops.add(cw.ops.scale(x, 2.0, out=cw.empty(x.shape, x.dtype)), y)

    for _ in range(3):
        out = step(np.ones(N, np.float32), np.full(N, 0.5, np.float32))
        assert (out == 2.5).all()


def weave(keep: dict) -> None:
    pool = keep["stream_pool"] = cw.StreamPool(3)
    with cw.Stream() as s:
        x = cw.to_device(np.arange(N, dtype=np.float32))
        with cw.weave(streams=pool):
            a = cw.ops.scale(x, 2.0, out=cw.empty(N, np.float32))  # scale without out= works in place
            b = cw.ops.add(x, 1.0)
            c = cw.ops.add(a, b)
        assert np.array_equal(c.to_numpy(stream=s), 3 * np.arange(N, dtype=np.float32) + 1)
    with pool.reserve() as lent:
        cw.ops.fill(cw.empty(N, np.float32, stream=lent), 1.0, stream=lent)
        lent.synchronize()


def collectives(keep: dict) -> None:
    n = cw.device_count()
    comms = cw.collectives.communicators(range(n), timeout=5)  # an absent rank fails every rank within it
    grads, streams = [], []
    for r in range(n):
        with cw.Device(r):
            streams.append(cw.Stream())
            grads.append(cw.to_device(np.full(N, r + 1.0, np.float32), stream=streams[r]))
    comms.all_reduce(grads, streams=streams)
    for r in range(n):
        with cw.Device(r):
            assert (grads[r].to_numpy(stream=streams[r]) == n * (n + 1) / 2).all()
    comms.close()


def traces(keep: dict) -> None:
    s, other = cw.Stream(), cw.Stream()
    x = cw.zeros(N, np.float32, stream=s)
    y = cw.zeros(N, np.float32, stream=other)
    with cw.trace() as timeline:
        cw.ops.add(x, 1.0, out=x, stream=s)
        cw.ops.scale(y, 2.0, out=y, stream=other)
    kernels = [e for e in timeline.events if e.kind == "kernel"]
    assert len(kernels) == 2, kernels
    s.close()
    other.close()


PROGRAMS = {f.__name__: f for f in (copies, prefetch, graphs, graph_functions, weave, collectives, traces)}
