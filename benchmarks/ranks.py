"""One process per rank: the benchmarks' launcher of NCCL ranks, and the rendezvous a rank waits for.

A rank runs this benchmark's own script again with its worker arguments. Rank 0 writes the figures (JSON) to the
`out` path every rank is given; the launcher returns them. A rank that fails has the others killed: they would
wait for it in NCCL forever.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

RENDEZVOUS_TIMEOUT_S = 120


def publish(rendezvous: Path, unique_id: bytes) -> None:
    """Rank 0: the NCCL unique id where the other ranks look for it (renamed into place: never read half)."""
    tmp = rendezvous.with_suffix(".tmp")
    tmp.write_bytes(unique_id)
    tmp.rename(rendezvous)


def wait_for_rendezvous(rendezvous: Path, rank: int) -> bytes:
    """The unique id rank 0 published, once it is there."""
    deadline = time.monotonic() + RENDEZVOUS_TIMEOUT_S
    while not rendezvous.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: no rendezvous file from rank 0 after {RENDEZVOUS_TIMEOUT_S} s")
        time.sleep(0.01)
    return rendezvous.read_bytes()


def run_ranks(script: str, label: str, ranks: int, worker_args: Callable[[int, Path, Path], list[str]],
              extra_env: dict[str, str], timeout_s: float) -> dict:
    """Runs `ranks` child processes of `script`, rank r with `worker_args(r, rendezvous, out)`; rank 0's figures.
    Raises RuntimeError when a rank fails (the others are killed) or TimeoutError after `timeout_s` (all are
    killed)."""
    with tempfile.TemporaryDirectory() as folder:
        rendezvous, out = Path(folder) / "rendezvous", Path(folder) / "out.json"
        env = dict(os.environ, **extra_env)
        logs = [Path(folder) / f"rank{r}.log" for r in range(ranks)]
        procs = []
        for r in range(ranks):
            with logs[r].open("w") as log:  # a file, not a pipe: a chatty rank cannot block on a full pipe
                procs.append(subprocess.Popen([sys.executable, script, *worker_args(r, rendezvous, out)],
                                              env=env, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                codes = [p.poll() for p in procs]
                if any(code not in (None, 0) for code in codes) or all(code == 0 for code in codes):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{label} ranks did not finish in {timeout_s:.0f} s (killed): "
                                       f"{logs[0].read_text()[-500:].strip()}")
                time.sleep(0.05)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
        bad = [(r, p.returncode) for r, p in enumerate(procs) if p.returncode != 0]
        if bad:
            # the rank that failed, not one killed here because of it
            rank, code = next(((r, c) for r, c in bad if c != -signal.SIGKILL), bad[0])
            raise RuntimeError(f"{label} rank {rank} exited {code}: {logs[rank].read_text().strip()[-800:]}")
        return json.loads(out.read_text())
