"""The prefetch pipeline: copies of NumPy batches overlapped with compute (cw.prefetch; PyTorch by hand)."""

from __future__ import annotations

import functools
import statistics
import time
from typing import Callable

import numpy as np

import libraries
from rows import Row
from in_turn import InTurnSetup, in_turn
from timing import Config, gc_disabled, median_of, wall_ms

cw = torch = cupy = None  # the loaded libraries, set as they load (libraries.share_with)
libraries.share_with(globals())

PIPELINE_BATCHES = 16       # prefetch pipeline: NumPy float32 batches ...
PIPELINE_BATCH_BYTES = 64 * 2**20  # ... of 64 MB each
PIPELINE_COMPUTE_OVER_COPY = 2.5   # per-batch compute = 2.5x one batch's copy time
PIPELINE_DEPTH = 2          # cw.prefetch(depth=)
PIPELINE_MAX_REPS = 5       # the pipeline rows use min(reps, this) repetitions


# --------------------------------------------------------------------------- prefetch pipeline
# PIPELINE_BATCHES ordinary NumPy float32 batches of 64 MB, made once. Per-batch "compute" is cw.ops.spin,
# a 1-block kernel that busy-waits compute_s = 2.5x one batch's copy time (cw.to_device + sync, median),
# calibrated once and used for every library. Each variant is the wall time of the whole pass including
# the final synchronize, median of min(reps, PIPELINE_MAX_REPS) after a warm-up pass, every pass of every library
# taking turns within each repetition (pipeline_in_turn):
#   serial        for each batch: copy it, then compute, in order on one stream (no host wait in between)
#   copy_only     every copy, no compute
#   compute_only  every compute, no copy
#   prefetched    copies overlapped with compute (cw.prefetch; for PyTorch a hand-written side-stream prefetcher)
# overlap efficiency = max(copy_only, compute_only) / prefetched: 1.0 hides the shorter of the two entirely.
# A measuring pass of its own (the pipeline_copy_split rows) repeats copy_only with time.perf_counter around each
# copy call and the final synchronize, to tell host-bound from link-bound; the clocks stay out of the timed passes.
# PyTorch's split is clean (pin_memory() is the host's copy, .to(non_blocking=True) from pinned memory only queues
# the DMA); cw.to_device returns once its bytes are staged, its host copies overlapping the DMAs of earlier chunks
# and waiting for a free slot when the link lags (Note [Staging ring reuse]), so its time holds both. Passes in a
# fresh process, one after another, are in tools/probes/pipeline_copies_probe.py.

pipeline_calibration: dict[str, float] = {}  # filled by pipeline_compute_s, printed and written to --json


@functools.cache
def pipeline_batches() -> tuple[np.ndarray, ...]:
    n = PIPELINE_BATCH_BYTES // np.dtype(np.float32).itemsize
    return tuple(np.full(n, i, dtype=np.float32) for i in range(PIPELINE_BATCHES))


def pipeline_reps(cfg: Config) -> int:
    return min(cfg.reps, PIPELINE_MAX_REPS)


@functools.cache
def pipeline_compute_s(cfg: Config) -> float:
    """Per-batch compute in seconds: PIPELINE_COMPUTE_OVER_COPY x the median wall time of one batch's
    cw.to_device + synchronize."""
    s, batch = cw.Stream(), pipeline_batches()[0]

    def one_copy():
        dev = cw.to_device(batch, stream=s)
        s.synchronize()
        return dev

    copy_ms = median_of(cfg.reps, lambda: wall_ms(one_copy))
    compute_ms = PIPELINE_COMPUTE_OVER_COPY * copy_ms
    pipeline_calibration.update(batch_copy_ms=copy_ms, compute_ms=compute_ms)
    return compute_ms / 1e3


def cw_pipeline_passes(compute_s: float) -> dict[str, Callable[[], None]]:
    batches, consumer = pipeline_batches(), cw.Stream()

    def serial():
        for batch in batches:
            _on_device = cw.to_device(batch, stream=consumer)  # dropped at the next one, in stream order
            cw.ops.spin(compute_s, stream=consumer)  # stands for a kernel that reads it
        consumer.synchronize()

    def copy_only():
        for batch in batches:
            cw.to_device(batch, stream=consumer)
        consumer.synchronize()

    def compute_only():
        for _ in batches:
            cw.ops.spin(compute_s, stream=consumer)
        consumer.synchronize()

    def prefetched():
        with consumer, cw.prefetch(batches, depth=PIPELINE_DEPTH) as loader:
            for _on_device in loader:  # each batch is ordered before the current stream, `consumer`
                cw.ops.spin(compute_s)
        consumer.synchronize()

    return {"serial": serial, "copy_only": copy_only, "compute_only": compute_only, "prefetched": prefetched}


