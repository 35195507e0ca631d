"""``python -m cuweave tour``: the classic stream scenarios, measured on the active backend.

Each scenario runs under its own ``cuweave.trace()``, reports what it measured and a finding computed from
those measurements, and draws its timeline (``<out_dir>/<name>.svg``, and ``<name>.png`` with matplotlib);
``<out_dir>/index.html`` puts each scenario's figures, finding and timeline on one page that any browser opens.
The whole tour runs inside one outer trace, written to ``<out_dir>/tour.json`` for ui.perfetto.dev. On the
simulator the times are host times of simulated work, not GPU times, and the tour says so once.
"""

from __future__ import annotations

import dataclasses
import pathlib
import statistics
import time
import warnings
from collections.abc import Callable, Iterable

import numpy as np

import cuweave as cw
from cuweave import _report_page

# One-thread blocks that fit on a multiprocessor at once (the per-SM block limit of recent GPUs).
RESIDENT_BLOCKS_PER_SM = 32


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How big and how long each scenario's work is."""

    batches: int  # prefetch: NumPy batches
    batch_elements: int  # prefetch: float32 elements per batch
    spin_s: float  # concurrent streams and legacy default stream: seconds per spin kernel
    kernels_per_stream: int  # concurrent streams: spin kernels on each of the two streams
    waves: int  # priorities: waves of blocks in the low-priority kernel
    wave_s: float  # priorities: seconds each block of the low-priority kernel spins
    graph_kernels: int  # graphs: tiny kernels launched eagerly, then as one graph
    graph_elements: int  # graphs: float32 elements of the array they add to


# Spins as long as the pictures need, no longer: a tenth of a second dwarfs a launch (microseconds) and the
# simulator's scheduling (a millisecond or so), and the whole tour stays within seconds.
FULL = Sizes(batches=16, batch_elements=16_000_000, spin_s=0.2, kernels_per_stream=3, waves=4, wave_s=0.12,
             graph_kernels=200, graph_elements=4096)
QUICK = Sizes(batches=4, batch_elements=500_000, spin_s=0.03, kernels_per_stream=2, waves=2, wave_s=0.03,
              graph_kernels=50, graph_elements=1024)


@dataclasses.dataclass(frozen=True)
class ScenarioResult:
    """What one scenario measured and found, the trace it ran under, and the files drawn from it."""

    name: str
    title: str
    figures: dict[str, float]  # keys end in their unit: _ms, _us, _x (a ratio), _share (0..1)
    finding: str
    trace: cw.Trace
    ok: bool = True  # the scenario's own result checks passed
    paths: tuple[pathlib.Path, ...] = ()


class _WallClock:
    """Host seconds from entering the block until the device has finished everything queued in it."""

    seconds: float

    def __enter__(self) -> _WallClock:
        self._start = time.perf_counter()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None:
            cw.synchronize()
            self.seconds = time.perf_counter() - self._start


def _on_simulator() -> bool:
    return cw.backend() == "sim"


def _host_times_note() -> str:
    """A clause for findings measured on the simulator."""
    if not _on_simulator():
        return ""
    if cw.sim.seed() is not None:
        return " (simulator exploring schedules: spins took no time)"
    return " (simulator host times)"


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else float("nan")


def _compare(speedup: float, faster: str, same: str) -> str:
    """``faster`` (formatted with the speed-up) when it is at least 5%, else ``same``."""
    if speedup >= 1.05:
        return faster.format(speedup=speedup)
    if speedup <= 1 / 1.05:
        return f"{same}; it was {1 / speedup:.2f}× slower"
    return same


# Scenarios ---------------------------------------------------------------------------------------------

