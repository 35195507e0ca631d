"""``python -m cuweave``: what cuweave found on this machine, and a short self-check."""

from __future__ import annotations

import sys
import warnings

import numpy as np

import cuweave as cw


def describe() -> None:
    print(f"cuweave {cw.__version__}  backend: {cw.backend()}")
    print(f"runtime (linked): CUDA {'.'.join(map(str, cw.runtime_version()))}")
    driver = cw.driver_version()
    print(f"driver: {'none found' if driver == (0, 0) else 'CUDA ' + '.'.join(map(str, driver))}")
    if not cw.is_available():
        print(f"no CUDA GPU: {cw.unavailable_reason()}")
    if cw.backend() == "sim":
        mode = "concurrent" if cw.sim.seed() is None else f"exploring schedules, seed {cw.sim.seed()}"
        print(f"simulator ({mode}): CUDA's ordering rules on host threads; timings are host timings, "
              "not GPU timings (CUWEAVE_BACKEND=cuda forces the GPU backend)")
    count = cw.device_count()
    print(f"devices: {count}")
    if count == 0:
        print("GPU operations raise cuweave.DeviceUnavailableError here.")
        return
    for ordinal in range(count):
        p = cw.Device(ordinal).properties
        print(
            f"  [{ordinal}] {p.name}  sm_{p.compute_capability[0]}{p.compute_capability[1]}  "
            f"{p.multiprocessor_count} SMs  {p.total_memory / 2**30:.1f} GiB  "
            f"copy engines: {p.async_engine_count}  stream priorities: {p.priority_range[0]} (low) .. "
            f"{p.priority_range[1]} (high)  bus {p.pci_bus_id}"
        )


def self_check() -> bool:
    """Round-trips random bytes through every copy path and times a GPU wait; returns success."""
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=(1 << 20) + 7, dtype=np.uint8)
    stream = cw.Stream()
    with stream:
        device = cw.to_device(data)
        pinned = cw.pinned_empty(data.shape, data.dtype)
        cw.copy_async(pinned, device).wait()
        other = cw.empty(data.shape, data.dtype)
        cw.copy_async(other, device)
        back = other.to_numpy()
        with cw.timer() as t:
            cw.ops.spin(0.01)
        with warnings.catch_warnings():  # the simulator's timing caveat is printed above
            warnings.simplefilter("ignore", cw.SimulatorTimingWarning)
            spin_ms = t.ms
    ok = bool(np.array_equal(pinned, data) and np.array_equal(back, data))
    print(f"self-check: copies {'ok' if ok else 'FAILED'}; a 10 ms spin kernel measured {spin_ms:.2f} ms")
    return ok


def main() -> int:
    describe()
    if cw.device_count() > 0 and not self_check():
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
