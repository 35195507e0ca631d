"""How many event records and stream waits cw.weave() queues for a DAG, beside two published ways of putting
a DAG on streams (Note [Weaving]):

- Taskflow's cudaFlow round-robin optimizer: levels by breadth-first search (a node's level is one more
  than its deepest predecessor's), the nodes of a level spread round-robin over the streams; an event after
  every node with a successor on another stream, and a wait for every such edge.
- CUDASTF's stream context: tasks in submission order, each on the next stream of a pool; an event after
  every task, and a wait for each dependency on another stream unless that stream already waited for a
  later event of the same stream (its event-list pruning, modelled here with vector clocks).

All three are counted with the same block semantics: work from before the block is on the current stream
(stream 0), which one record marks when another stream needs it, and leaving the block stream 0 waits for
every stream whose last work it does not already follow. The DAG is what the reads and writes imply
(RAW, WAR, WAW), reduced transitively. Waits are what the GPU enforces (in a graph, each is an edge);
records are host bookkeeping (no node in a graph). The weave gets the fewest waits on every DAG, and never
more records than CUDASTF's one per task."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import cuweave as cw

N = 256
STREAMS = 4
WEAVING_PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "concepts" / "weaving.md"


@pytest.fixture(autouse=True)
def _sanitized():
    with cw.sanitize():
        yield


# A program is a list of (name, reads, writes) over named arrays; each runs as a cuweave operation.
def run_woven(program: list[tuple[str, tuple[str, ...], tuple[str, ...]]]) -> cw.WeaveCounts:
    names = sorted({a for _, reads, writes in program for a in reads + writes})
    arrays = {a: cw.to_device(np.full(N, i + 1, np.float32)) for i, a in enumerate(names)}
    with cw.weave(streams=STREAMS) as w:
        for _, reads, writes in program:
            (out,) = writes
            if not reads:
                cw.ops.fill(arrays[out], 1.0)
            elif len(reads) == 1 and reads[0] == out:
                cw.ops.scale(arrays[out], 1.0, out=arrays[out])
            elif len(reads) == 1:
                cw.ops.add(arrays[reads[0]], 1.0, out=arrays[out])
            else:
                total = arrays[reads[0]]
                for extra in reads[1:]:
                    cw.ops.add(total, arrays[extra], out=arrays[out])
                    total = arrays[out]
    return w.counts


def dependencies(program) -> list[set[int]]:
    """The transitively reduced predecessors of each operation (RAW, WAR, WAW); -1: work before the block."""
    last_write: dict[str, int] = {}
    reads_since: dict[str, list[int]] = {}
    direct: list[set[int]] = []
    for i, (_, reads, writes) in enumerate(program):
        deps = {last_write.get(a, -1) for a in reads}
        for a in writes:
            deps.add(last_write.get(a, -1))
            deps.update(reads_since.get(a, []))
        direct.append(deps)
        for a in reads:
            reads_since.setdefault(a, []).append(i)
        for a in writes:
            last_write[a] = i
            reads_since[a] = []
    ancestors: list[set[int]] = []
    for deps in direct:
        ancestors.append(set(deps) | {x for d in deps if d >= 0 for x in ancestors[d]})
    reduced = []
    for deps in direct:
        implied = {x for d in deps if d >= 0 for x in ancestors[d]}
        reduced.append({d for d in deps if d not in implied})
    return reduced


def count_schedule(program, streams_of: list[int], record_every_task: bool) -> tuple[int, int]:
    """Records and waits for operations placed on `streams_of`, waiting for every reduced dependency on another
    stream that the stream's vector clock does not cover; -1 (the block's entry) is stream 0's work before it."""
    deps = dependencies(program)
    clocks = [[0] * STREAMS for _ in range(STREAMS)]
    position: list[tuple[int, int]] = []  # (stream, tick) of each operation
    ticks = [1] + [0] * (STREAMS - 1)  # stream 0's tick 1 is the entry
    sealed: set[tuple[int, int]] = set()
    snapshot: dict[tuple[int, int], list[int]] = {}
    records = waits = 0
    for i, s in enumerate(streams_of):
        clocks[s][s] = ticks[s]
        for d in sorted(deps[i]):
            ds, dt = (0, 1) if d < 0 else position[d]
            if ds == s or clocks[s][ds] >= dt:
                continue
            if (ds, dt) not in sealed:
                sealed.add((ds, dt))
                records += 1
            waits += 1
            clocks[s] = [max(a, b) for a, b in zip(clocks[s], snapshot.get((ds, dt), [0] * STREAMS))]
            clocks[s][ds] = max(clocks[s][ds], dt)
        ticks[s] += 1
        clocks[s][s] = ticks[s]
        position.append((s, ticks[s]))
        snapshot[(s, ticks[s])] = list(clocks[s])
        if record_every_task and (s, ticks[s]) not in sealed:
            sealed.add((s, ticks[s]))
            records += 1
    for s in range(1, STREAMS):  # leaving: stream 0 joins the others
        if ticks[s] > 0 and clocks[0][s] < ticks[s]:
            if (s, ticks[s]) not in sealed:
                records += 1
            waits += 1
            clocks[0] = [max(a, b) for a, b in zip(clocks[0], snapshot[(s, ticks[s])])]
    return records, waits


