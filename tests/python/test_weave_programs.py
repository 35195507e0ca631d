"""Random programs under cw.weave() give the results of the same program on one stream: Hypothesis draws
operations over a few arrays (two of them overlapping views of one buffer), arrays made and dropped inside
the block, and host reads; each runs under the race sanitizer and, on the simulator, in a schedule drawn
from a seed, as late as CUDA allows."""

from __future__ import annotations

import contextlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cuweave as cw

OPERATIONS = ("scale", "add", "axpy", "copy", "fill", "new", "drop", "read")


@st.composite
def programs(draw):
    length = draw(st.integers(1, 300))
    offsets = (draw(st.integers(0, length)), draw(st.integers(0, length)))
    steps = draw(st.lists(st.tuples(st.sampled_from(OPERATIONS), st.integers(0, 1 << 16), st.integers(0, 1 << 16),
                                    st.integers(0, 1 << 16), st.sampled_from((-1.0, 0.5, 2.0, 3.0))),
                          min_size=1, max_size=40))
    return length, offsets, steps, draw(st.integers(0, 10_000)), draw(st.integers(1, 5))


class Operands:
    """The program's arrays: on the device, and the NumPy model of each (views where the device has views)."""

    def __init__(self, length: int, offsets: tuple[int, int]) -> None:
        rng = np.random.default_rng(length)
        self.length = length
        shared = rng.integers(-8, 8, 2 * length).astype(np.float32)
        self.model_shared = shared.copy()
        self.device_shared = cw.to_device(shared)
        self.models = [rng.integers(-8, 8, length).astype(np.float32) for _ in range(3)]
        self.arrays = [cw.to_device(m) for m in self.models]
        self.where: list[tuple[int, int]] = [(i, 0) for i in range(3)]  # (buffer, offset): buffer -1 is shared
        for offset in offsets:
            self.models.append(self.model_shared[offset : offset + length])
            self.arrays.append(self.device_shared[offset : offset + length])
            self.where.append((-1, offset))

    def overlap_unequal(self, i: int, j: int) -> bool:
        """Two operands that share some bytes without being the same elements (no elementwise op may mix them)."""
        (bi, oi), (bj, oj) = self.where[i], self.where[j]
        return bi == bj and oi != oj and abs(oi - oj) < self.length

    def add(self, array: cw.DeviceArray, model: np.ndarray) -> None:
        self.arrays.append(array)
        self.models.append(model)
        self.where.append((len(self.where) + 100, 0))


def run(program, *, woven: bool) -> tuple[list[np.ndarray], list[np.ndarray], Operands]:
    length, offsets, steps, _, streams = program
    ops = Operands(length, offsets)
    reads: list[np.ndarray] = []
    expected_reads: list[np.ndarray] = []
    with cw.weave(streams=streams) if woven else contextlib.nullcontext():
        for name, a, b, c, alpha in steps:
            live = [i for i, array in enumerate(ops.arrays) if array is not None]
            x, y, z = live[a % len(live)], live[b % len(live)], live[c % len(live)]
            if name == "drop":
                if x >= 5:  # a made one
                    ops.arrays[x] = None
                continue
            if name == "read":
                reads.append(ops.arrays[x].to_numpy())
                expected_reads.append(ops.models[x].copy())
                continue
            if name in ("add", "axpy", "copy") and (ops.overlap_unequal(x, y) or ops.overlap_unequal(x, z)
                                                     or ops.overlap_unequal(y, z)):
                continue  # an elementwise kernel over partly overlapping input and output has no sequential meaning
            if name == "scale":
                cw.ops.scale(ops.arrays[x], alpha, out=ops.arrays[x])
                ops.models[x][...] = ops.models[x] * np.float32(alpha)
            elif name == "add":
                cw.ops.add(ops.arrays[x], ops.arrays[y], out=ops.arrays[z])
                ops.models[z][...] = ops.models[x] + ops.models[y]
            elif name == "axpy":
                cw.ops.axpy(alpha, ops.arrays[x], ops.arrays[y], out=ops.arrays[y])
                ops.models[y][...] = np.float32(alpha) * ops.models[x] + ops.models[y]
            elif name == "copy":
                cw.ops.copy(ops.arrays[x], ops.arrays[y])
                ops.models[x][...] = ops.models[y]
            elif name == "fill":
                cw.ops.fill(ops.arrays[x], alpha)
                ops.models[x][...] = np.float32(alpha)
            elif name == "new":
                ops.add(cw.ops.add(ops.arrays[x], alpha), ops.models[x] + np.float32(alpha))
    return reads, expected_reads, ops