def _copy_seconds(batch: np.ndarray, stream: cw.Stream) -> float:
    """The GPU time of copying ``batch`` to the device on ``stream``: the median of three after a warm-up."""
    cw.to_device(batch, stream=stream)
    timings = []
    for _ in range(3):
        with cw.timer(stream) as timer:
            cw.to_device(batch, stream=stream)
        with warnings.catch_warnings():  # the tour prints the simulator's timing caveat itself
            warnings.simplefilter("ignore", cw.SimulatorTimingWarning)
            timings.append(timer.ms / 1e3)
    return statistics.median(timings)


def prefetch(sizes: Sizes) -> ScenarioResult:
    """Copy a batch then compute on it, one batch after another, against ``cuweave.prefetch`` copying the
    next batches on a side stream while the compute stream works; each batch's compute is a spin lasting
    1.5 times its measured copy time, so prefetching can hide every copy but the first (at best 1.67× faster).
    A trace makes a new thread's first CUDA call wait a few ms (CUPTI's per-thread setup), prefetch's thread
    among them: more batches make that one-time cost a smaller share."""
    # Each batch filled with its index: what the bytes are does not change a copy, and random numbers for a
    # gigabyte of batches took longer than the rest of the scenario.
    batches = [np.full(sizes.batch_elements, index, dtype=np.float32) for index in range(sizes.batches)]
    compute = cw.Stream(name="compute")
    with compute:  # a process's first prefetch sets up its stream pool and staging: not what is compared
        for _ in cw.prefetch(batches[:2], depth=2):
            pass
    copy_s = _copy_seconds(batches[0], compute)
    spin_s = 1.5 * copy_s
    with cw.trace() as trace:
        with cw.range("serial: copy, then compute"), _WallClock() as serial:
            for batch in batches:
                cw.to_device(batch, stream=compute)
                cw.ops.spin(spin_s, stream=compute)
        with cw.range("prefetched: copies ahead on a side stream"), _WallClock() as prefetched, compute:
            for _ in cw.prefetch(batches, depth=2):
                cw.ops.spin(spin_s, stream=compute)
    speedup = _ratio(serial.seconds, prefetched.seconds)
    finding = _compare(
        speedup,
        "prefetching was {speedup:.2f}× faster than copying and computing one batch at a time",
        "no speed-up from prefetching measured here",
    ) + _host_times_note()
    figures = {"copy_per_batch_ms": copy_s * 1e3, "spin_per_batch_ms": spin_s * 1e3,
               "serial_ms": serial.seconds * 1e3, "prefetched_ms": prefetched.seconds * 1e3, "speedup_x": speedup}
    mb = sizes.batch_elements * 4 / 1e6
    return ScenarioResult("prefetch", f"prefetch: {sizes.batches} batches of {mb:.3g} MB, serial vs prefetched",
                          figures, finding, trace)


def _overlap_share(trace: cw.Trace, streams: Iterable[cw.Stream]) -> float:
    """The smallest share, among ``streams``, of a stream's busy time during which another stream was busy
    (from the trace's summary)."""
    lanes = {trace.select(stream=stream)[0].lane for stream in streams}
    shares = [_ratio(row.overlap_ns, row.busy_ns) for row in trace.summary().streams if row.lane in lanes]
    return float(np.min(shares))  # nan when a stream was never busy


def concurrent_streams(sizes: Sizes) -> ScenarioResult:
    """Spin kernels on two independent streams, against the same kernels on one stream: independent
    streams let the GPU run them at once."""
    first, second, single = cw.Stream(name="A"), cw.Stream(name="B"), cw.Stream(name="one stream")
    with cw.trace() as trace:
        with cw.range("two streams"), _WallClock() as two:
            for _ in range(sizes.kernels_per_stream):
                cw.ops.spin(sizes.spin_s, stream=first)
                cw.ops.spin(sizes.spin_s, stream=second)
        with cw.range("one stream"), _WallClock() as one:
            for _ in range(2 * sizes.kernels_per_stream):
                cw.ops.spin(sizes.spin_s, stream=single)
    share = _overlap_share(trace, (first, second))
    speedup = _ratio(one.seconds, two.seconds)
    finding = (f"the two streams overlapped for {share:.0%} of their busy time; "
               + _compare(speedup, "they finished {speedup:.2f}× sooner than one stream",
                          "no speed-up over one stream measured here")
               + _host_times_note())
    figures = {"two_streams_ms": two.seconds * 1e3, "one_stream_ms": one.seconds * 1e3, "speedup_x": speedup,
               "overlap_share": share}
    return ScenarioResult("concurrent-streams",
                          f"concurrent streams: {2 * sizes.kernels_per_stream} spin kernels on two streams vs one",
                          figures, finding, trace)


