# Found: no ingredient of cuweave's duplex row made the gap: the copy rates of every library drifted together between
# about 71 and 93 GB/s from one minute to the next (H100).
# Cited by: benchmarks/in_turn.py (why a row's libraries take turns within each repetition).
"""Why is cuweave's h2d_d2h_duplex row below PyTorch's and CuPy's (H100: 73.9 GB/s vs 87.5 and 87.9, raw 92.6)?

Both directions are plain cudaMemcpyAsync calls on two streams in every library, so the difference must be in the
memory (where the pinned pages live, how the device memory was allocated) or in what runs beside the copies. Each
variant swaps one ingredient of cuweave's row for a peer's, in one process, first fresh, then after the staged
NumPy rows have run (their copy threads stay); each prints GB/s (median of 5) and the NUMA node of the pinned pages.

    python3 tools/probes/duplex_probe.py
"""
import ctypes
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, "benchmarks")
import copies  # noqa: E402
import duplex as duplex_rows  # noqa: E402
import in_turn  # noqa: E402
import libraries  # noqa: E402
import numpy_copies  # noqa: E402
import timing  # noqa: E402

libraries.load_cuweave()
skipped = libraries.load_peers({})
assert not skipped, skipped
cw, cupy, torch = libraries.cw, libraries.cupy, libraries.torch
cfg = timing.Config(n=20000, reps=5)
SIZE = copies.COPY_BYTES
libc = ctypes.CDLL(None, use_errno=True)
MOVE_PAGES = 279  # x86_64


