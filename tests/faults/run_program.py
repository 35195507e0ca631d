"""Runs one fault program (programs.py) under one seeded fault schedule on the simulator, and checks what must
hold whatever fails (Note [Injected faults] in csrc/sim/fault_plan.hpp):
  * the program finishes with right results, or raises a cuweave error that names the failed call
    (ContextLostError after a sticky fault): never another exception, never wrong results in silence;
  * once its objects are dropped, every device allocation, pinned block and stream lease it made is released,
    and every thread it started has stopped. After a lost context, memory is not counted: CUDA frees nothing
    then (every call fails), and the process must be restarted; leases and threads still are.
A fault-free run first makes what cuweave makes once per process (pools, helper threads), so that what is left
after the faulted run is measured against it. Prints one JSON line; exits 1 on a violation.

    python tests/faults/run_program.py PROGRAM SEED [RATE]
"""

from __future__ import annotations

import faulthandler
import gc
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cuweave as cw  # noqa: E402
from programs import PROGRAMS  # noqa: E402


def settle() -> None:
    """Drops what can be dropped and lets queued work finish on every device (a free queued on another device's
    stream is still pending after the current device's work), so that what is still held is what leaked."""
    try:
        devices = cw.device_count()
    except cw.CuweaveError:
        devices = 1
    for _ in range(2):
        gc.collect()
        for device in range(devices):
            try:
                cw.Device(device).synchronize()
            except cw.CuweaveError:
                pass  # a lost context, or a failure the program already met: only settling here
        try:
            cw.pinned_pool().empty_cache()
        except cw.CuweaveError:
            pass


def held() -> dict:
    return {"memory": cw.sim.memory_in_use(), "threads": sorted(t.name for t in threading.enumerate()),
            "native_threads": len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 0}


def held_once_threads_ended(before: dict, within_s: float = 2.0) -> dict:
    """held(), once the native threads are no more than before or `within_s` passed: a thread joined from Python
    (a prefetch iterator's producer) is still listed by the kernel for a moment after join() returns, while it
    exits. A thread that stays is a leak."""
    deadline = time.monotonic() + within_s
    now = held()
    while now["native_threads"] > before["native_threads"] and time.monotonic() < deadline:
        time.sleep(0.01)
        now = held()
    return now


def check_error(error: BaseException, faults: list) -> list[str]:
    if isinstance(error, AssertionError):
        return [f"wrong results without an error: {error}"]
    if not isinstance(error, cw.CuweaveError):
        return [f"raised {type(error).__name__}, not a cuweave error: {error}"]
    if not faults:
        return [f"raised {type(error).__name__} although no fault was injected: {error}"]
    cause = error.__cause__ if isinstance(error, cw.CallbackError) and error.__cause__ is not None else error
    call = getattr(cause, "call", "")
    if isinstance(cause, cw.CudaError) and (not call or call not in str(cause)):
        return [f"{type(cause).__name__} does not name the failed call: {cause}"]
    return []


def leaks(before: dict, after: dict, keep: dict, context_lost: bool) -> list[str]:
    found = []
    for kind in () if context_lost else ("device", "pinned", "registered"):
        extra = after["memory"][kind] - before["memory"][kind]
        if extra > 0:
            found.append(f"{extra} {kind} allocation(s) still held once the program's objects were dropped")
    pool = keep.get("stream_pool")
    if pool is not None and pool.reserved_count != 0:
        found.append(f"{pool.reserved_count} stream lease(s) still out")
    started = sorted(set(after["threads"]) - set(before["threads"]))
    if started:
        found.append(f"threads still running: {started}")
    if after["native_threads"] > before["native_threads"]:
        found.append(f"{after['native_threads'] - before['native_threads']} native thread(s) still running")
    return found


def main() -> int:
    name, seed = sys.argv[1], int(sys.argv[2])
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else cw.sim.DEFAULT_FAULT_RATE
    if cw.backend() != "sim":
        print(json.dumps({"program": name, "seed": seed, "violations": ["needs the simulator (CUWEAVE_BACKEND=sim)"]}))
        return 1
    faulthandler.enable()  # a crash prints where Python was, for the sweep's report
    faulthandler.dump_traceback_later(float(os.environ.get("CUWEAVE_FAULT_HANG_S", "50")), exit=True)
    program = PROGRAMS[name]
    program({})
    settle()
    before = held()
    keep: dict = {}
    cw.sim.inject_faults(seed, rate)
    error = None
    try:
        program(keep)
    except BaseException as raised:  # noqa: BLE001 - judged below, whatever it is
        error = raised
    faults = cw.sim.injected_faults()
    cw.sim.inject_faults(None)
    violations = check_error(error, faults) if error is not None else []
    outcome = "completed" if error is None else type(error).__name__
    message = "" if error is None else str(error).splitlines()[0][:300]
    if error is not None:
        error.__traceback__ = None  # its frames hold the program's arrays
    error = None
    settle()
    context_lost = any(kind == "sticky_fault" for kind, _ in faults)  # seen by the program or not
    violations += leaks(before, held_once_threads_ended(before), keep, context_lost)
    keep.clear()
    print(json.dumps({"program": name, "seed": seed, "rate": rate, "outcome": outcome, "message": message,
                      "faults": faults, "violations": violations}))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