def legacy_default_stream(sizes: Sizes) -> ScenarioResult:
    """A spin on each of two streams with a short kernel on the legacy default stream queued between them:
    the legacy stream waits for blocking streams and they wait for it, so blocking streams run one after
    the other; non-blocking streams ignore it and overlap."""
    legacy = cw.default_stream()
    figures: dict[str, float] = {}
    with cw.trace() as trace:
        pairs = {}
        for kind, names in (("blocking", ("A", "B")), ("non_blocking", ("C", "D"))):
            pair = tuple(cw.Stream(blocking=kind == "blocking", name=name) for name in names)
            with cw.range(f"{kind.replace('_', '-')} streams"), _WallClock() as clock:
                cw.ops.spin(sizes.spin_s, stream=pair[0])
                cw.ops.spin(sizes.spin_s / 20, stream=legacy)
                cw.ops.spin(sizes.spin_s, stream=pair[1])
            pairs[kind] = pair
            figures[f"{kind}_ms"] = clock.seconds * 1e3
    for kind, pair in pairs.items():
        figures[f"{kind}_overlap_share"] = _overlap_share(trace, pair)
    blocking, non_blocking = figures["blocking_overlap_share"], figures["non_blocking_overlap_share"]
    finding = (f"with the legacy default stream between them, blocking streams overlapped for {blocking:.0%} of "
               f"their busy time and non-blocking ones for {non_blocking:.0%}; the blocking pair took "
               f"{_ratio(figures['blocking_ms'], figures['non_blocking_ms']):.2f}× as long" + _host_times_note())
    return ScenarioResult("legacy-default-stream",
                          "legacy default stream: a kernel on it between two blocking, then non-blocking, streams",
                          figures, finding, trace)


def priorities(sizes: Sizes) -> ScenarioResult:
    """A low-priority kernel with several waves of blocks fills the device, then a short kernel is queued on
    a high-priority stream, and again on a normal-priority one: the GPU gives the room that blocks free to
    high-priority blocks first, so that kernel finishes long before the low-priority one ends."""
    resident_blocks = RESIDENT_BLOCKS_PER_SM * cw.current_device().properties.multiprocessor_count
    low = cw.Stream(priority="low", name="low priority")
    short_streams = {priority: cw.Stream(priority=priority, name=f"{priority} priority")
                     for priority in ("high", "normal")}
    with cw.trace() as trace:
        for priority, short_stream in short_streams.items():
            with cw.range(f"low priority, then {priority}"), _WallClock():
                cw.ops.spin(sizes.wave_s, stream=low, blocks=sizes.waves * resident_blocks)
                cw.ops.spin(sizes.wave_s / 4, stream=short_stream)
    low_kernels = trace.select("kernel", stream=low)
    figures = {"low_kernel_ms": low_kernels[0].duration_ns / 1e6}
    for (priority, short_stream), low_kernel in zip(short_streams.items(), low_kernels, strict=True):
        (short_kernel,) = trace.select("kernel", stream=short_stream)
        figures[f"{priority}_finished_before_low_end_ms"] = (low_kernel.end_ns - short_kernel.end_ns) / 1e6
    finding = "; ".join(
        f"the {priority}-priority kernel finished "
        f"{_before_or_after(figures[f'{priority}_finished_before_low_end_ms'])} the low-priority kernel's end"
        for priority in short_streams
    )
    if _on_simulator():
        finding += (" (on the simulator a priority is only a preference between ready work: free host workers "
                    "run both kernels at once, and no blocks queue for room)")
    return ScenarioResult("priorities",
                          f"priorities: a {sizes.waves}-wave low-priority kernel, then a short high- or "
                          "normal-priority one", figures, finding, trace)


