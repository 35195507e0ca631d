#!/usr/bin/env python3
"""Counts host_sampler.c's samples per function, self (the innermost frame) and inclusive (anywhere in the stack),
naming frames with addr2line. See host_sampler.c.

    python3 tools/probes/host_sampler_report.py SAMPLES [--filter SUBSTRING ...]
"""

from __future__ import annotations

import argparse
import collections
import subprocess


def names_of(frames_by_module: dict[str, set[str]]) -> dict[tuple[str, str], str]:
    names = {}
    for module, offsets in frames_by_module.items():
        ordered = sorted(offsets)
        if module == "?":
            names.update({(module, offset): "?" for offset in ordered})
            continue
        lines = subprocess.run(["addr2line", "-f", "-C", "-e", module, *ordered], capture_output=True,
                               text=True).stdout.splitlines()
        short = module.rsplit("/", 1)[-1]
        for i, offset in enumerate(ordered):
            function = lines[2 * i] if 2 * i < len(lines) else "?"
            names[(module, offset)] = f"{short}:{function[:140]}"
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("samples")
    parser.add_argument("--filter", nargs="*", default=["_core", "libcuda", "cudart"],
                        help="inclusive counts only for functions whose name holds one of these")
    parser.add_argument("--top", type=int, default=45)
    args = parser.parse_args()
    stacks = [[frame.rsplit("+", 1) for frame in line.split()] for line in open(args.samples)]
    frames_by_module: dict[str, set[str]] = collections.defaultdict(set)
    for stack in stacks:
        for module, offset in stack:
            frames_by_module[module].add(offset)
    names = names_of(frames_by_module)
    self_counts: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    for stack in stacks:
        if not stack:
            continue
        self_counts[names[tuple(stack[0])]] += 1
        for name in {names[tuple(frame)] for frame in stack}:
            inclusive[name] += 1
    total = len(stacks)
    print(f"{args.samples}: {total} samples\nself:")
    for name, count in self_counts.most_common(args.top):
        print(f"  {100 * count / total:5.1f}% {name}")
    print("inclusive:")
    shown = [(name, count) for name, count in inclusive.most_common() if any(f in name for f in args.filter)]
    for name, count in shown[: 2 * args.top]:
        print(f"  {100 * count / total:5.1f}% {name}")


if __name__ == "__main__":
    main()