@contextlib.contextmanager
def explored_and_sanitized(seed: int):
    """Under the race sanitizer, and on the simulator in the schedule the seed draws."""
    with cw.sim.explore(seed) if cw.backend() == "sim" else contextlib.nullcontext(), cw.sanitize():
        yield


@settings(max_examples=80, deadline=None)
@given(programs())
def test_a_random_program_woven_gives_what_it_gives_on_one_stream(program):
    with explored_and_sanitized(program[3]):
        reads, expected_reads, ops = run(program, woven=True)
        plain_reads, _, plain = run(program, woven=False)
        for got, plain_got, want in zip(reads, plain_reads, expected_reads):
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(plain_got, want)
        np.testing.assert_array_equal(ops.device_shared.to_numpy(), ops.model_shared)
        np.testing.assert_array_equal(plain.device_shared.to_numpy(), ops.model_shared)
        for array, plain_array, model in zip(ops.arrays, plain.arrays, ops.models):
            if array is not None:
                np.testing.assert_array_equal(array.to_numpy(), model)
                np.testing.assert_array_equal(plain_array.to_numpy(), model)


# Stepped views of one buffer (x[::2] beside x[1::2], x[::4] inside x[::2], thirds across both): the weave and the
# sanitizer see their elements, as ranges up to 64 runs of bytes and as one stepped access past that.
def stepped_views(half: int) -> list[slice]:
    return [slice(0, 2 * half, 2), slice(1, 2 * half, 2), slice(0, 2 * half, 4), slice(2, 2 * half, 4),
            slice(0, half), slice(half, 2 * half), slice(1, 2 * half, 3)]


@st.composite
def stepped_programs(draw):
    half = draw(st.sampled_from((8, 40, 100, 300)))
    count = len(stepped_views(half))
    steps = draw(st.lists(st.tuples(st.sampled_from(("put", "move", "scale", "read")), st.integers(0, count - 1),
                                    st.integers(0, count - 1), st.sampled_from((-1.0, 0.5, 2.0, 3.0))),
                          min_size=1, max_size=30))
    return half, steps, draw(st.integers(0, 10_000)), draw(st.integers(1, 4))


def run_stepped(program, *, woven: bool) -> tuple[list[np.ndarray], list[np.ndarray], cw.DeviceArray, np.ndarray]:
    half, steps, _, streams = program
    model = np.arange(2 * half, dtype=np.float32)
    buffer = cw.to_device(model)
    views = stepped_views(half)
    reads: list[np.ndarray] = []
    expected: list[np.ndarray] = []
    with cw.weave(streams=streams) if woven else contextlib.nullcontext():
        for name, a, b, alpha in steps:
            target, source = views[a], views[b]
            if name == "put":  # from NumPy, through a contiguous copy of the view
                values = np.full(len(model[target]), alpha, np.float32) + np.arange(len(model[target]), dtype=np.float32)
                cw.copy_async(buffer[target], values)
                model[target] = values
            elif name == "move":
                if len(model[target]) != len(model[source]) or np.shares_memory(model[target], model[source]):
                    continue  # a copy between views that share bytes has no defined result
                cw.copy_async(buffer[target], buffer[source])
                model[target] = model[source]
            elif name == "scale":
                if target.step != 1:
                    continue  # the built-in kernels take contiguous views
                cw.ops.scale(buffer[target], alpha, out=buffer[target])
                model[target] *= np.float32(alpha)
            else:
                reads.append(buffer[target].to_numpy())
                expected.append(model[target].copy())
    return reads, expected, buffer, model


@settings(max_examples=60, deadline=None)
@given(stepped_programs())
def test_a_random_program_over_stepped_views_woven_gives_what_numpy_gives(program):
    with explored_and_sanitized(program[2]):
        for woven in (True, False):
            reads, expected, buffer, model = run_stepped(program, woven=woven)
            for got, want in zip(reads, expected):
                np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(buffer.to_numpy(), model)