def _before_or_after(lead_ms: float) -> str:
    return f"{abs(lead_ms):.1f} ms {'before' if lead_ms >= 0 else 'after'}"


def graphs(sizes: Sizes) -> ScenarioResult:
    """Many tiny kernels launched one by one, against the same kernels captured once into a graph and
    replayed with one call: the replay saves the host the per-launch cost."""
    stream = cw.Stream(name="graphs")
    start = np.arange(sizes.graph_elements, dtype=np.float32)
    expected = start.copy()
    for _ in range(sizes.graph_kernels):
        expected += np.float32(1.0)
    eager_array = cw.to_device(start, stream=stream)
    graph_array = cw.to_device(start, stream=stream)
    with cw.capture(stream) as capture:
        for _ in range(sizes.graph_kernels):
            cw.ops.add(graph_array, 1.0, out=graph_array)
    graph = capture.graph
    graph.instantiate()  # so that the replay below measures the launch alone
    graph.upload(stream)
    stream.synchronize()
    with cw.trace() as trace:
        with cw.range("eager launches"), _WallClock() as eager:
            launch_start = time.perf_counter()
            for _ in range(sizes.graph_kernels):
                cw.ops.add(eager_array, 1.0, out=eager_array, stream=stream)
            eager_launch_s = time.perf_counter() - launch_start
        with cw.range("one graph replay"), _WallClock() as replayed:
            launch_start = time.perf_counter()
            graph.replay(stream)
            replay_launch_s = time.perf_counter() - launch_start
    equal = (np.array_equal(eager_array.to_numpy(stream=stream), expected)
             and np.array_equal(graph_array.to_numpy(stream=stream), expected))
    saving = _ratio(eager_launch_s, replay_launch_s)
    finding = (_compare(saving, "one replay cost the host {speedup:.1f}× less time than "
                        f"{sizes.graph_kernels} eager launches", "the replay cost the host no less time than "
                        "the eager launches")
               + f"; wall time {_ratio(eager.seconds, replayed.seconds):.2f}× shorter with the graph; "
               + ("both results equal NumPy's" if equal else "the results DIFFER from NumPy's")
               + _host_times_note())
    figures = {"eager_launch_us": eager_launch_s * 1e6, "replay_launch_us": replay_launch_s * 1e6,
               "launch_saving_x": saving, "eager_wall_ms": eager.seconds * 1e3,
               "replay_wall_ms": replayed.seconds * 1e3}
    return ScenarioResult("graphs", f"graphs: {sizes.graph_kernels} tiny kernels, eager vs one graph replay",
                          figures, finding, trace, ok=equal)


SCENARIOS: dict[str, Callable[[Sizes], ScenarioResult]] = {
    "prefetch": prefetch,
    "concurrent-streams": concurrent_streams,
    "legacy-default-stream": legacy_default_stream,
    "priorities": priorities,
    "graphs": graphs,
}


# The tour ----------------------------------------------------------------------------------------------

def _format_figure(key: str, value: float) -> str:
    """``serial_ms`` -> ``serial: 612.3 ms``, by the unit the key ends in."""
    label, _, unit = key.rpartition("_")
    text = {"ms": f"{value:.1f} ms", "us": f"{value:.1f} µs", "x": f"{value:.2f}×", "share": f"{value:.0%}"}[unit]
    return f"{label.replace('_', ' ')}: {text}"


