#!/usr/bin/env python3
"""What cw.weave() costs and gains (Note [Weaving]), measured in one run, each row's sides taking turns
within every repetition (benchmarks/in_turn.py):

- per operation: host µs of an operation inside a weave over the same operation issued plainly: a chain
  in place (stays on one stream), four independent chains issued in turn (each keeps its stream), and a
  chain making a new array per step (its stream seals each step as it goes on);
- a wide DAG: 8 independent chains of 20 spin kernels (1 block, 20 µs each) woven, written by hand with 8
  streams and events, and on one stream: wall ms including the final synchronize;
- the sources' fork/join DAG (README) captured under a weave and by hand: wall µs per replay (both
  captured anew each repetition, in alternating order: see dag_replays).

    python benchmarks/weave.py [--json PATH] [--quick]

With CUWEAVE_BACKEND=sim it runs on the simulator (a smoke test of the script; its figures are not GPU's).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import libraries
import timing
from in_turn import InTurnSetup, in_turn

CHAINS, STEPS, SPIN_S = 8, 20, 20e-6
REPLAYS = 2_000


def per_call_us(issue: Callable[[], object], calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        issue()
    return (time.perf_counter_ns() - start) / calls / 1e3


def overhead_setups(cw, calls: int) -> dict[str, dict[str, InTurnSetup]]:
    """Per row: "plain" and "woven", each a setup whose measure is host µs per operation."""

    def measure(kind: str, woven: bool) -> Callable[[], float]:
        arrays = [cw.zeros(256, np.float32) for _ in range(4)]
        cw.synchronize()
        if kind == "chain":
            issue = lambda: cw.ops.add(arrays[0], 1.0, out=arrays[0])  # noqa: E731
        elif kind == "four_chains":
            turn = itertools.count()
            issue = lambda: cw.ops.scale(arrays[next(turn) & 3], 1.0)  # noqa: E731
        else:  # new_arrays: a chain whose every step makes its result
            state = {"x": arrays[0]}

            def issue():
                state["x"] = cw.ops.add(state["x"], 1.0)

        def rep() -> float:
            if not woven:
                figure = per_call_us(issue, calls)
            else:
                with cw.weave(streams=4):
                    figure = per_call_us(issue, calls)
            cw.synchronize()
            return figure

        return rep

    return {kind: {"plain": lambda k=kind: measure(k, False), "woven": lambda k=kind: measure(k, True)}
            for kind in ("chain", "four_chains", "new_arrays")}


def wide_dag_setups(cw) -> dict[str, InTurnSetup]:
    """Wall ms of the 8 x 20 spins: woven, by hand, on one stream. Each runs with the same non-blocking stream
    current (a weave's first stream is the current one), and uses it and 7 more."""
    times = [cw.zeros(1, np.uint64) for _ in range(CHAINS)]
    main = cw.Stream()
    others = [cw.Stream() for _ in range(CHAINS - 1)]
    cw.synchronize()

    def woven() -> float:
        with main:
            start = time.perf_counter_ns()
            with cw.weave(streams=CHAINS):
                for _ in range(STEPS):
                    for chain in range(CHAINS):
                        cw.ops.spin(SPIN_S, start_times=times[chain])  # each step writes its chain's slot
            main.synchronize()
            return (time.perf_counter_ns() - start) / 1e6

    def by_hand() -> float:
        chains = [main, *others]
        with main:
            start = time.perf_counter_ns()
            forked = main.record()
            for s in others:
                s.wait(forked)
            for _ in range(STEPS):
                for chain in range(CHAINS):
                    cw.ops.spin(SPIN_S, start_times=times[chain], stream=chains[chain])
            for s in others:
                main.wait(s.record())
            main.synchronize()
            return (time.perf_counter_ns() - start) / 1e6

    def one_stream() -> float:
        with main:
            start = time.perf_counter_ns()
            for _ in range(STEPS):
                for chain in range(CHAINS):
                    cw.ops.spin(SPIN_S, start_times=times[chain])
            main.synchronize()
            return (time.perf_counter_ns() - start) / 1e6

    return {"woven": lambda: woven, "by_hand": lambda: by_hand, "one_stream": lambda: one_stream}


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--quick", action="store_true", help="a smoke run (few calls), not figures to quote")
    args = parser.parse_args(argv)
    if os.environ.get("CUWEAVE_BACKEND") == "sim":  # a smoke run of the script: host times of the simulator
        import cuweave

        libraries.set_loaded("cw", cuweave)
    else:
        libraries.load_cuweave()
    cw = libraries.cw
    reps = timing.QUICK_REPS if args.quick else timing.REPS
    calls = timing.QUICK_N_CALLS if args.quick else timing.N_CALLS
    figures: dict[str, dict[str, float]] = {}
    print(f"cuweave {cw.__version__} on {cw.Device(0).properties.name} ({cw.backend()}); medians of {reps} "
          "repetitions, sides in turn")
    print("\nper operation, host µs (cw.ops on 256 floats)        plain    woven   over plain")
    for kind, setups in overhead_setups(cw, calls).items():
        result = in_turn(setups, reps)
        figures[f"op_{kind}"] = result
        print(f"  {kind:48} {result['plain']:7.3f}  {result['woven']:7.3f}   {result['woven'] - result['plain']:+.3f}")
    result = in_turn(wide_dag_setups(cw), reps)
    figures["wide_dag_ms"] = result
    print(f"\nwide DAG: {CHAINS} chains x {STEPS} spins of {SPIN_S * 1e6:.0f} µs, wall ms incl. synchronize")
    print(f"  woven {result['woven']:.3f}   by hand {result['by_hand']:.3f}   one stream {result['one_stream']:.3f}")
    print(f"  woven speed / by hand: {result['by_hand'] / result['woven']:.3f}   "
          f"woven speed / one stream: {result['one_stream'] / result['woven']:.2f}")
    result = dag_replays(cw, reps if reps % 2 == 0 else reps + 1)  # as many repetitions made first as second
    figures["dag_replay_us"] = result
    print(f"\nsources' DAG as a graph, wall µs per replay: woven {result['woven']:.3f}   by hand {result['by_hand']:.3f}"
          f"   ratio {result['woven'] / result['by_hand']:.3f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
