# Found: no part of cuweave's round was slower: a host-driven loop round drifted between 16 and 21 µs in every
# library alike (H100).
# Cited by: benchmarks/in_turn.py (why a row's libraries take turns within each repetition).
"""Why did cuweave's loop_round_host row read 21.3 us beside CuPy's 15.4 and PyTorch's 16.4 (H100, one lease) when
an earlier lease read 13.4 / 13.5 / 13.1? Each round replays a one-kernel graph and reads a 4-byte counter back.

The variants take one ingredient each, in turn per round of the probe (same process, same moment), so a part that
costs more shows as a difference between rows: the replay + a stream synchronize alone, the read alone (to_numpy
into pinned memory, copy_async + wait, the stream synchronize after the copy), and the peers' rounds.

    python3 tools/probes/host_loop_round_probe.py [--rounds 7]
"""
import argparse
import statistics
import sys


sys.path.insert(0, "benchmarks")
import libraries  # noqa: E402
import loops  # noqa: E402
import timing  # noqa: E402

libraries.load_cuweave()
skipped = libraries.load_peers({})
cw, cupy, torch = libraries.cw, libraries.cupy, libraries.torch
ROUNDS_PER_REP = 2000


def per_round_us(step) -> float:
    timing.per_call_us(step, 50)  # warm-up
    return timing.per_call_us(step, ROUNDS_PER_REP)  # run.py's main() is not run: no call overhead subtracted


def cw_variants() -> dict:
    parts = loops.cw_host_loop()
    kernel, s, left, seen, graph = parts.kernel, parts.stream, parts.left, parts.seen, parts.graph

    def replay_sync():
        graph.replay(s)
        s.synchronize()

    def read_only():
        left.to_numpy(stream=s, out=seen)

    def copy_wait():
        graph.replay(s)
        cw.copy_async(seen, left, stream=s).wait()

    def copy_sync():
        graph.replay(s)
        cw.copy_async(seen, left, stream=s)
        s.synchronize()

    def kernel_copy_sync():
        kernel(1, 1, (left,), stream=s)
        cw.copy_async(seen, left, stream=s)
        s.synchronize()

    def idle_sync():
        s.synchronize()

    return {"cw full round (the row)": loops.cw_loop_round_host_step(), "cw replay + synchronize": replay_sync,
            "cw to_numpy(out=pinned) alone": read_only, "cw replay + copy_async().wait()": copy_wait,
            "cw replay + copy_async + synchronize": copy_sync, "cw launch + copy_async + synchronize": kernel_copy_sync,
            "cw synchronize of an idle stream": idle_sync}


def cupy_variants() -> dict:
    parts = loops.cupy_host_loop()

    def replay_sync():
        parts.graph.launch(parts.stream)
        parts.stream.synchronize()

    return {"cupy full round": loops.cupy_loop_round_host_step(), "cupy replay + synchronize": replay_sync}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    variants = cw_variants()
    if cupy is not None:
        variants.update(cupy_variants())
    times = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, step in variants.items():
            times[name].append(per_round_us(step))
    print(f"{ROUNDS_PER_REP} rounds per repetition, {args.rounds} repetitions in turn; skipped peers: {skipped}")
    for name, values in times.items():
        print(f"{name:42s} median {statistics.median(values):7.2f} us  min {min(values):7.2f}  "
              f"max {max(values):7.2f}")


main()