def torch_pipeline_passes(compute_s: float) -> dict[str, Callable[[], None]]:
    """Copies: torch.from_numpy(batch).pin_memory() then .to("cuda", non_blocking=True). Compute: the same
    cuweave spin, launched on torch's current stream (adopted with cw.Stream.from_external)."""
    batches, side = pipeline_batches(), torch.cuda.Stream()
    main = torch.cuda.current_stream()
    on_main = cw.Stream.from_external(main)

    def load(batch):
        return torch.from_numpy(batch).pin_memory().to("cuda", non_blocking=True)

    def serial():
        for batch in batches:
            _on_device = load(batch)
            cw.ops.spin(compute_s, stream=on_main)
        main.synchronize()

    def copy_only():
        for batch in batches:
            load(batch)
        main.synchronize()

    def compute_only():
        for _ in batches:
            cw.ops.spin(compute_s, stream=on_main)
        main.synchronize()

    def prefetched():
        # Batch i+1 is pinned and copied on `side` while batch i computes on `main`.
        with torch.cuda.stream(side):
            ahead = load(batches[0])
        for i in range(len(batches)):
            main.wait_stream(side)
            current = ahead
            current.record_stream(main)  # allocated on `side`, used on `main`
            cw.ops.spin(compute_s, stream=on_main)  # queued before the next load's host work
            if i + 1 < len(batches):
                with torch.cuda.stream(side):
                    ahead = load(batches[i + 1])
        main.synchronize()

    return {"serial": serial, "copy_only": copy_only, "compute_only": compute_only, "prefetched": prefetched}


PIPELINE_PASSES = {"cuweave": cw_pipeline_passes, "torch": torch_pipeline_passes}
PIPELINE_PASS_NAMES = ("serial", "copy_only", "compute_only", "prefetched")


# ms of one copies-alone pass spent where: the keys of copy_split_results.
SPLIT_WALL, SPLIT_CALLS, SPLIT_SYNC = "wall", "calls", "synchronize"
SPLIT_TORCH_PIN, SPLIT_TORCH_TO = "pin_memory", "to_device"
copy_split_measured: dict[str, dict[str, float]] = {}  # by library, filled by copy_split_results; run.py prints it


def cw_copy_split_pass() -> Callable[[], dict[str, float]]:
    """One copies-alone pass as cw_pipeline_passes' copy_only, returning the ms inside cw.to_device summed, the ms
    inside the final synchronize and the pass's wall ms. Each result is dropped after the clock stops, so its free
    is not counted as the call's."""
    batches, consumer = pipeline_batches(), cw.Stream()
    clock = time.perf_counter

    def measuring_pass() -> dict[str, float]:
        inside = 0.0
        start = clock()
        for batch in batches:
            before = clock()
            on_device = cw.to_device(batch, stream=consumer)
            inside += clock() - before
            del on_device
        before_sync = clock()
        consumer.synchronize()
        end = clock()
        return {SPLIT_WALL: (end - start) * 1e3, SPLIT_CALLS: inside * 1e3, SPLIT_SYNC: (end - before_sync) * 1e3}

    return measuring_pass


def torch_copy_split_pass() -> Callable[[], dict[str, float]]:
    """One copies-alone pass as torch_pipeline_passes' copy_only, returning the ms inside pin_memory() and inside
    .to("cuda", non_blocking=True), each summed, their sum, the ms inside the final synchronize and the pass's
    wall ms."""
    batches, main = pipeline_batches(), torch.cuda.current_stream()
    clock = time.perf_counter

    def measuring_pass() -> dict[str, float]:
        in_pin = in_to = 0.0
        start = clock()
        for batch in batches:
            host = torch.from_numpy(batch)  # a view of the NumPy memory: no copy, kept out of pin_memory's time
            before = clock()
            pinned = host.pin_memory()
            pinned_at = clock()
            on_device = pinned.to("cuda", non_blocking=True)
            in_to += clock() - pinned_at
            in_pin += pinned_at - before
            del host, pinned, on_device
        before_sync = clock()
        main.synchronize()
        end = clock()
        return {SPLIT_WALL: (end - start) * 1e3, SPLIT_CALLS: (in_pin + in_to) * 1e3, SPLIT_TORCH_PIN: in_pin * 1e3,
                SPLIT_TORCH_TO: in_to * 1e3, SPLIT_SYNC: (end - before_sync) * 1e3}

    return measuring_pass


COPY_SPLIT_PASSES = {"cuweave": cw_copy_split_pass, "torch": torch_copy_split_pass}


@functools.cache
def copy_split_results(lib: str, cfg: Config) -> dict[str, float]:
    """Each figure of the measuring pass, the median over pipeline_reps(cfg) passes after a warm-up pass (each
    figure's median on its own, so they need not add up exactly)."""
    measuring_pass = COPY_SPLIT_PASSES[lib]()
    with gc_disabled():
        measuring_pass()
        passes = [measuring_pass() for _ in range(pipeline_reps(cfg))]
    medians = {key: statistics.median(figures[key] for figures in passes) for key in passes[0]}
    copy_split_measured[lib] = medians
    return medians


