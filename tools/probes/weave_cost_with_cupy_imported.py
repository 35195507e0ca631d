"""What does a weave cost with CuPy imported, whose kernels it places (watching launches through CUPTI), against a
process without CuPy? Each variant runs in a process of its own. Host µs per operation of a built-in op chained in
place, of a chain making a new array per step, and of CuPy's add chained in place, each plainly, inside a weave, and
plainly with the launch watch on; the Python callbacks the watch makes per operation inside a weave; and what
entering and leaving a block costs, piece by piece.

Found (one H200, CUDA 13.0), before the fix: the subscription and its callbacks cost each weave 22-28 us (an empty
weave of 8 streams 46.64 us, against 15.30 without CuPy); with the watch on, each built-in op +0.5 us; a CuPy add in
a weave 26.09 us against 11.12 plain. After it (the weave watches once CuPy compiled a kernel cuweave read; a launch
calls into Python only for the weave's placing or the sanitizer; a CArray's span cached): built-in ops woven with CuPy
imported +0.282 us over plain (+0.249 without CuPy), new arrays +0.705 (+0.792); a CuPy add in a weave 15.22 us
against 8.18 plain (the profile: parsing its parameters, placing it, and CuPy's stream following it); an empty weave
once CuPy has such a kernel 35.74 us (8.63 without CuPy): its subscription, left between weaves so that other tools
may subscribe. With CuPy's launches placed in the core without calling into Python: a CuPy add in a weave 10.61 us
against 9.78 plain; built-in ops woven +0.240 (-0.155 without CuPy), new arrays +0.807 (+0.896); an empty weave once
CuPy has such a kernel 38.48 us (14.95 without CuPy; turning the watch on and off alone 25.84).
"""

import subprocess
import sys
from pathlib import Path

VARIANTS = {"no CuPy": "", "CuPy imported": "import cupy"}

CHILD = """
import collections
import statistics
import sys
import numpy as np
import cuweave as cw
from cuweave import _core, _cupy_hooks
from probe_timing import per_call_us

cupy = sys.modules.get("cupy")
a = cw.zeros(256, np.float32)
state = {"x": a}
c = cupy.zeros(256, np.float32) if cupy else None
cw.synchronize()

calls = collections.Counter()
CALLBACKS = ("_wants", "_launched", "_copied", "_ordered")
ORIGINALS = {name: getattr(_cupy_hooks, name) for name in CALLBACKS}


def count_callbacks(on):
    for name, original in ORIGINALS.items():
        def counted(*args, _original=original, _name=name):
            calls[_name] += 1
            return _original(*args)
        setattr(_cupy_hooks, name, counted if on else original)


def chain():
    cw.ops.add(a, 1.0, out=a)


def new_array():
    state["x"] = cw.ops.add(state["x"], 1.0)


def cupy_chain():
    cupy.add(c, 1, out=c)


def woven_us(step, calls=2000, rounds=9):
    figures = []
    for _ in range(rounds):
        with cw.weave():
            figures.append(per_call_us(step, calls, 1))
        cw.synchronize()
    return statistics.median(figures)


def watched_us(step):
    _cupy_hooks.attach()
    try:
        return per_call_us(step, 2000, 9)
    finally:
        _cupy_hooks.detach()
        cw.synchronize()


steps = [("chain", chain), ("new_array", new_array)] + ([("cupy_chain", cupy_chain)] if cupy else [])
for name, step in steps:
    step()
    plain = per_call_us(step, 2000, 9)
    cw.synchronize()
    woven = woven_us(step)
    watched = watched_us(step) if cupy else float("nan")
    calls.clear()
    count_callbacks(True)
    with cw.weave():
        for _ in range(1000):
            step()
    cw.synchronize()
    count_callbacks(False)
    each = ", ".join(f"{k} {v / 1000:.2f}" for k, v in sorted(calls.items())) or "none"
    print(f"  {name:10} plain {plain:7.3f}  woven {woven:7.3f} ({woven - plain:+7.3f})  "
          f"plain, watch on {watched:7.3f} ({watched - plain:+7.3f})  Python callbacks per op in a weave: {each}")


def pair_us(begin, end, calls=300):
    begin(); end()
    return per_call_us(lambda: (begin(), end()), calls, 9)


print(f"  empty weave of 8 streams {per_call_us(lambda: cw.weave(streams=8).__enter__().__exit__(None, None, None), 500, 9):7.2f}")
if cupy:
    print(f"  attach+detach {pair_us(_cupy_hooks.attach, _cupy_hooks.detach):7.2f}")
    print(f"  begin+end placing {pair_us(_cupy_hooks.begin_placing, _cupy_hooks.end_placing):7.2f}")
    w = _cupy_hooks
    print(f"  watch_launches on+off {pair_us(lambda: w._foreign.watch_launches(w._wants, w._launched, w._copied, w._ordered), lambda: w._foreign.watch_launches(None, None)):7.2f}")
    print(f"  report ordering+stop {pair_us(lambda: (w._report_ordering(cupy), w._report_pinned_reuse(cupy)), w._stop_reporting_ordering):7.2f}")
    on = lambda: w._foreign.watch_launches(w._wants, w._launched, w._copied, w._ordered)
    on()
    print(f"  watch_launches again while on (its callbacks enabled again) {per_call_us(on, 300, 9):7.2f}")
    w._foreign.watch_launches(None, None)
    import cProfile, pstats
    profile = cProfile.Profile()
    with cw.weave():
        cupy_chain()
        profile.enable()
        for _ in range(2000):
            cupy_chain()
        profile.disable()
    cw.synchronize()
    pstats.Stats(profile).sort_stats("tottime").print_stats(14)
    print(f"  place_foreign_work on+off {pair_us(lambda: w._foreign.place_foreign_work(True), lambda: w._foreign.place_foreign_work(False)):7.2f}")
"""

for variant, setup in VARIANTS.items():
    print(f"{variant}:", flush=True)
    subprocess.run([sys.executable, "-c", setup + "\n" + CHILD], check=True, cwd=Path(__file__).parent)