def _draw_png(result: ScenarioResult, path: pathlib.Path) -> bool:
    """Saves the scenario's timeline to ``path`` with matplotlib; False when it is not installed."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure = result.trace.plot(title=result.title)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def _page(out: pathlib.Path, results: list[ScenarioResult], header: list[str], seconds: float) -> pathlib.Path:
    """index.html: the header, then each scenario's figures, finding and timeline."""
    sections = [_report_page.Section(title=result.title,
                                     lines=tuple(_format_figure(key, value) for key, value in result.figures.items()),
                                     conclusion=result.finding,
                                     svg=(out / f"{result.name}.svg").read_text(encoding="utf-8"),
                                     files=tuple(path.name for path in result.paths if path.suffix == ".png"))
                for result in results]
    return _report_page.write_page(out / "index.html", title="cuweave tour",
                                   notes=[*header, f"The tour took {seconds:.1f} s."], sections=sections,
                                   files=["tour.json"])


def _header() -> list[str]:
    properties = cw.current_device().properties
    lines = [f"cuweave tour on the {cw.backend()} backend: {properties.name} "
             f"({properties.multiprocessor_count} multiprocessors)",
             "Wall times run on the host clock until the device has finished; kernel and copy times come from "
             "the traces. Everything runs traced, and recording adds to host launch times."]
    if _on_simulator():
        lines.append("NOTE: no GPU here, so this runs on cuweave's host simulator. Timings below are host timings "
                     "of simulated work, not GPU timings; the ordering rules are CUDA's.")
        if cw.sim.seed() is not None:
            lines.append(f"NOTE: the simulator is exploring schedules (seed {cw.sim.seed()}): spins take no time, "
                         "so the timings say nothing about overlap.")
    return lines


def run(out_dir: str | pathlib.Path, quick: bool = False, only: Iterable[str] | None = None) -> list[ScenarioResult]:
    """Runs the scenarios (``only``: some of SCENARIOS' names, in the tour's order), printing what each
    measured; writes ``<name>.svg`` per scenario (and ``<name>.png`` with matplotlib), ``index.html`` (all of it
    on one page) and ``tour.json`` (Perfetto) into ``out_dir``. ``quick`` shrinks sizes and durations to a few
    seconds in all."""
    wanted = set(SCENARIOS if only is None else only)
    unknown = wanted - set(SCENARIOS)
    if unknown:
        raise ValueError(f"unknown scenario(s) {sorted(unknown)}; scenarios are {', '.join(SCENARIOS)}")
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sizes = QUICK if quick else FULL
    started = time.perf_counter()
    names = [name for name in SCENARIOS if name in wanted]
    header = _header()
    print("\n".join(header))
    results = []
    with_png = True
    with cw.trace() as whole:
        for index, name in enumerate(names, 1):
            result = SCENARIOS[name](sizes)
            print(f"\n[{index}/{len(names)}] {result.title}")
            for key, value in result.figures.items():
                print(f"  {_format_figure(key, value)}")
            print(f"  -> {result.finding}")
            paths = [result.trace.svg(title=result.title).save(out / f"{name}.svg")]
            with_png = _draw_png(result, out / f"{name}.png")
            if with_png:
                paths.append(out / f"{name}.png")
            results.append(dataclasses.replace(result, paths=tuple(paths)))
    perfetto = whole.export(out / "tour.json")
    seconds = time.perf_counter() - started
    page = _page(out, results, header, seconds)
    print()
    print(f"Every scenario's figures, finding and timeline on one page: {page} (open it in a browser)")
    print("Timelines, one picture per scenario" + ("" if with_png else " (SVG; with matplotlib, PNG too)") + ":")
    print("\n".join(f"  {path}" for result in results for path in result.paths))
    print(f"Whole tour as a Perfetto trace: {perfetto} (open it in https://ui.perfetto.dev)")
    print(f"The tour took {seconds:.1f} s.")
    return results


__all__ = ["FULL", "QUICK", "SCENARIOS", "ScenarioResult", "Sizes", "run"]