def numa_nodes(address: int, nbytes: int) -> str:
    """The NUMA nodes of the pages of [address, address + nbytes), sampled (move_pages with no target nodes)."""
    page = os.sysconf("SC_PAGE_SIZE")
    samples = 64
    pages = (ctypes.c_void_p * samples)(*[(address + i * (nbytes // samples)) // page * page for i in range(samples)])
    status = (ctypes.c_int * samples)()
    if libc.syscall(MOVE_PAGES, 0, samples, pages, None, status, 0) != 0:
        return f"move_pages failed (errno {ctypes.get_errno()})"
    counts = {}
    for s in status:
        counts[s] = counts.get(s, 0) + 1
    return ", ".join(f"node {k}: {v}" if k >= 0 else f"error {-k}: {v}" for k, v in sorted(counts.items()))


def duplex(copy_up, copy_down, sync) -> float:
    def rounds():
        for _ in range(duplex_rows.DUPLEX_ROUNDS):
            copy_up()
            copy_down()
        sync()

    return timing.gbps_of(duplex_rows.DUPLEX_TOTAL_BYTES, lambda: timing.wall_ms(rounds), cfg.reps)


def cw_pinned():
    return cw.pinned_empty((SIZE,), np.uint8), cw.pinned_empty((SIZE,), np.uint8)


def cupy_pinned():
    a, b = cupy.cuda.alloc_pinned_memory(SIZE), cupy.cuda.alloc_pinned_memory(SIZE)
    host_in, host_out = np.frombuffer(a, np.uint8, SIZE), np.frombuffer(b, np.uint8, SIZE)
    return host_in, host_out, (a, b)


def variant_cw(host_in, host_out, label):
    up, down = cw.Stream(), cw.Stream()
    dev_in, dev_out = cw.empty((SIZE,), np.uint8, stream=up), cw.zeros((SIZE,), np.uint8, stream=down)

    def sync():
        up.synchronize()
        down.synchronize()

    gbps = duplex(lambda: cw.copy_async(dev_in, host_in, stream=up),
                  lambda: cw.copy_async(host_out, dev_out, stream=down), sync)
    print(f"  {label}: {gbps:.1f} GB/s; host pages {numa_nodes(host_in.ctypes.data, SIZE)}", flush=True)


def variant_cupy_copies(host_in, host_out, label):
    """CuPy's runtime memcpyAsync on CuPy streams and device memory, between the given host buffers."""
    rt = cupy.cuda.runtime
    up, down = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    dev_in, dev_out = cupy.empty(SIZE, dtype=cupy.uint8), cupy.zeros(SIZE, dtype=cupy.uint8)
    cupy.cuda.Device().synchronize()

    def sync():
        up.synchronize()
        down.synchronize()

    gbps = duplex(lambda: rt.memcpyAsync(dev_in.data.ptr, host_in.ctypes.data, SIZE, rt.memcpyHostToDevice, up.ptr),
                  lambda: rt.memcpyAsync(host_out.ctypes.data, dev_out.data.ptr, SIZE, rt.memcpyDeviceToHost, down.ptr),
                  sync)
    print(f"  {label}: {gbps:.1f} GB/s; host pages {numa_nodes(host_in.ctypes.data, SIZE)}", flush=True)


def round_of_variants(title):
    print(title, flush=True)
    in_turn.in_turn_results.cache_clear()
    row = in_turn.in_turn_results(cfg, duplex_rows.duplex_setups)
    print("  benchmark row (libraries in turn): " + ", ".join(f"{lib} {gbps:.1f}" for lib, gbps in row.items())
          + " GB/s", flush=True)
    host_in, host_out = cw_pinned()
    variant_cw(host_in, host_out, "cuweave copies, cuweave pinned pages")
    variant_cupy_copies(host_in, host_out, "CuPy copies, cuweave pinned pages")
    c_in, c_out, keep = cupy_pinned()
    variant_cw(c_in, c_out, "cuweave copies, CuPy pinned pages (cudaHostAlloc)")
    variant_cupy_copies(c_in, c_out, "CuPy copies, CuPy pinned pages")
    del host_in, host_out, c_in, c_out, keep


def distinct_device_buffers(pairs=6):
    """The same host buffers and streams, `pairs` pairs of device buffers all alive at once (so each is other
    memory): does the rate follow the device memory?"""
    host_in, host_out = cw_pinned()
    up, down = cw.Stream(), cw.Stream()
    buffers = [(cw.empty((SIZE,), np.uint8, stream=up), cw.zeros((SIZE,), np.uint8, stream=down)) for _ in range(pairs)]

    def sync():
        up.synchronize()
        down.synchronize()

    rates = []
    for dev_in, dev_out in buffers + buffers:  # each pair twice: is a pair's rate its own?
        rates.append(duplex(lambda d=dev_in: cw.copy_async(d, host_in, stream=up),
                            lambda d=dev_out: cw.copy_async(host_out, d, stream=down), sync))
    print("  distinct device buffer pairs, each twice: " + ", ".join(f"{r:.1f}" for r in rates), flush=True)
    def one_way(destination, source, stream):
        return timing.gbps_of(SIZE, lambda: timing.wall_ms(lambda: (cw.copy_async(destination, source, stream=stream),
                                                                  sync())), 5)

    h2d = [one_way(d, host_in, up) for d, _ in buffers]
    d2h = [one_way(host_out, d, down) for _, d in buffers]
    print("  one way alone, per pair: H2D " + ", ".join(f"{r:.1f}" for r in h2d) + "; D2H "
          + ", ".join(f"{r:.1f}" for r in d2h), flush=True)


print(subprocess.run(["lscpu"], capture_output=True, text=True).stdout.split("NUMA node(s)")[-1][:300].strip())
print(f"this process may run on CPUs {sorted(os.sched_getaffinity(0))[:4]}... "
      f"({len(os.sched_getaffinity(0))})")
round_of_variants("fresh process")
distinct_device_buffers()
numpy_copies.cw_numpy_to_device(cfg)
numpy_copies.cw_device_to_numpy(cfg, None)
print(f"staging: {cw.staging_stats()}")
round_of_variants("after the staged NumPy rows")
distinct_device_buffers()
