"""Loading cuweave and the peers (PyTorch, CuPy), and what the run reports of them."""

from __future__ import annotations

import datetime
import platform
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PEERS = ("torch", "cupy")
LIBS = ("cuweave",) + PEERS  # measured in this process; "raw" comes from raw_cuda.cu

# Library modules, set by load_cuweave() / load_peers(); a peer stays None when skipped.
cw = None
torch = None
cupy = None
_sharing: list[dict] = [globals()]  # the namespaces that hold cw, torch and cupy (share_with)


def share_with(namespace: dict) -> None:
    """Keep cw, torch and cupy in `namespace` (a row module's globals()) as they are now and as they load. The row
    functions look them up as globals of their own module, as when every row was in run.py: an attribute of this
    module instead (libraries.cw.copy_async) would add a lookup to every call in the timed loops."""
    _sharing.append(namespace)
    namespace.update(cw=cw, torch=torch, cupy=cupy)


def set_loaded(name: str, module) -> None:
    """Make `module` the library `name` ("cw", "torch" or "cupy") here and in every module sharing them."""
    for namespace in _sharing:
        namespace[name] = module


def loaded() -> dict:
    """Each library's module by column name (None where it is not loaded)."""
    return {"cuweave": cw, "torch": torch, "cupy": cupy}


# --------------------------------------------------------------------------- loading the libraries


def load_cuweave() -> None:
    """Import cuweave (installed, else from the source tree's python/); exit 2 if it cannot use a GPU."""
    try:
        import cuweave
    except Exception as first:  # noqa: BLE001 -- an extension that fails to load raises more than ImportError
        source_tree = HERE.parent / "python"
        if not (source_tree / "cuweave" / "__init__.py").is_file():
            _give_up(f"cannot import cuweave: {type(first).__name__}: {first}")
        sys.path.insert(0, str(source_tree))
        try:
            import cuweave
        except Exception as second:  # noqa: BLE001
            _give_up(f"cannot import cuweave (installed: {first}; from {source_tree}: {second})")
    backend = cuweave.backend()
    if backend != "cuda" or not cuweave.is_available() or cuweave.device_count() < 1:
        reason = (cuweave.unavailable_reason()
                  or f"backend is {backend!r}, device_count() is {cuweave.device_count()}")
        _give_up(f"cuweave has no usable GPU: {reason}")
    set_loaded("cw", cuweave)


def _give_up(message: str) -> None:
    print(f"benchmarks: {message}", file=sys.stderr)
    sys.exit(2)


def _load_torch():
    import torch as module

    if not module.cuda.is_available():
        return module, "torch.cuda.is_available() is False"
    return module, ""


def _load_cupy():
    import cupy as module

    try:
        count = module.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 -- CUDARuntimeError without a driver
        return module, f"cupy sees no CUDA device: {exc}"
    return module, "" if count > 0 else "cupy sees no CUDA device"


def load_peers(versions: dict[str, str]) -> dict[str, str]:
    """Import the peers that can run; returns {peer: why it is skipped}. Fills versions as a side effect."""
    skipped = {}
    for name, loader in (("torch", _load_torch), ("cupy", _load_cupy)):
        try:
            module, reason = loader()
        except Exception as exc:  # noqa: BLE001 -- a broken install should skip the column, not the run
            skipped[name] = f"import {name} failed: {type(exc).__name__}: {exc}"
            continue
        versions[name] = getattr(module, "__version__", "unknown")
        if reason:
            skipped[name] = reason
        else:
            set_loaded(name, module)
    return skipped


def synchronize(lib: str) -> None:
    """Wait for all work of this library on the device, so one measurement does not run into the next."""
    if lib == "cuweave":
        cw.synchronize()
    elif lib == "torch":
        torch.cuda.synchronize()
    elif lib == "cupy":
        cupy.cuda.Device().synchronize()


def add_run_arguments(parser, reps: int) -> None:
    """--reps, --quick (small sizes and few repetitions, for a smoke test) and --json, as the benchmarks of a run of
    their own take them."""
    parser.add_argument("--reps", type=int, default=reps)
    parser.add_argument("--quick", action="store_true", help="small sizes and few repetitions (smoke test)")
    parser.add_argument("--json", help="write the figures here")


def gpu_machine_info(module) -> dict | None:
    """machine_info() for a program that imported cuweave itself (`module`); None on the simulator."""
    if module.backend() != "cuda":
        return None
    set_loaded("cw", module)
    return machine_info({})


def machine_info(versions: dict[str, str]) -> dict:
    props = cw.Device(0).properties
    return {
        "gpu": props.name,
        "compute_capability": list(getattr(props, "compute_capability", ())),
        "multiprocessor_count": getattr(props, "multiprocessor_count", None),
        "total_memory": getattr(props, "total_memory", None),
        "driver_version": "%d.%d" % tuple(cw.driver_version()),
        "runtime_version": "%d.%d" % tuple(cw.runtime_version()),
        "cuweave": getattr(cw, "__version__", "unknown"),
        "numpy": np.__version__,
        **versions,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": platform.node(),
        "time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }

