#!/usr/bin/env python3
"""A step of 50 operations run many times: woven once and replayed as a cached graph (cw.woven), against the same
step captured by hand once and replayed, the eager weave, plain eager code on one stream, and the equivalent
PyTorch step eager, as a CUDA graph and through torch.compile(mode="reduce-overhead").

The step: CHAINS independent chains of OPS_PER_CHAIN element-wise operations (add 1, then scale by 0.5, in turn) on
arrays of --n floats; each operation makes a new array, and the step returns each chain's last. Figures, per step:
host µs to issue --steps steps, and wall µs with the final synchronize; medians of --reps repetitions, the sides
taking turns within each. Every side's results are compared with NumPy's before it is timed.

"woven, arrays alternating" calls the woven step with one of two sets of input arrays in turn, so that each replay
repoints the graph to other arrays (an exec update) instead of replaying it as it was. "woven, NumPy inputs" passes
the step's inputs as NumPy arrays, which each call copies to the device before the replay.

    python benchmarks/woven_step.py [--steps 1000] [--n 16384] [--reps 7] [--quick] [--json PATH]

With CUWEAVE_BACKEND=sim it runs on the simulator (a smoke test of the script; its figures are not a GPU's, and the
PyTorch sides need a GPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import cuweave as cw
from libraries import add_run_arguments, gpu_machine_info, load_peers, loaded

CHAINS, OPS_PER_CHAIN = 5, 10  # 50 operations a step
STREAMS = 4


def cuweave_step(*xs):
    outs = []
    for x in xs:
        for op in range(OPS_PER_CHAIN):
            x = cw.ops.add(x, 1.0) if op % 2 == 0 else cw.ops.scale(x, 0.5)
        outs.append(x)
    return tuple(outs)


def torch_step(*xs):
    outs = []
    for x in xs:
        for op in range(OPS_PER_CHAIN):
            x = x + 1.0 if op % 2 == 0 else x * 0.5
        outs.append(x)
    return tuple(outs)


def expected(inputs: list[np.ndarray]) -> list[np.ndarray]:
    outs = []
    for x in inputs:
        for op in range(OPS_PER_CHAIN):
            x = x + np.float32(1.0) if op % 2 == 0 else x * np.float32(0.5)
        outs.append(x)
    return outs


class Side:
    """One way of running the step: run() issues one step and returns its outputs (as the library's arrays);
    synchronize() waits for all of them; inputs(k) are the host values the k-th call's inputs hold."""

    def __init__(self, run: Callable[[], tuple], synchronize: Callable[[], None],
                 to_numpy: Callable[[object], np.ndarray], inputs: Callable[[int], list[np.ndarray]]):
        self.run, self.synchronize, self.to_numpy, self.inputs = run, synchronize, to_numpy, inputs


def cuweave_sides(host_inputs: list[np.ndarray]) -> dict[str, Side]:
    stream = cw.Stream()
    other_inputs = [x + np.float32(1000.0) for x in host_inputs]  # the second set: replays must read its values
    first = [cw.to_device(x, stream=stream) for x in host_inputs]
    second = [cw.to_device(x, stream=stream) for x in other_inputs]
    stream.synchronize()

    def on_stream(run: Callable[[], tuple]) -> Callable[[], tuple]:
        def issue() -> tuple:
            with stream:
                return run()
        return issue

    woven = cw.woven(cuweave_step, streams=STREAMS, copy=False)
    alternating = cw.woven(cuweave_step, streams=STREAMS, copy=False)
    from_numpy = cw.woven(cuweave_step, streams=STREAMS, copy=False)
    turn = [0]

    def woven_alternating() -> tuple:
        turn[0] ^= 1
        return alternating(*(first if turn[0] else second))

    def eager_weave() -> tuple:
        with cw.weave(streams=STREAMS):
            return cuweave_step(*first)

    with cw.capture(stream) as cap, cw.weave(streams=STREAMS):  # by hand: the same woven step, captured once
        captured_outputs = cuweave_step(*first)
    graph = cap.graph

    def replay_by_hand() -> tuple:
        graph.replay(stream)
        return captured_outputs

    def synchronize() -> None:
        stream.synchronize()

    def to_numpy(array) -> np.ndarray:
        return array.to_numpy(stream=stream)

    def same_inputs(_call: int) -> list[np.ndarray]:
        return host_inputs

    def alternating_inputs(call: int) -> list[np.ndarray]:
        return host_inputs if call % 2 == 0 else other_inputs

    def side(run: Callable[[], tuple], inputs: Callable[[int], list[np.ndarray]] = same_inputs) -> Side:
        return Side(run, synchronize, to_numpy, inputs)

    return {
        "woven (cw.woven), replayed": side(on_stream(lambda: woven(*first))),
        "woven, arrays alternating": side(on_stream(woven_alternating), alternating_inputs),
        "woven, NumPy inputs": side(on_stream(lambda: from_numpy(*host_inputs))),
        "captured by hand once, replayed": side(replay_by_hand),
        "eager weave (cw.weave)": side(on_stream(eager_weave)),
        "plain, one stream": side(on_stream(lambda: cuweave_step(*first))),
    }


def torch_sides(torch, host_inputs: list[np.ndarray]) -> tuple[dict[str, Side], dict[str, str]]:
    """PyTorch's sides, and why any could not be made."""
    stream = torch.cuda.Stream()
    inputs = [torch.from_numpy(x).cuda() for x in host_inputs]
    torch.cuda.synchronize()

    def synchronize() -> None:
        torch.cuda.synchronize()

    def to_numpy(tensor) -> np.ndarray:
        return tensor.cpu().numpy()

    def on_stream(run: Callable[[], tuple]) -> Callable[[], tuple]:
        def issue() -> tuple:
            with torch.cuda.stream(stream):
                return run()
        return issue

    def same_inputs(_call: int) -> list[np.ndarray]:
        return host_inputs

    sides = {"PyTorch eager": Side(on_stream(lambda: torch_step(*inputs)), synchronize, to_numpy, same_inputs)}
    failed: dict[str, str] = {}
    try:
        with torch.cuda.stream(stream):  # warm-up before capture, as torch.cuda.graph's docs ask
            torch_step(*inputs)
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            graph_outputs = torch_step(*inputs)

        def replay() -> tuple:
            graph.replay()
            return graph_outputs

        sides["PyTorch CUDA graph, replayed"] = Side(replay, synchronize, to_numpy, same_inputs)
    except Exception as error:  # noqa: BLE001 -- reported beside the table
        failed["PyTorch CUDA graph, replayed"] = f"{type(error).__name__}: {error}"
    try:
        compiled = torch.compile(torch_step, mode="reduce-overhead")

        def compiled_step() -> tuple:
            torch.compiler.cudagraph_mark_step_begin()  # each call a new step: earlier outputs may be overwritten
            return compiled(*inputs)

        for _ in range(3):  # compiles, then records its CUDA graph
            compiled_step()
        torch.cuda.synchronize()
        sides['torch.compile(mode="reduce-overhead")'] = Side(on_stream(compiled_step), synchronize, to_numpy,
                                                              same_inputs)
    except Exception as error:  # noqa: BLE001 -- no Triton, no compiler: reported beside the table
        failed['torch.compile(mode="reduce-overhead")'] = f"{type(error).__name__}: {error}"[:300]
    return sides, failed


def timed(side: Side, steps: int) -> tuple[float, float]:
    """Host µs and wall µs per step over `steps` steps."""
    side.synchronize()
    began = time.perf_counter()
    for _ in range(steps):
        side.run()
    issued = time.perf_counter()
    side.synchronize()
    ended = time.perf_counter()
    return (issued - began) / steps * 1e6, (ended - began) / steps * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(parser, reps=7)
    parser.add_argument("--steps", type=int, default=1000, help="steps per repetition (default 1000)")
    parser.add_argument("--n", type=int, default=1 << 14, help="floats per array (default 16384)")
    args = parser.parse_args()
    steps, reps = (50, 3) if args.quick else (args.steps, args.reps)
    host_inputs = [np.arange(args.n, dtype=np.float32) * (chain + 1) for chain in range(CHAINS)]

    sides = cuweave_sides(host_inputs)
    failed: dict[str, str] = {}
    peers_skipped = load_peers({}) if cw.backend() == "cuda" else {"torch": "the simulator (no GPU for PyTorch)"}
    torch = loaded()["torch"]
    if torch is not None:
        more, failed = torch_sides(torch, host_inputs)
        sides.update(more)
    for name, side in sides.items():  # warm-up, and two calls' results checked
        for call in range(2):
            outputs = side.run()
            side.synchronize()
            got = [side.to_numpy(out) for out in outputs]
            if not all(np.array_equal(g, w) for g, w in zip(got, expected(side.inputs(call)), strict=True)):
                raise SystemExit(f"woven_step.py: {name} gave results other than NumPy's at call {call}")

    host: dict[str, list[float]] = {name: [] for name in sides}
    wall: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    for rep in range(reps):
        for name in order[rep % len(order):] + order[:rep % len(order)]:
            host_us, wall_us = timed(sides[name], steps)
            host[name].append(host_us)
            wall[name].append(wall_us)
    figures = {name: {"host_us": statistics.median(host[name]), "wall_us": statistics.median(wall[name])}
               for name in sides}

    print(f"cuweave {cw.__version__} on {cw.Device(0).properties.name} ({cw.backend()}): a step of {CHAINS} chains x "
          f"{OPS_PER_CHAIN} operations on {args.n} floats, {steps} steps a repetition; per step, medians of {reps}")
    print(f"  {'side':40s} {'host µs':>9s} {'wall µs':>9s}")
    for name, figure in figures.items():
        print(f"  {name:40s} {figure['host_us']:9.2f} {figure['wall_us']:9.2f}")
    by_hand = figures["captured by hand once, replayed"]["wall_us"]
    ratios = {
        "woven_over_captured_by_hand": figures["woven (cw.woven), replayed"]["wall_us"] / by_hand,
        "eager_weave_over_woven": figures["eager weave (cw.weave)"]["wall_us"]
        / figures["woven (cw.woven), replayed"]["wall_us"],
    }
    print(f"  woven / captured by hand (wall): {ratios['woven_over_captured_by_hand']:.3f}   "
          f"eager weave / woven (wall): {ratios['eager_weave_over_woven']:.2f}")
    for name, why in {**{f"PyTorch ({peer})": why for peer, why in peers_skipped.items() if peer == "torch"},
                      **failed}.items():
        print(f"  {name}: skipped: {why}")
    if args.json:
        settings = {"chains": CHAINS, "ops_per_chain": OPS_PER_CHAIN, "n": args.n, "steps": steps, "reps": reps,
                    "streams": STREAMS}
        Path(args.json).write_text(json.dumps({"machine": gpu_machine_info(cw), "settings": settings,
                                               "per_step": figures, "ratios": ratios, "failed": failed},
                                              indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