def copy_split_figure(cfg: Config, lib: str, key: str) -> float:
    return copy_split_results(lib, cfg)[key]


def copy_split_row(title: str, key: str, libs=tuple(COPY_SPLIT_PASSES)) -> Row:
    """A row showing one figure of copy_split_results (measured once per library, shared by these rows)."""
    return Row(title, "ms", None, None,
               {lib: functools.partial(copy_split_figure, lib=lib, key=key) for lib in libs})


def pipeline_pass_setups(lib: str, compute_s: float) -> dict[str, InTurnSetup]:
    """One in-turn setup per pass of `lib`, keyed "lib pass": each repetition is the pass's wall ms. The passes are
    made once, by the first setup, so that a library that cannot make them fails each of its passes alike."""
    make = functools.cache(lambda: PIPELINE_PASSES[lib](compute_s))
    return {f"{lib} {name}": (lambda name=name: functools.partial(wall_ms, make()[name])) for name in PIPELINE_PASS_NAMES}


@functools.cache
def pipeline_in_turn(cfg: Config) -> dict[str, float | Exception]:
    """Every pass of every loaded library, keyed "lib pass": all of them take turns within each repetition
    (benchmarks/in_turn.py), so that a slow spell of the host weighs on each library's passes alike (measured one
    library after the other, minutes apart, cuweave's copies alone once read 1.6x PyTorch's; passes of each library
    also slow the other's next one: tools/probes/pipeline_copies_probe.py)."""
    compute_s = pipeline_compute_s(cfg)
    loaded = libraries.loaded()
    setups: dict[str, InTurnSetup] = {}
    for lib in PIPELINE_PASSES:
        if loaded[lib] is not None:
            setups.update(pipeline_pass_setups(lib, compute_s))
    return in_turn(setups, pipeline_reps(cfg))


def pipeline_results(lib: str, cfg: Config) -> dict[str, float]:
    """Every pipeline figure of one library, shared by the pipeline rows: ms per pass, and the overlap
    efficiencies of the prefetched and the serial pass."""
    ms = {}
    for name in PIPELINE_PASS_NAMES:
        figure = pipeline_in_turn(cfg)[f"{lib} {name}"]
        if isinstance(figure, Exception):
            raise figure
        ms[name] = figure
    floor = max(ms["copy_only"], ms["compute_only"])
    return {**ms, "overlap_efficiency": floor / ms["prefetched"], "serial_efficiency": floor / ms["serial"]}


def pipeline_figure(cfg: Config, lib: str, key: str) -> float:
    return pipeline_results(lib, cfg)[key]


def pipeline_row(title: str, unit: str, target: float | None, key: str) -> Row:
    """A row showing one figure of pipeline_results (measured once per library, shared by these rows)."""
    return Row(title, unit, target, None,
               {lib: functools.partial(pipeline_figure, lib=lib, key=key) for lib in PIPELINE_PASSES})


ROWS: dict[str, Row] = {
    "pipeline_serial_ms": pipeline_row("pipeline: copy then compute, batch by batch", "ms", None, "serial"),
    "pipeline_copy_only_ms": pipeline_row(f"pipeline: the {PIPELINE_BATCHES} copies alone", "ms", None, "copy_only"),
    # The copies alone again, in a measuring pass of their own: where its time goes.
    "pipeline_copy_split_wall_ms": copy_split_row(
        f"pipeline: the {PIPELINE_BATCHES} copies alone, measuring pass: wall incl. sync", SPLIT_WALL),
    "pipeline_copy_split_calls_ms": copy_split_row(
        "pipeline, measuring pass: inside the copy calls (cw.to_device; torch: pin_memory() + .to())", SPLIT_CALLS),
    "pipeline_copy_split_pin_ms": copy_split_row(
        "pipeline, measuring pass: inside torch's pin_memory()", SPLIT_TORCH_PIN, ("torch",)),
    "pipeline_copy_split_to_ms": copy_split_row(
        'pipeline, measuring pass: inside torch\'s .to("cuda", non_blocking=True)', SPLIT_TORCH_TO, ("torch",)),
    "pipeline_copy_split_sync_ms": copy_split_row(
        "pipeline, measuring pass: inside the final synchronize", SPLIT_SYNC),
    "pipeline_compute_only_ms": pipeline_row(
        f"pipeline: the {PIPELINE_BATCHES} computes alone", "ms", None, "compute_only"),
    "pipeline_prefetched_ms": pipeline_row("pipeline: prefetched (torch: side-stream)", "ms", None, "prefetched"),
    "overlap_efficiency": pipeline_row(
        "max(copy only, compute only) / prefetched", "ratio", 0.95, "overlap_efficiency"),
    "overlap_efficiency_serial": pipeline_row(
        "max(copy only, compute only) / serial", "ratio", None, "serial_efficiency"),
}
