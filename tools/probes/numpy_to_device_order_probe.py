# Found: measured in turn the two staged paths agree; measured minutes apart, the shared host's drift made one look
# slower, and the host's own copy slower than the staged path it bounds (H100).
# Cited by: benchmarks/numpy_copies.py (the numpy_to_device row takes its bound at the same moments).
"""Why did numpy_to_device (copy_async into a preallocated device array) measure below numpy_to_device_alloc
(cw.to_device, which allocates) in the full benchmark, on two H100 leases (33.9 vs 39.3 GB/s, 23.6 vs 38.8)?
Both go through the same staged path (copy_host_to_device). This measures them in turn, three rounds, beside
the host's 16-thread NumPy -> pinned copy rate the benchmark prints as the staged path's limit.

    python3 tools/probes/numpy_to_device_order_probe.py
"""
import sys

sys.path.insert(0, "benchmarks")
import copies  # noqa: E402
import libraries  # noqa: E402
import numpy_copies  # noqa: E402
import timing  # noqa: E402

libraries.load_cuweave()
cw = libraries.cw
cfg = timing.Config(n=20000, reps=5)
variants = {
    "copy_async into a preallocated array (numpy_to_device)": lambda: numpy_copies.cw_numpy_to_device(cfg),
    "cw.to_device, allocating (numpy_to_device_alloc)": lambda: numpy_copies.cw_numpy_to_device_alloc(cfg),
    "host: NumPy -> pinned, 16 Python threads (the printed limit)": lambda: numpy_copies.host_memcpy_gbps(16),
    "host: NumPy -> pinned, 1 thread": lambda: numpy_copies.host_memcpy_gbps(1),
}
for round_ in range(3):
    order = list(variants)[round_ % 2::] + list(variants)[:round_ % 2]
    print(f"round {round_ + 1}: " + "; ".join(f"{name} {variants[name]():.1f} GB/s" for name in order), flush=True)
a = numpy_copies.host_float64()
print(f"pinned H2D for scale: {copies.cw_copy_gbps(cfg, h2d=True):.1f} GB/s; "
      f"staging {cw.staging_stats()}; array aligned to 2 MB: {a.ctypes.data % (2 << 20) == 0}")