def taskflow_round_robin_by_level(program) -> tuple[int, int]:
    deps = dependencies(program)
    level = []
    for d in deps:
        level.append(1 + max((level[x] for x in d if x >= 0), default=-1))
    seen_in_level: dict[int, int] = {}
    streams_of = []
    for lv in level:
        streams_of.append(seen_in_level.get(lv, 0) % STREAMS)
        seen_in_level[lv] = seen_in_level.get(lv, 0) + 1
    # Taskflow waits on every cross-stream edge (no clock): count those, and its records.
    position = streams_of
    waits = sum(1 for i, d in enumerate(deps) for x in d if (0 if x < 0 else position[x]) != position[i])
    records = len({x for i, d in enumerate(deps) for x in d if (0 if x < 0 else position[x]) != position[i]})
    last = {s: i for i, s in enumerate(streams_of)}
    joins = sum(1 for s, i in last.items() if s != 0)
    return records + joins, waits + joins


def cudastf_round_robin(program) -> tuple[int, int]:
    return count_schedule(program, [i % STREAMS for i in range(len(program))], record_every_task=True)


def sources_dag():  # the fork/join of README and the weaving page
    return [("scale", ("x",), ("p",)), ("add", ("x",), ("q",)), ("add", ("p", "q"), ("r",))]


def diamond():
    return [("A", ("x",), ("a",)), ("B", ("a",), ("b",)), ("C", ("a",), ("c",)), ("D", ("b", "c"), ("d",))]


def chain():
    return [("step", ("x",), ("x",))] * 20


def fan_out():
    return [("A", ("x",), ("a",))] + [(f"B{i}", ("a",), (f"b{i}",)) for i in range(8)]


def random_dag(seed: int = 7, operations: int = 30):
    rng = np.random.default_rng(seed)
    names = [f"v{i}" for i in range(8)]
    program = []
    for _ in range(operations):
        reads = tuple(sorted(set(rng.choice(names, size=rng.integers(0, 3), replace=False).tolist())))
        write = str(rng.choice([n for n in names if n not in reads] or names))
        program.append(("op", reads, (write,)))
    return program


# The weave's counts, each the fewest waits this DAG allows on concurrent streams and, for records, one
# per completion another stream waits for plus the online ones (Note [Weaving]: a stream is sealed before
# it goes on past an operation whose results it leaves as they were, since nothing tells the weave whether
# another stream will read them).
EXPECTED = {
    # the second branch waits for the entry (x), the join for that branch: 2 waits, no fewer with two
    # branches at once; records: the entry, q's completion, and p's, sealed online as the join went on past it
    "sources": (sources_dag, 3, 2),
    # C waits for A, D joins C: 2 waits; records: the entry and B sealed online, A and C waited for
    "diamond": (diamond, 4, 2),
    # one stream, no wait; one record: the entry, sealed online as the chain went on past it
    "chain": (chain, 1, 0),
    # three more streams each wait for A once and are joined at the end: 6 waits; records: A, the three
    # joined tails, and online: the entry and the four readers their streams went on past
    "fan_out": (fan_out, 9, 6),
}


@pytest.mark.parametrize("dag", sorted(EXPECTED))
def test_the_weave_queues_the_fewest_waits_on_each_dag(dag):
    make, records, waits = EXPECTED[dag]
    program = make()
    counts = run_woven(program)
    assert (counts.records, counts.waits) == (records, waits)
    for model in (taskflow_round_robin_by_level, cudastf_round_robin):
        model_records, model_waits = model(program)
        assert counts.waits <= model_waits, model.__name__
    assert counts.records <= cudastf_round_robin(program)[0]


def test_on_a_random_dag_the_weave_waits_no_more_than_taskflow_or_cudastf_and_records_no_more_than_cudastf():
    for seed in range(10):
        program = random_dag(seed)
        counts = run_woven(program)
        taskflow = taskflow_round_robin_by_level(program)
        cudastf = cudastf_round_robin(program)
        assert counts.waits <= taskflow[1] and counts.waits <= cudastf[1], (seed, counts, taskflow, cudastf)
        assert counts.records <= cudastf[0], (seed, counts, cudastf)


def test_the_weaving_pages_table_of_counts_is_what_the_weave_and_the_models_give():
    """The weaving page quotes these counts (operations, then records / waits of the weave, Taskflow's and
    CUDASTF's)."""
    table = [line for line in WEAVING_PAGE.read_text().splitlines() if line.startswith("| ") and " / " in line]
    rows = [("the fork/join above", sources_dag()), ("diamond", diamond()), ("chain", chain()),
            ("fan-out to 8", fan_out()), ("random, 8 arrays", random_dag())]
    for name, program in rows:
        counts = run_woven(program)
        tf, stf = taskflow_round_robin_by_level(program), cudastf_round_robin(program)
        want = (f"| {name} | {len(program)} | {counts.records} / {counts.waits} | {tf[0]} / {tf[1]} | "
                f"{stf[0]} / {stf[1]} |")
        assert want in table, (want, table)
