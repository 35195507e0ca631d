"""``python -m cuweave``: what cuweave found on this machine, and a short self-check.

``python -m cuweave tour [--out DIR] [--quick] [--only NAME ...]``: the classic stream scenarios, measured
on the active backend, with a timeline picture per scenario and a Perfetto trace (see cuweave.tour).

``python -m cuweave trace [--out DIR] [--all-threads] [--limit N [--keep first|last]] [-m] TARGET [ARGS...]``:
runs a program (a script, or a module with -m) as Python would, with a trace open (of at most N events); at its
end, however it ends, writes the Perfetto JSON, a timeline picture and the summary (see cuweave._tools).

``python -m cuweave sanitize [--warn] [-m] TARGET [ARGS...]``: runs it with the stream-race sanitizer on.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import warnings
from collections.abc import Sequence

import numpy as np

import cuweave as cw
from cuweave import _tools
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
        description="Runs the classic stream scenarios (under 10 s; it says how long) on the active backend, "
                    "prints what each measured, and writes DIR/index.html (each scenario's figures, finding and "
                    "timeline on one page), a timeline per scenario (SVG; PNG too with matplotlib) and one "
                    "Perfetto trace of the whole tour.")
    tour_command.add_argument("--out", type=pathlib.Path, default=pathlib.Path("cuweave-tour"), metavar="DIR",
                              help="where the pictures and tour.json go (created if missing; "
                                   "default: ./cuweave-tour)")
    tour_command.add_argument("--quick", action="store_true",
                              help="small sizes and short kernels: a few seconds in all")
    tour_command.add_argument("--only", nargs="+", action="extend", choices=list(SCENARIOS), metavar="NAME",
                              help=f"run only these scenarios: {', '.join(SCENARIOS)}")
    trace_command = commands.add_parser(
        "trace", help="run a program with a trace open; write its timeline",
        description="Runs TARGET as `python TARGET ARGS...` would (the same sys.argv, __main__ and exit code), "
                    "with cuweave.trace() open, and at its end (an exception or Ctrl-C included) writes DIR/trace.json "
                    "(Perfetto: ui.perfetto.dev), DIR/timeline.svg (the busiest part of a long trace; "
                    "timeline.png too with matplotlib), DIR/summary.txt and DIR/index.html (both on one page).")
    trace_command.add_argument("--out", type=pathlib.Path, default=pathlib.Path("cuweave-trace"), metavar="DIR",
                               help="where the files go (created if missing; default: ./cuweave-trace)")
    trace_command.add_argument("--all-threads", action="store_true",
                               help="record work issued from every thread, not only the main one")
    trace_command.add_argument("--limit", type=_positive, metavar="N",
                               help="keep at most N events (each takes about 150 bytes while the program runs and "
                                    "about 2 KB while the files are written: 1.8 GB at the peak for 1M events; default: keep them all)")
    trace_command.add_argument("--keep", choices=("first", "last"), default="last",
                               help="with --limit: keep the first or the last N events (default: last)")
    _add_target(trace_command)
    sanitize_command = commands.add_parser(
        "sanitize", help="run a program with the stream-race sanitizer on",
        description="Runs TARGET as `python TARGET ARGS...` would, with cuweave.sanitize() on: the first race "
                    "raises cuweave.RaceError, naming both operations and both call sites, and the exit code is "
                    "1. With --warn every race is reported once per pair of call sites and the run goes on; the "
                    "count is printed at the end, and the exit code is 1 if there was any. PyTorch's operators "
                    "and CuPy's generated kernels are checked too, in a program that never imports cuweave.")
    sanitize_command.add_argument("--warn", action="store_true", help="report every race and go on")
    _add_target(sanitize_command)
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of events, not {text!r}")
    return value


def _add_target(command: argparse.ArgumentParser) -> None:
    command.add_argument("-m", dest="module", action="store_true",
                         help="TARGET is a module, run as `python -m TARGET`")
    command.add_argument("target", nargs=argparse.REMAINDER, metavar="TARGET [ARGS...]",
                         help="the script (or module) and its arguments")


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
    if args.command in ("trace", "sanitize") and not args.target:
        _parser().parse_args([args.command, "--help"])
    if args.command == "trace":
        return _tools.trace_program(args.target, module=args.module, out=args.out, all_threads=args.all_threads,
                                    limit=args.limit, keep=args.keep)
    if args.command == "sanitize":
        return _tools.sanitize_program(args.target, module=args.module, warn=args.warn)
    describe()
    if cw.device_count() > 0 and not self_check():
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
