# Found: raw CUDA inside the process slows as much as every library after the other rows: per node raw 0.880, cuweave
# 0.891, CuPy 0.892, torch 0.993 µs fresh; 1.070, 1.069, 1.069, 1.166 after (H100).
# Cited by: benchmarks/README.md (the graph_node row), benchmarks/raw_cuda.py and raw_cuda.cu (raw CUDA measured in
# the process).
"""Why the graph_node row depends on what ran before it in the process (issue: graph hot paths at raw CUDA).

Measures the 1,000-node graph's per-node cost for raw CUDA *in this process* (raw_cuda.cu built as a shared
library, called through ctypes), cuweave, PyTorch and CuPy: first in a fresh process, then again after every
other benchmark row has run here. If raw CUDA slows down as much as the libraries, the cost is the process's
state (memory pools, mappings, clocks), not cuweave's graph launch.

    python3 tools/probes/graph_node_process_state.py
"""
import ctypes
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, "benchmarks")
import graphs  # noqa: E402
import libraries  # noqa: E402
import raw_cuda  # noqa: E402
import run  # noqa: E402
import timing  # noqa: E402

libraries.load_cuweave()
skipped = libraries.load_peers({})
assert not skipped, skipped
cfg = timing.Config(n=20000, reps=7)

library = pathlib.Path(tempfile.mkdtemp()) / "raw_cuda.so"
subprocess.run(["nvcc", "-O2", "-std=c++17", "-arch=native", "-shared", "-Xcompiler", "-fPIC", "-Dmain=raw_cuda_main",
                str(raw_cuda.RAW_SOURCE), "-o", str(library)], check=True)
raw = ctypes.CDLL(str(library))
raw.raw_graph_node_us.restype = ctypes.c_double
raw.raw_graph_node_us.argtypes = [ctypes.c_int]


def measure(label):
    figures = {"raw CUDA (this process)": raw.raw_graph_node_us(cfg.reps),
               "cuweave": graphs.cw_graph_node(cfg), "torch": graphs.torch_graph_node(cfg),
               "cupy": graphs.cupy_graph_node(cfg)}
    figures["raw CUDA again"] = raw.raw_graph_node_us(cfg.reps)
    print(label + ": " + ", ".join(f"{name} {us:.3f} us" for name, us in figures.items()), flush=True)


measure("fresh process")
for name, row in run.ROWS.items():
    if name.startswith("graph_node"):
        continue
    for lib, fn in row.measure.items():
        try:
            fn(cfg)
            libraries.synchronize(lib)
        except Exception as error:  # noqa: BLE001 - a probe: keep going
            print(f"  ({name}/{lib} failed: {error!r})")
measure("after the other rows")
