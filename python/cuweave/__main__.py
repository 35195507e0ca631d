"""``python -m cuweave``: what cuweave found on this machine, and a short self-check.

``python -m cuweave tour [--out DIR] [--quick] [--only NAME ...]``: the classic stream scenarios, measured
on the active backend, with a timeline picture per scenario and a Perfetto trace (see cuweave.tour).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import warnings
from collections.abc import Sequence

import numpy as np

import cuweave as cw
from cuweave.tour import SCENARIOS, run


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cuweave",
        description="Without a command: what cuweave found on this machine (backend, GPU, driver, runtime) "
                    "and a short self-check.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    tour_command = commands.add_parser(
        "tour", help="run the classic stream scenarios and draw their timelines",
        description="Runs the classic stream scenarios (about 30 s) on the active backend, prints what each "
                    "measured, and writes a timeline picture per scenario (PNG, with matplotlib) and one "
                    "Perfetto trace of the whole tour.")
    tour_command.add_argument("--out", type=pathlib.Path, default=pathlib.Path("cuweave-tour"), metavar="DIR",
                              help="where the pictures and tour.json go (created if missing; "
                                   "default: ./cuweave-tour)")
    tour_command.add_argument("--quick", action="store_true",
                              help="small sizes and short kernels: a few seconds in all")
    tour_command.add_argument("--only", nargs="+", action="extend", choices=list(SCENARIOS), metavar="NAME",
                              help=f"run only these scenarios: {', '.join(SCENARIOS)}")
    return parser


def tour(out: pathlib.Path, quick: bool, only: Sequence[str] | None) -> int:
    """Runs the tour (cuweave.tour.run); fails when there is no device or a scenario's result check failed."""
    if cw.device_count() == 0:
        describe()
        return 1
    results = run(out, quick=quick, only=only)
    failed = [result.name for result in results if not result.ok]
    if failed:
        print(f"FAILED: wrong results in {', '.join(failed)}")
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "tour":
        return tour(args.out, args.quick, args.only)
    describe()
    if cw.device_count() > 0 and not self_check():
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
