#!/usr/bin/env python3
"""What cw.weave() costs and gains (Note [Weaving]), measured in one run, each row's sides taking turns
within every repetition (benchmarks/in_turn.py):

- per operation: host µs of an operation issued plainly, inside a weave, under the stream-race sanitizer, and
  under the sanitizer's core alone (without the PyTorch and CuPy hooks cw.sanitize() attaches where those are
  imported, to tell the core's cost from theirs): a built-in op chained in place (stays on one stream), four
  independent chains issued in turn (each keeps its stream), a chain making a new array per step (its stream
  seals each step as it goes on), a compiled kernel (2 arrays, 2 scalars) chained in place, and a PyTorch
  operator where PyTorch is installed;
- a block's own cost: an empty weave of 8 streams entered and left, beside the fork and join a hand-written DAG
  on 8 streams queues (host µs);
- a wide DAG: 8 independent chains of 20 spin kernels (1 block, 20 µs each), built-in and compiled, woven,
  written by hand with 8 streams and events, and on one stream: wall ms including the final synchronize; and
  with CuPy installed, the same DAG of CuPy kernels (an ElementwiseKernel), woven, by hand on 8 CuPy streams, and
  on one CuPy stream;
- a long chain of spins with short independent spins branching off each step, more of them than streams: woven
  (least recently used placement), by hand with the chain alone on its stream (placement by known costs), and on
  one stream;
- the sources' fork/join DAG (README) captured under a weave and by hand: wall µs per replay (both
  captured anew each repetition, in alternating order: see dag_replays).

    python benchmarks/weave.py [--json PATH] [--quick] [--baseline-site DIR [--rounds N]]

With --baseline-site (an earlier cuweave installed with ``pip install --target DIR``), the script runs itself
once per build and round in fresh child processes, the two builds taking turns (benchmarks/side_runs.py), and
prints each row of both builds side by side: medians over the rounds. A second table holds the targets' rows for
both builds (per operation, woven and sanitized over plain: at most 1 µs or 0.15x plain for the weave, 0.5 µs for
the sanitizer; the compiled wide DAG's woven speed against the hand-written streams: at least 0.95), each the median
of the figures the rounds measured, and whether the build measured now meets it. A cost over plain is the median of
the differences between repetitions taken in turn within one process (each mode's figure and plain's seconds apart).

With CUWEAVE_BACKEND=sim it runs on the simulator (a smoke test of the script; its figures are not GPU's, and
the compiled-kernel and PyTorch rows need a GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import libraries
import side_runs
import timing
from in_turn import InTurnSetup, in_turn, in_turn_samples

CHAINS, STEPS, SPIN_S = 8, 20, 20e-6
LONG_STEPS, BRANCHES, SHORT_S, CRITICAL_STREAMS = 30, 6, 5e-6, 4
REPLAYS = 2_000
MODES = ("plain", "woven", "sanitized", "sanitizer_core")

# A compiled kernel as users write one: two arrays, two scalars.
AXPBY_SOURCE = r"""
extern "C" __global__ void axpby(float* y, const float* x, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = a * x[i] + b * y[i];
}
"""
# Spins for `ns` nanoseconds of the GPU's global timer on one block, then writes its start time to `slot`
# (what cw.ops.spin does, compiled).
SPIN_SOURCE = r"""
extern "C" __global__ void spin(unsigned long long* slot, long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while ((long long)(now - start) < ns);
  if (threadIdx.x == 0) *slot = start;
}
"""


def per_call_us(issue: Callable[[], object], calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        issue()
    return (time.perf_counter_ns() - start) / calls / 1e3


@contextlib.contextmanager
def sanitizer_core_only(cw):
    """The sanitizer as cw.sanitize() turns it on, less the PyTorch and CuPy hooks it attaches where those are
    imported: CuPy's turns on CUPTI callbacks for other libraries' launches (cuweave's own go through a launch call it
    leaves off)."""
    core = cw._core
    sanitizer = getattr(core, "sanitizer", None)  # a build from before the core's submodules: sanitizer_enable
    enable = sanitizer.enable if sanitizer is not None else core.sanitizer_enable
    disable = sanitizer.disable if sanitizer is not None else core.sanitizer_disable
    enable("raise")
    try:
        yield
    finally:
        disable()


def in_mode(cw, mode: str):
    """The context an operation is issued in: nothing, a weave of 4 streams, the sanitizer, or its core alone."""
    if mode == "woven":
        return cw.weave(streams=4)
    if mode == "sanitized":
        return cw.sanitize()
    if mode == "sanitizer_core":
        return sanitizer_core_only(cw)
    return contextlib.nullcontext()


def overhead_setups(cw, calls: int) -> dict[str, dict[str, InTurnSetup]]:
    """Per row: one setup per mode, whose measure is host µs per operation."""
    kinds = ["chain", "four_chains", "new_arrays"]
    gpu = cw.backend() != "sim"
    if gpu:
        kinds.append("compiled")
        if "torch" not in libraries.load_peers({}):
            kinds.append("torch_add")
            # PyTorch's operators are placed and checked by the C++ hook once it is built, which its first use
            # starts in the background: the row measures the hook a program has after that.
            from cuweave import _torch_native

            if _torch_native.wait(timeout=600) is None:
                print(f"PyTorch rows: the C++ hook is not built ({_torch_native.failure()}): they measure the Python "
                      "dispatch mode")
            else:
                print("PyTorch rows: woven and sanitized through the C++ hook in PyTorch's dispatcher")

    def measure(kind: str, mode: str) -> Callable[[], float]:
        arrays = [cw.zeros(256, np.float32) for _ in range(4)]
        cw.synchronize()
        if kind == "chain":
            issue = lambda: cw.ops.add(arrays[0], 1.0, out=arrays[0])  # noqa: E731
        elif kind == "four_chains":
            turn = itertools.count()
            issue = lambda: cw.ops.scale(a := arrays[next(turn) & 3], 1.0, out=a)  # noqa: E731
        elif kind == "compiled":
            axpby = cw.compile(AXPBY_SOURCE, "axpby")
            args = (arrays[0], arrays[1], np.float32(1.0), np.float32(0.5))
            issue = lambda: axpby(1, 256, args)  # noqa: E731
        elif kind == "torch_add":
            torch = libraries.loaded()["torch"]
            tensor = torch.zeros(256, device="cuda")
            torch.cuda.synchronize()
            issue = lambda: tensor.add_(1.0)  # noqa: E731
        else:  # new_arrays: a chain whose every step makes its result
            state = {"x": arrays[0]}

            def issue():
                state["x"] = cw.ops.add(state["x"], 1.0)

        def rep() -> float:
            with in_mode(cw, mode):
                figure = per_call_us(issue, calls)
            cw.synchronize()
            return figure

        return rep

    return {kind: {mode: lambda k=kind, m=mode: measure(k, m) for mode in MODES} for kind in kinds}


def with_costs_over_plain(samples: dict[str, list[float] | Exception]) -> dict[str, float | Exception]:
    """Each mode's median, and each mode's cost over plain as `MODE_over_plain`: the median of the differences of
    the repetitions measured in turn (each taken within one repetition, seconds apart, so that the machine's drift
    over a row's repetitions stays out of it, as it does not from a difference of two medians)."""
    result: dict[str, float | Exception] = {
        mode: values if isinstance(values, Exception) else statistics.median(values) for mode, values in samples.items()}
    plain = samples.get("plain")
    for mode, values in samples.items():
        if mode != "plain" and isinstance(values, list) and isinstance(plain, list):
            result[f"{mode}_over_plain"] = statistics.median(m - p for m, p in zip(values, plain))
    return result


def wall_ms(stream, issue: Callable[[], None]) -> float:
    """Wall ms of issue() with `stream` (cuweave's or CuPy's) current, until `stream` has done its work."""
    with stream:
        start = time.perf_counter_ns()
        issue()
        stream.synchronize()
        return (time.perf_counter_ns() - start) / 1e6


def each_step(spin: Callable[..., None], slots: list) -> None:
    """The wide DAG's spins in issue order: each step, one spin per chain (writing the chain's slot)."""
    for _ in range(STEPS):
        for slot in slots:
            spin(slot)


def wide_dag_by_hand(spin: Callable[..., None], times: list, main, others: list) -> None:
    """Queues the wide DAG by hand: chain i on stream i (`main` first), forked from and joined back to `main`."""
    chains = [main, *others]
    forked = main.record()
    for s in others:
        s.wait(forked)
    for _ in range(STEPS):
        for chain in range(CHAINS):
            spin(times[chain], stream=chains[chain])
    for s in others:
        main.wait(s.record())


def wide_dag_setups(cw, compiled: bool) -> dict[str, InTurnSetup]:
    """Wall ms of the 8 x 20 spins (cw.ops.spin, or a compiled spin kernel): woven, by hand, on one stream. Each
    runs with the same non-blocking stream current (a weave's first stream is the current one), and uses it and
    7 more."""
    times = [cw.zeros(1, np.uint64) for _ in range(CHAINS)]
    main = cw.Stream()
    others = [cw.Stream() for _ in range(CHAINS - 1)]
    if compiled:
        kernel = cw.compile(SPIN_SOURCE, "spin")
        ns = int(SPIN_S * 1e9)

        def spin(start_times, stream=None):
            kernel(1, 32, (start_times, ns), stream=stream)
    else:

        def spin(start_times, stream=None):
            cw.ops.spin(SPIN_S, start_times=start_times, stream=stream)

    cw.synchronize()

    def woven() -> float:
        def issue() -> None:
            with cw.weave(streams=CHAINS):
                each_step(spin, times)  # each step writes its chain's slot
        return wall_ms(main, issue)

    def by_hand() -> float:
        return wall_ms(main, lambda: wide_dag_by_hand(spin, times, main, others))

    def one_stream() -> float:
        return wall_ms(main, lambda: each_step(spin, times))

    return {"woven": lambda: woven, "by_hand": lambda: by_hand, "one_stream": lambda: one_stream}


# CuPy's spin: one element, one thread, `ns` nanoseconds of the GPU's global timer, then y += 1 (read by the
# hooks from CuPy's source like any kernel CuPy generates, so a weave places it).
CUPY_SPIN_OPERATION = r"""
unsigned long long start, now;
asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while ((long long)(now - start) < ns);
y = y + 1.0f;
"""


def cupy_dag_setups(cw, cupy) -> dict[str, InTurnSetup]:
    """Wall ms of the wide DAG's 8 x 20 spins as CuPy kernels: woven (CuPy on one stream of its own, the weave
    moving each kernel), by hand on 8 CuPy streams, and on one CuPy stream."""
    spin = cupy.ElementwiseKernel("int64 ns", "float32 y", CUPY_SPIN_OPERATION, "cuweave_bench_spin")
    ns = int(SPIN_S * 1e9)
    slots = [cupy.zeros(1, dtype=np.float32) for _ in range(CHAINS)]
    own = cupy.cuda.Stream(non_blocking=True)  # the legacy default stream would be ordered with every other
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(CHAINS)]
    main = cw.Stream()
    with own:
        spin(ns, slots[0])  # compiled before the timing
    cupy.cuda.Device().synchronize()

    def woven() -> float:
        def issue() -> None:
            with main, cw.weave(streams=CHAINS):
                each_step(lambda slot: spin(ns, slot), slots)
        return wall_ms(own, issue)  # CuPy's stream follows every kernel moved off it

    def by_hand() -> float:
        def issue() -> None:
            forked = own.record()
            for stream in streams:
                stream.wait_event(forked)
            for _ in range(STEPS):
                for slot, stream in zip(slots, streams):
                    with stream:
                        spin(ns, slot)
            for stream in streams:
                own.wait_event(stream.record())
        return wall_ms(own, issue)

    def one_stream() -> float:
        return wall_ms(own, lambda: each_step(lambda slot: spin(ns, slot), slots))

    return {"woven": lambda: woven, "by_hand": lambda: by_hand, "one_stream": lambda: one_stream}


