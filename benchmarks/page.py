"""Writes the documentation's benchmark page from the JSON one GPU run of the benchmarks wrote.

    python benchmarks/page.py benchmarks/results/h200 docs/benchmarks.md

RESULTS holds what ``tools/gpu-check`` leaves in its output folder: bench.json (``benchmarks/run.py --json``),
and where present bench-chunked.json, bench-weave.json, bench-sanitizer.json, bench-tracing.json and
bench-torch-tools.json; bench-multi-gpu.json (``benchmarks/multi_gpu.py --json`` on two GPUs),
bench-sm-partitions.json, bench-dependent-launch.json and bench-batched-copies.json may each come from a run of its own, whose machine and date
their sections name. The page names the one run's machine and date once; every figure on it comes from those files.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics

PEERS = (("raw", "raw CUDA"), ("torch", "PyTorch"), ("cupy", "CuPy"))


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    magnitude = abs(value)
    if 0 < magnitude < 0.01:
        return f"{value:.3g}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


def _load(results: pathlib.Path, name: str) -> dict | None:
    path = results / name
    return json.loads(path.read_text()) if path.exists() else None


def _ratio(row: dict, value: float | None) -> str:
    """cuweave over `value`, said so that below 1 favours cuweave for costs and above 1 for rates."""
    cuweave = row["values"].get("cuweave")
    if cuweave is None or not value:
        return "-"
    return _number(cuweave / value)


def _best_peer(row: dict) -> float | None:
    peers = [row["values"][name] for name in ("torch", "cupy") if name in row["values"]]
    if not peers:
        return None
    return max(peers) if row["higher_is_better"] else min(peers)


def _per_call_section(bench: dict) -> list[str]:
    lines = ["## Per-call costs and copies", "",
             "`python benchmarks/run.py`: each row is measured for cuweave, raw CUDA (a C++ program run beforehand) and "
             "the peers in the same run. Costs (µs, ms) are better lower, rates (GB/s, ratios) higher; a ratio below 1 "
             "favours cuweave for costs, above 1 for rates.", ""]
    header = ["row", "unit", "cuweave", "raw CUDA", "PyTorch", "CuPy", "cuweave / raw", "cuweave / best peer", "target"]
    rows = []
    for name, row in bench["rows"].items():
        values = row["values"]
        target = row.get("target")
        target_text = "-" if target is None else ("≥ " if row["higher_is_better"] else "≤ ") + f"{target:g}"
        rows.append([f"`{name}`", row["unit"], _number(values.get("cuweave"))]
                    + [_number(values.get(key)) for key, _ in PEERS]
                    + [_ratio(row, values.get("raw")), _ratio(row, _best_peer(row)), target_text])
    lines += _table(header, rows)
    extras = []
    for name, row in bench["rows"].items():
        known = {"cuweave"} | {key for key, _ in PEERS}
        more = {key: value for key, value in row["values"].items() if key not in known and value is not None}
        if more:
            extras.append(f"- `{name}` ({row['title']}): "
                          + "; ".join(f"{key} {_number(value)}" for key, value in more.items()))
    if extras:
        lines += ["Measured in turn with cuweave, in the same process (the same moment and process state):", ""]
        lines += extras + [""]
    return lines


def _chunked_section(chunked: dict) -> list[str]:
    stages = chunked["stages_ms"]
    lines = ["## One buffer in chunks: copy in, compute, copy out", "",
             f"`python benchmarks/chunked_overlap.py`: a 256 MB buffer whose three stages take "
             f"{_number(stages['h2d'])} ms (host to device), {_number(stages['kernel'])} ms (kernel) and "
             f"{_number(stages['d2h'])} ms (device to host) whole, split into n chunks whose stages overlap. "
             "Efficiency is the ideal pipeline's time over the measured one (1 is ideal).", ""]
    rows = [[str(row["n"]), _number(row["ideal_ms"]), _number(row["by_hand_ms"]), _number(row["weave_ms"]),
             _number(row["prefetch_ms"]), _number(row["by_hand_efficiency"]), _number(row["weave_efficiency"]),
             _number(row["prefetch_efficiency"])] for row in chunked["rows"]]
    return lines + _table(["chunks", "ideal ms", "by hand ms", "woven ms", "prefetched ms", "by hand efficiency",
                           "woven efficiency", "prefetched efficiency"], rows)


def _weave_section(weave: dict) -> list[str]:
    lines = ["## The weave", "",
             "`python benchmarks/weave.py`: medians over the rounds. The `op_` rows are host µs per operation "
             "issued plainly, inside `cw.weave()` and under the sanitizer (a built-in chained in place, four "
             "chains in turn, a new array per step, a compiled kernel, a PyTorch operator); the wide DAGs are 8 "
             "independent chains of 20 spin kernels of 20 µs, wall ms, woven, by hand on 8 streams and on one; "
             "`dag_replay_us` replays a captured fork/join, µs.", ""]
    sides = ["plain", "by_hand", "one_stream", "woven", "sanitized"]
    rows = []
    for name, measured in weave.items():
        now = measured["now"]
        rows.append([f"`{name}`"] + [_number(now.get(side)) for side in sides])
    return lines + _table(["row", "plain", "by hand", "one stream", "woven", "sanitized"], rows)


def _sanitizer_section(sanitizer: dict) -> list[str]:
    lines = ["## The stream-race sanitizer", "",
             "`python benchmarks/sanitizer.py`: best of the rounds, µs per call, with the sanitizer off and on.", ""]
    rows = [[f"`{name}`", _number(row["best"]["off"]), _number(row["best"]["sanitized"]),
             _number(row["best"]["overhead_per_operation_us"])] for name, row in sanitizer["rows"].items()]
    lines += _table(["row", "off", "sanitized", "added per operation"], rows)
    rows = [[name, str(row["tracked_ranges"]), _number(row["off"]), _number(row["sanitized"])]
            for name, row in sanitizer["growth_us"].items()]
    lines += ["A built-in operation while other arrays are alive (µs):", ""]
    lines += _table(["other live arrays", "ranges tracked", "off", "sanitized"], rows)
    rows = [[f"{size} MB", _number(row["off_ms"]), _number(row["sanitized_ms"])]
            for size, row in sanitizer["pinned_copy_ms"].items()]
    lines += ["A copy from pinned memory and its wait, with checksums of the host memory when sanitized (ms):", ""]
    return lines + _table(["size", "off", "sanitized"], rows)


def _tracing_section(tracing: dict) -> list[str]:
    lines = ["## Traces", "",
             "`python benchmarks/tracing.py`: best of the rounds, µs per call, with no trace open and inside "
             "`cuweave.trace()`.", ""]
    rows = [[f"`{name}`", _number(row["raw"]), _number(row["best"]["now"]), _number(row["best"]["traced"]),
             _number(row["best"]["overhead_per_operation_us"])] for name, row in tracing["rows"].items()]
    return lines + _table(["row", "raw CUDA", "no trace open", "traced", "added per operation"], rows)


def _torch_tools_section(tools: dict) -> list[str]:
    steps = tools["steps"]
    per_step = {side: statistics.median(seconds) * 1000 / steps for side, seconds in tools["seconds"].items()}
    plain = per_step["plain"]
    csan_added = per_step["CSAN"] - plain
    lines = ["## The tools on a PyTorch training loop", "",
             f"`python benchmarks/torch_tools.py`: an MLP trained for {steps} steps with its batches copied on a "
             f"second stream, each side a fresh process, medians of {tools['rounds']} rounds. CSAN is PyTorch's own "
             "sanitizer (`TORCH_CUDA_SANITIZER=1`).", ""]
    rows = [[side, _number(ms), _number(ms - plain), "-" if side == "plain" else _number((ms - plain) / csan_added)]
            for side, ms in per_step.items()]
    return lines + _table(["side", "ms per step", "added ms per step", "added / CSAN's"], rows)


def render(results: pathlib.Path) -> str:
    bench = _load(results, "bench.json")
    if bench is None:
        raise SystemExit(f"{results / 'bench.json'} is missing: run benchmarks/run.py --json there first")
    machine = bench["machine"]
    lines = ["# Benchmarks", "",
             f"Measured on an **{machine['gpu']}** ({machine['multiprocessor_count']} multiprocessors; driver "
             f"{machine['driver_version']}, runtime {machine['runtime_version']}) on "
             f"{machine['time_utc'][:10]}, with cuweave {machine['cuweave']}, NumPy {machine['numpy']}, PyTorch "
             f"{machine.get('torch', '-')}, CuPy {machine.get('cupy', '-')} and Python {machine['python']}, all in "
             "one run. The figures come from the JSON files in `benchmarks/results/`; `python benchmarks/page.py` "
             "rebuilds this page from them. Each benchmark program prints the same tables with more detail.", ""]
    lines += _per_call_section(bench)
    sections = (("bench-chunked.json", _chunked_section), ("bench-weave.json", _weave_section),
                ("bench-sanitizer.json", _sanitizer_section), ("bench-tracing.json", _tracing_section),
                ("bench-torch-tools.json", _torch_tools_section))
    for name, section in sections:
        data = _load(results, name)
        if data is not None:
            lines += section(data)
    multi_gpu = _load(results, "bench-multi-gpu.json")
    lines += _multi_gpu_section(multi_gpu) if multi_gpu else [
        "## Several GPUs", "",
        "`python benchmarks/multi_gpu.py` measures peer copies and all-reduce beside raw CUDA and "
        "torch.distributed; it needs two GPUs, and its figures are not part of this run.", ""]
    for name, section in (("bench-sm-partitions.json", _sm_partitions_section),
                          ("bench-dependent-launch.json", _dependent_launch_section),
                          ("bench-batched-copies.json", _batched_copies_section)):
        data = _load(results, name)
        if data is not None:
            lines += section(data)
    return "\n".join(lines).rstrip("\n") + "\n"


def _opening(title: str, text: str) -> list[str]:
    return [f"## {title}", "", text, ""]


def _run_of_its_own(machine: dict, devices: int = 1) -> str:
    return (f"on {f'{devices} × ' if devices > 1 else ''}{machine['gpu']}, driver {machine['driver_version']}, "
            f"{machine['time_utc'][:10]}, in a run of its own")


def _sm_partitions_section(data: dict) -> list[str]:
    settings = data["settings"]
    lines = _opening("SM partitions",
                     f"`python benchmarks/sm_partitions.py` {_run_of_its_own(data['machine'], settings['devices'])}; "
                     f"medians of {settings['reps']}. A {settings['job_us']:.0f} µs job queued behind a kernel that "
                     f"fills every SM ({settings['waves']} waves of {settings['block_ms']:.0f} ms blocks): on a stream "
                     "of normal priority; of high priority; as a graph captured on a high-priority stream and replayed "
                     "on a normal one, without and with `Graph.node_priorities`; and on a partition of "
                     f"{settings['reserve_sms']} SMs that the filler (on the rest) leaves free. µs from queuing the "
                     "job to its end, better lower.")
    lines += _table(["job's stream", "latency (µs)"],
                    [[way, _number(us)] for way, us in data["job_latency_us"].items()])
    overlap = data.get("all_reduce_overlap_efficiency")
    if overlap:
        ways = list(overlap)
        lines += [f"An all-reduce of {settings['mb']} MB per rank on {settings['devices']} GPUs beside compute that "
                  "fills every SM it may use: on streams of the whole device, and with the all-reduce on a partition "
                  f"of {settings['reserve_sms']} SMs and the compute on the rest; with one process per rank, and with "
                  "one process driving every GPU. Overlap efficiency as above, better higher.", ""]
        lines += _table(["streams", *ways], [[streams, *(_number(overlap[way][streams]) for way in ways)]
                                             for streams in overlap[ways[0]]])
    return lines


def _dependent_launch_section(data: dict) -> list[str]:
    settings, us = data["settings"], data["us_per_kernel"]
    lines = _opening("Programmatic dependent launch",
                     f"`python benchmarks/dependent_launch.py` {_run_of_its_own(data['machine'])}; medians of "
                     f"{settings['reps']}. A chain of {settings['kernels']} dependent kernels over {settings['n']} "
                     "floats, launched plainly or as programmatic dependents (`Kernel.programmatic`), eagerly and "
                     "replayed as one graph: wall µs per kernel, the final synchronize included, better lower.")
    rows = []
    for way in ("eager", "graph"):
        plain, programmatic = us[f"{way}, plain"], us[f"{way}, programmatic"]
        rows.append([way, _number(plain), _number(programmatic), _number(programmatic / plain)])
    return lines + _table(["launched", "plain (µs)", "programmatic (µs)", "programmatic / plain"], rows)


def _batched_copies_section(data: dict) -> list[str]:
    lines = _opening("Batched copies",
                     f"`python benchmarks/batched_copies.py` {_run_of_its_own(data['machine'])}; medians of "
                     f"{data['settings']['reps']}. A batch of NumPy arrays copied to the device with one "
                     "`cw.to_device` call per array, and in one `cw.to_device_batch` call (what `cw.prefetch` does "
                     "with a tuple or dict batch): host µs to queue the batch (better lower), and GB/s from queuing "
                     "it to the stream finishing (better higher).")
    rows = []
    figures = data["figures"]
    for key in figures:
        batch, memory, way = key.split(", ")
        if way != "batched":
            continue
        each, one = figures[f"{batch}, {memory}, one call each"], figures[key]
        rows.append([batch, memory, _number(each["host_us"]), _number(one["host_us"]), _number(each["gbps"]),
                     _number(one["gbps"])])
    return lines + _table(["arrays", "memory", "host µs, one call each", "host µs, batched", "GB/s, one call each",
                           "GB/s, batched"], rows)


def _unit(row: str) -> str:
    return "GB/s" if "_gbps" in row else "µs" if "_us" in row else "ratio"


def _multi_gpu_section(multi: dict) -> list[str]:
    devices = multi["devices"]
    machine = multi.get("machine")
    when = f" on {machine['time_utc'][:10]}, driver {machine['driver_version']}" if machine else ""
    lines = ["## Several GPUs", "",
             f"`python benchmarks/multi_gpu.py` on {len(devices)} × {devices[0]} ({multi.get('route', '-')} route "
             f"between them){when}, in a run of its own: 256 MB peer copies and all-reduce beside raw CUDA and "
             "torch.distributed (one process per GPU, NCCL underneath both). The overlap efficiency is (all-reduce "
             "alone + compute alone − both) / the shorter of the two: 1 when the shorter is hidden entirely, 0 when "
             "they run one after the other.", ""]
    rows = []
    for name, row in multi["rows"].items():
        values = row["values"]
        reference = "raw" if "raw" in values else "torch"
        target = f"≥ {row['target']}× {dict(PEERS)[reference]}" if row.get("target") else "-"
        rows.append([f"`{name}`", _unit(name), _number(values.get("cuweave")), _number(values.get("raw")),
                     _number(values.get("torch")), f"{_number(row.get('ratio'))} ({dict(PEERS)[reference]})", target])
    return lines + _table(["row", "unit", "cuweave", "raw CUDA", "PyTorch", "cuweave / reference", "target"], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=pathlib.Path, help="the folder of JSON files one GPU run wrote")
    parser.add_argument("page", type=pathlib.Path, help="the Markdown page to write")
    args = parser.parse_args(argv)
    args.page.write_text(render(args.results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
