#!/usr/bin/env python3
"""What cuweave's tools cost on a PyTorch program: a small training loop run as is, under
``python -m cuweave sanitize`` (through its C++ hook in PyTorch's dispatcher, built into PyTorch's extensions
cache before the first round, as a user's runs after the first have it; and through its Python dispatch mode,
``CUWEAVE_TORCH_HOOK=python``), under PyTorch's own CUDA sanitizer (``TORCH_CUDA_SANITIZER=1``, CSAN) and under
``python -m cuweave trace``, each a fresh process, taking turns.

    python benchmarks/torch_tools.py [--json PATH] [--rounds N] [--steps N]
    python benchmarks/torch_tools.py loop [STEPS]      (the program itself)

The loop: an MLP (256-512-512-10) on random data, batches of 128 copied from pinned memory on a copy stream
while the previous one trains on the current stream (wait_stream before use, record_stream after), SGD,
--steps steps (default 200) timed after 10 warm-up steps; the program prints its steps' wall time. A tool's
added time is its loop time less the plain loop's, in the same round; the table gives the medians over the
rounds. The target: cuweave sanitize adds at most half of what CSAN adds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIDES = ("plain", "cuweave sanitize", "cuweave sanitize, Python mode", "CSAN", "cuweave trace")
WARM_UP_STEPS = 10


def loop(steps: int) -> None:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    copies = torch.cuda.Stream()
    inputs = [torch.randn(128, 256).pin_memory() for _ in range(4)]
    labels = [torch.randint(0, 10, (128,)).pin_memory() for _ in range(4)]

    def load(i: int) -> tuple:
        with torch.cuda.stream(copies):
            return inputs[i % 4].to("cuda", non_blocking=True), labels[i % 4].to("cuda", non_blocking=True)

    def step(i: int, batch: tuple) -> tuple:
        compute = torch.cuda.current_stream()
        compute.wait_stream(copies)
        x, y = batch
        x.record_stream(compute)
        y.record_stream(compute)
        following = load(i + 1)  # copied while this one trains
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return following

    batch = load(0)
    for i in range(WARM_UP_STEPS):
        batch = step(i, batch)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(WARM_UP_STEPS, WARM_UP_STEPS + steps):
        batch = step(i, batch)
    torch.cuda.synchronize()
    print(f"loop_s {time.perf_counter() - start:.6f}")


def run_side(side: str, steps: int, out: str) -> float:
    """The loop's seconds in a fresh process under `side`."""
    program = [os.path.abspath(__file__), "loop", str(steps)]
    env = {k: v for k, v in os.environ.items() if k not in ("CUWEAVE_SANITIZE", "TORCH_CUDA_SANITIZER")}
    command = {
        "plain": [sys.executable, *program],
        "cuweave sanitize": [sys.executable, "-m", "cuweave", "sanitize", *program],
        "cuweave sanitize, Python mode": [sys.executable, "-m", "cuweave", "sanitize", *program],
        "CSAN": [sys.executable, *program],
        "cuweave trace": [sys.executable, "-m", "cuweave", "trace", "--out", out, *program],
    }[side]
    if side == "CSAN":
        env["TORCH_CUDA_SANITIZER"] = "1"
    env["CUWEAVE_TORCH_HOOK"] = "python" if side == "cuweave sanitize, Python mode" else "native"
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    if run.returncode != 0 or "loop_s" not in run.stdout:
        raise RuntimeError(f"{side}: exit {run.returncode}\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}")
    return float(run.stdout.split("loop_s")[1].split()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    built = subprocess.run([sys.executable, "-m", "cuweave._torch_native"], capture_output=True, text=True, timeout=900)
    if built.returncode != 0:
        raise RuntimeError(f"cuweave's PyTorch hook could not be built:\n{built.stderr[-4000:]}")
    with tempfile.TemporaryDirectory() as out:
        for round_ in range(args.rounds):
            order = SIDES[round_ % len(SIDES):] + SIDES[:round_ % len(SIDES)]
            for side in order:
                seconds[side].append(run_side(side, args.steps, out))
            print(f"round {round_ + 1}: " + ", ".join(f"{side} {seconds[side][-1] * 1e3:.1f} ms" for side in SIDES),
                  flush=True)
    plain = seconds["plain"]
    added = {side: [s - p for s, p in zip(seconds[side], plain)] for side in SIDES if side != "plain"}
    print(f"\nPyTorch MLP training loop, {args.steps} steps, two streams; medians of {args.rounds} rounds "
          "(each side a fresh process, in turn)")
    print("| side                          | loop ms | ms per step | added ms per step | added / CSAN's |")
    csan_added = statistics.median(added["CSAN"])
    for side in SIDES:
        median = statistics.median(seconds[side])
        extra = statistics.median(added[side]) if side in added else 0.0
        ratio = f"{extra / csan_added:.3f}" if side in added and csan_added > 0 else "-"
        print(f"| {side:29} | {median * 1e3:7.1f} | {median * 1e3 / args.steps:11.3f} | "
              f"{extra * 1e3 / args.steps:17.3f} | {ratio:>14} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": args.steps, "rounds": args.rounds, "seconds": seconds}, f, indent=1)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "loop":
        loop(int(sys.argv[2]) if len(sys.argv) > 2 else 200)
    else:
        sys.exit(main())