def block_setups(cw, calls: int) -> dict[str, InTurnSetup]:
    """Host µs of a block's own cost, with the wide DAG's 8 streams: an empty weave entered and left, and the fork
    and join a hand-written DAG on 8 streams queues (a record, 7 waits; 7 records and waits back)."""
    main = cw.Stream()
    others = [cw.Stream() for _ in range(CHAINS - 1)]

    def empty_weave() -> None:
        with cw.weave(streams=CHAINS):
            pass

    def fork_join() -> None:
        forked = main.record()
        for s in others:
            s.wait(forked)
        for s in others:
            main.wait(s.record())

    def measured(issue: Callable[[], None]) -> Callable[[], float]:
        def rep() -> float:
            with main:
                figure = per_call_us(issue, calls // 10)
            main.synchronize()
            return figure

        return rep

    return {"empty_weave": lambda: measured(empty_weave), "fork_join": lambda: measured(fork_join)}


def critical_path_setups(cw) -> dict[str, InTurnSetup]:
    """Wall ms of one long chain (LONG_STEPS spins of SPIN_S) with BRANCHES short independent spins (SHORT_S) issued
    after each of its steps, on CRITICAL_STREAMS streams: woven (the least recently used stream takes each branch,
    so with more branches than other streams some land on the chain's stream and delay it), by hand with the chain
    alone on its stream and the branches round-robin on the others (what placement by known costs would do), on
    one stream, woven with the chain named on a stream of its own (stream=), and replayed as a cw.woven graph.
    Every spin writes a slot of its own, so only the chain orders anything."""
    times = cw.zeros(1 + LONG_STEPS * BRANCHES, np.uint64)
    main = cw.Stream()
    others = [cw.Stream() for _ in range(CRITICAL_STREAMS - 1)]
    cw.synchronize()

    def issue(chain_stream=None, branch_streams=None) -> None:
        turn = itertools.count()
        for step in range(LONG_STEPS):
            cw.ops.spin(SPIN_S, start_times=times, slot=0, stream=chain_stream)
            for branch in range(BRANCHES):
                stream = branch_streams[next(turn) % len(branch_streams)] if branch_streams else None
                cw.ops.spin(SHORT_S, start_times=times, slot=1 + step * BRANCHES + branch, stream=stream)

    def timed(body) -> float:
        with main:
            start = time.perf_counter_ns()
            body()
            main.synchronize()
            return (time.perf_counter_ns() - start) / 1e6

    def woven_body() -> None:
        with cw.weave(streams=CRITICAL_STREAMS):
            issue()

    chain_stream = cw.Stream()

    def woven_chain_given_body() -> None:  # the chain named with stream=: the weave places nothing else there
        with cw.weave(streams=CRITICAL_STREAMS):
            issue(chain_stream)

    def by_hand_body() -> None:
        forked = main.record()
        for s in others:
            s.wait(forked)
        issue(main, others)
        for s in others:
            main.wait(s.record())

    setups = {"woven": lambda: lambda: timed(woven_body),
              "woven_chain_given": lambda: lambda: timed(woven_chain_given_body),
              "critical_path_first": lambda: lambda: timed(by_hand_body),
              "one_stream": lambda: lambda: timed(issue)}
    if not hasattr(cw, "woven"):  # an earlier build measured beside this one (--baseline-site) may lack it
        return setups
    # The same DAG as a cached woven graph: the capture keeps the weave's placement as edges (a branch on the
    # chain's stream precedes the chain's next step), so this shows what a replay does with that placement.
    step = cw.woven(lambda slots: issue(), streams=CRITICAL_STREAMS)

    def woven_graph_setup():
        with main:
            step(times)  # the capture, outside the timing
        main.synchronize()
        return lambda: timed(lambda: step(times))

    setups["woven_graph"] = woven_graph_setup
    return setups


def dag_replays(cw, reps: int) -> dict[str, float]:
    """Wall µs per replay of the sources' DAG captured woven and by hand (README's fork/join), medians over
    `reps` repetitions. Of two equal graphs the one instantiated first replays faster (4.4 vs 6.8 µs on an
    H200, .gpu probes of 2026-11-26), so each repetition captures both anew, in an order that alternates."""
    s, a, b = cw.Stream(), cw.Stream(), cw.Stream()
    x = cw.to_device(np.arange(4096, dtype=np.float32), stream=s)
    p, q, r = (cw.empty(4096, np.float32, stream=s) for _ in range(3))
    s.synchronize()

    def by_hand():
        with s, cw.capture(s) as cap:
            forked = s.record()
            a.wait(forked)
            b.wait(forked)
            cw.ops.scale(x, 2.0, out=p, stream=a)
            cw.ops.add(x, 1.0, out=q, stream=b)
            s.wait(a.record())
            s.wait(b.record())
            cw.ops.add(p, q, out=r)
        return cap.graph

    def woven():
        with s, cw.capture(s) as cap, cw.weave():
            cw.ops.scale(x, 2.0, out=p)
            cw.ops.add(x, 1.0, out=q)
            cw.ops.add(p, q, out=r)
        return cap.graph

    def per_replay(graph) -> float:
        graph.upload(s)
        graph.replay(s)
        s.synchronize()
        start = time.perf_counter_ns()
        for _ in range(REPLAYS):
            graph.replay(s)
        s.synchronize()
        return (time.perf_counter_ns() - start) / REPLAYS / 1e3

    figures: dict[str, list[float]] = {"woven": [], "by_hand": []}
    makers = {"woven": woven, "by_hand": by_hand}
    for rep in range(reps + 1):
        order = ["woven", "by_hand"] if rep % 2 else ["by_hand", "woven"]
        graphs = {kind: makers[kind]() for kind in order}
        assert len(graphs["woven"]) == len(graphs["by_hand"])
        for kind in order:
            figure = per_replay(graphs[kind])
            if rep > 0:
                figures[kind].append(figure)
    return {kind: statistics.median(values) for kind, values in figures.items()}


def measure(args: argparse.Namespace) -> dict:
    """Every row of one build, printed as measured; the figures by row."""
    if os.environ.get("CUWEAVE_BACKEND") == "sim":  # a smoke run of the script: host times of the simulator
        import cuweave

        libraries.set_loaded("cw", cuweave)
    else:
        libraries.load_cuweave()
    cw = libraries.cw
    reps = timing.QUICK_REPS if args.quick else timing.REPS
    calls = timing.QUICK_N_CALLS if args.quick else timing.N_CALLS
    figures: dict[str, dict[str, float]] = {}
    print(f"cuweave {cw.__version__} ({cw.__file__}) on {cw.Device(0).properties.name} ({cw.backend()}); medians of "
          f"{reps} repetitions, sides in turn")
    print("\nper operation, host µs (256 floats)                   plain    woven  sanitized  core only   woven over"
          "  sanitized over  core only over")
    for kind, setups in overhead_setups(cw, calls).items():
        result = with_costs_over_plain(in_turn_samples(setups, reps))
        figures[f"op_{kind}"] = result
        print(f"  {kind:48} {result['plain']:7.3f}  {result['woven']:7.3f}  {result['sanitized']:9.3f}  "
              f"{result['sanitizer_core']:9.3f}   {result['woven_over_plain']:+10.3f}  "
              f"{result['sanitized_over_plain']:+14.3f}  {result['sanitizer_core_over_plain']:+14.3f}")
    hooked = [name for name in ("torch", "cupy") if name in sys.modules]
    print("  core only: the sanitizer without the hooks cw.sanitize() attaches to PyTorch and CuPy; "
          + (f"imported here: {', '.join(hooked)}" if hooked else "neither is imported here, so it should match "
             "sanitized"))
    result = in_turn(block_setups(cw, calls), reps)
    figures["block_us"] = result
    torch_note = "PyTorch imported: its hook attached and detached too" if "torch" in sys.modules else \
        "PyTorch not imported"
    print(f"\na block's own cost, host µs ({torch_note}): an empty weave of {CHAINS} streams "
          f"{result['empty_weave']:.2f}; a fork and join by hand on {CHAINS} streams {result['fork_join']:.2f}")
    for compiled in (False, True) if cw.backend() != "sim" else (False,):
        result = in_turn(wide_dag_setups(cw, compiled), reps)
        name = "compiled" if compiled else "built-in"
        figures["wide_dag_compiled_ms" if compiled else "wide_dag_ms"] = result
        print(f"\nwide DAG ({name} spins): {CHAINS} chains x {STEPS} spins of {SPIN_S * 1e6:.0f} µs, wall ms incl. "
              "synchronize")
        print(f"  woven {result['woven']:.3f}   by hand {result['by_hand']:.3f}   one stream {result['one_stream']:.3f}")
        print(f"  woven speed / by hand: {result['by_hand'] / result['woven']:.3f}   "
              f"woven speed / one stream: {result['one_stream'] / result['woven']:.2f}")
    cupy = libraries.loaded()["cupy"]
    if cupy is not None and cw.backend() != "sim":
        result = in_turn(cupy_dag_setups(cw, cupy), reps)
        figures["wide_dag_cupy_ms"] = result
        print(f"\nwide DAG (CuPy spins, CuPy on a stream of its own): {CHAINS} chains x {STEPS} spins of "
              f"{SPIN_S * 1e6:.0f} µs, wall ms incl. synchronize")
        print(f"  woven {result['woven']:.3f}   by hand on {CHAINS} CuPy streams {result['by_hand']:.3f}   one stream "
              f"{result['one_stream']:.3f}")
        print(f"  woven speed / by hand: {result['by_hand'] / result['woven']:.3f}   "
              f"woven speed / one stream: {result['one_stream'] / result['woven']:.2f}")
    result = in_turn(critical_path_setups(cw), reps)
    figures["critical_path_ms"] = result
    print(f"\none chain of {LONG_STEPS} spins of {SPIN_S * 1e6:.0f} µs, {BRANCHES} spins of {SHORT_S * 1e6:.0f} µs "
          f"branching off each step, {CRITICAL_STREAMS} streams: wall ms incl. synchronize")
    print(f"  woven {result['woven']:.3f}   chain alone on its stream (by hand) {result['critical_path_first']:.3f}   "
          f"one stream {result['one_stream']:.3f}")
    print(f"  woven speed / chain alone on its stream: {result['critical_path_first'] / result['woven']:.3f}")
    print(f"  woven with the chain given its own stream (stream=) {result['woven_chain_given']:.3f}: speed / chain "
          f"alone on its stream {result['critical_path_first'] / result['woven_chain_given']:.3f}")
    if "woven_graph" in result:
        print(f"  replayed as a cached woven graph (cw.woven) {result['woven_graph']:.3f}: speed / chain alone on its "
              f"stream {result['critical_path_first'] / result['woven_graph']:.3f}")
    result = dag_replays(cw, reps if reps % 2 == 0 else reps + 1)  # as many repetitions made first as second
    figures["dag_replay_us"] = result
    print(f"\nsources' DAG as a graph, wall µs per replay: woven {result['woven']:.3f}   by hand {result['by_hand']:.3f}"
          f"   ratio {result['woven'] / result['by_hand']:.3f}")
    return figures


def compare_builds(args: argparse.Namespace) -> dict:
    """Both builds' rows, each build in fresh child processes taking turns for args.rounds rounds."""

    def run_side(side: str) -> dict:
        env = dict(os.environ)
        if side == "previous":
            env["PYTHONPATH"] = os.pathsep.join([args.baseline_site, env.get("PYTHONPATH", "")])
        return side_runs.run_child(__file__, side, args.quick, env)

    rounds = side_runs.rounds_of(("previous", "now"), args.rounds, run_side)

    def median(side: str, row: str, key: str) -> float | None:
        values = [r[row][key] for r in rounds[side] if isinstance(r.get(row, {}).get(key), (int, float))]
        return statistics.median(values) if values else None

    def show(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    rows = sorted({row for side in rounds.values() for result in side for row in result})
    table: dict[str, dict] = {}
    lines = []
    for row in rows:
        keys = sorted({key for side in rounds.values() for result in side for key in result.get(row, {})})
        table[row] = {side: {key: median(side, row, key) for key in keys} for side in ("previous", "now")}
        for key in keys:
            previous, now = table[row]["previous"][key], table[row]["now"][key]
            ratio = now is not None and previous and not key.endswith("_over_plain")  # a ratio of costs misleads
            lines.append([f"{row} {key}", show(previous), show(now), show(now / previous) if ratio else "-"])
    print(f"\nmedians over {max(1, args.rounds)} rounds; previous: the cuweave in {args.baseline_site}")
    side_runs.print_table(["row", "previous", "now", "now/previous"], lines)
    print_targets(rounds)
    return table


def target_rows(result: dict) -> dict[str, tuple[float, float, bool]]:
    """One run's figures against the weave's and the sanitizer's targets: by row, (figure, bound, whether it is a
    floor). Per operation: µs over plain, measured in turn in one process; the weave's bound is 1 µs or 0.15x of
    plain, whichever is larger; the sanitizer's 0.5 µs. The compiled wide DAG: woven speed / by hand, at least 0.95."""
    def measured(figures: dict, key: str) -> bool:
        return isinstance(figures.get(key), (int, float))

    def cost_over_plain(figures: dict, mode: str) -> float:
        # The paired difference where the run took one (with_costs_over_plain), else the difference of the medians.
        paired = figures.get(f"{mode}_over_plain")
        return paired if isinstance(paired, (int, float)) else figures[mode] - figures["plain"]

    rows = {}
    for row, figures in sorted(result.items()):
        if not row.startswith("op_") or not measured(figures, "plain"):
            continue
        plain = figures["plain"]
        if measured(figures, "woven"):
            rows[f"{row} woven over plain"] = (cost_over_plain(figures, "woven"), max(1.0, 0.15 * plain), False)
        if measured(figures, "sanitized"):
            rows[f"{row} sanitized over plain"] = (cost_over_plain(figures, "sanitized"), 0.5, False)
    dag = result.get("wide_dag_compiled_ms", {})
    if measured(dag, "woven") and measured(dag, "by_hand") and dag["woven"] > 0:
        rows["wide_dag_compiled woven speed / by hand"] = (dag["by_hand"] / dag["woven"], 0.95, True)
    return rows


def print_targets(rounds: dict[str, list[dict]]) -> None:
    """The targets' rows for both builds: each the median over rounds of the figure each round measured (a
    difference taken within one process, not between two medians)."""
    per_side = {side: [target_rows(result) for result in results] for side, results in rounds.items()}
    names = sorted({name for rows in per_side.values() for result in rows for name in result})
    lines = []
    for name in names:
        cells = []
        for side in ("previous", "now"):
            values = [rows[name][0] for rows in per_side[side] if name in rows]
            cells.append(statistics.median(values) if values else None)
        # The bound of the build measured now where it has the row (the weave's depends on plain: the median
        # over its rounds, not one round's), else the previous build's.
        side = "now" if any(name in rows for rows in per_side["now"]) else "previous"
        bound = statistics.median(rows[name][1] for rows in per_side[side] if name in rows)
        floor = next(rows[name][2] for rows in per_side[side] if name in rows)
        now = cells[1]
        meets = "-" if now is None else ("yes" if (now >= bound if floor else now <= bound) else "no")
        lines.append([name, *("-" if c is None else f"{c:+.3f}" if not floor else f"{c:.3f}" for c in cells),
                      f"{'>=' if floor else '<='} {bound:.2f}", meets])
    print("\ntargets, medians over rounds (µs over plain per operation; the wide DAG as a ratio)")
    side_runs.print_table(["row", "previous", "now", "target", "now meets"], lines)


def main(argv: list[str] | None = None) -> int:
    parser = side_runs.parser_for(__doc__, ("previous", "now"))
    parser.add_argument("--baseline-site", metavar="DIR", help="an earlier cuweave installed with pip --target")
    args = parser.parse_args(argv)
    figures = compare_builds(args) if args.baseline_site and not args.side else measure(args)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
