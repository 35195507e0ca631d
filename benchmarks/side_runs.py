"""What tracing.py and sanitizer.py share: sides that each run in a fresh child process of the script,
taking turns for a number of rounds, and the markdown table their figures go into."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path


def parser_for(doc: str, sides: Sequence[str]) -> argparse.ArgumentParser:
    """The options both scripts take (--rounds, --json, --quick, and the hidden --side of a child)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds in which every side runs once")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--quick", action="store_true", help="a smoke run, not figures to quote")
    parser.add_argument("--side", choices=sides, help=argparse.SUPPRESS)  # one side, in a child process
    return parser


def run_child(script: str, side: str, quick: bool, env: dict[str, str]) -> dict:
    """Runs `script --side SIDE` in a fresh process and returns the figures it wrote."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        path = Path(out.name)
    command = [sys.executable, script, "--side", side, "--json", str(path)] + (["--quick"] if quick else [])
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise SystemExit(f"the {side} side failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result = json.loads(path.read_text())
    path.unlink()
    return result


def rounds_of(sides: Sequence[str], rounds: int, run: Callable[[str], dict]) -> dict[str, list[dict]]:
    """Every side once per round, in an order rotated each round, so that no side always goes first."""
    sides = list(sides)
    results: dict[str, list[dict]] = {side: [] for side in sides}
    for index in range(max(1, rounds)):
        print(f"round {index + 1}", flush=True)
        for side in sides[index % len(sides):] + sides[:index % len(sides)]:
            results[side].append(run(side))
    return results


def print_table(header: list[str], lines: list[list[str]]) -> None:
    """A markdown table: the first column left-aligned, the figures right-aligned."""
    widths = [max(len(row[i]) for row in [header] + lines) for i in range(len(header))]
    for line in [header] + lines:
        print("| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
              + " |")
