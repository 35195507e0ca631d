"""Large copies between ordinary NumPy memory and the device go through the staging ring and keep
CUDA's semantics: exact bytes, host-to-device returns once the source was read, device-to-host into
ordinary memory returns complete, and a fast producer waits for slots instead of overwriting them."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import cuweave as cw
from _support import Gate

MIB = 1 << 20


def _slot_bytes() -> int:
    return cw.staging_stats()["slot_bytes"]


def _random(nbytes: int, dtype, seed: int) -> np.ndarray:
    raw = np.random.default_rng(seed).integers(0, 256, size=nbytes, dtype=np.uint8)
    return raw.view(dtype)


SIZES = [
    MIB - 8,  # just under the staging threshold: one direct copy
    MIB,  # the threshold itself
    MIB + 8,
    "slot - 8",
    "slot",
    "slot + 8",
    "3 slots + 123456",
]


def _resolve(size) -> int:
    if isinstance(size, int):
        return size
    slot = _slot_bytes()
    return {"slot - 8": slot - 8, "slot": slot, "slot + 8": slot + 8, "3 slots + 123456": 3 * slot + 123456}[size]


@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("dtype", [np.uint8, np.float64, np.complex64, np.int16])
def test_bytes_round_trip_through_every_path(stream, size, dtype):
    nbytes = _resolve(size) // np.dtype(dtype).itemsize * np.dtype(dtype).itemsize
    host = _random(nbytes, dtype, seed=nbytes)
    device = cw.to_device(host, stream=stream)
    assert np.array_equal(device.to_numpy(stream=stream).view(np.uint8), host.view(np.uint8))
    into = np.empty_like(host)
    cw.copy_async(into, device, stream=stream)  # into ordinary memory: complete on return
    assert np.array_equal(into.view(np.uint8), host.view(np.uint8))
    pinned = device.to_numpy(stream=stream, pinned=True)
    assert cw.is_pinned(pinned)
    assert np.array_equal(pinned.view(np.uint8), host.view(np.uint8))


def test_host_writes_after_a_staged_copy_returns_do_not_reach_the_device(stream):
    host = np.full(3 * _slot_bytes() // 8 + 17, 1.0)
    device = cw.to_device(host, stream=stream)
    host[:] = 2.0  # the copy has read its source already, as with CUDA's own pageable copies
    assert (device.to_numpy(stream=stream) == 1.0).all()


def test_a_fast_producer_waits_for_slots_instead_of_overwriting_them(stream):
    slots = cw.staging_stats()["slots"]
    slot = _slot_bytes()
    waits_before = cw.staging_stats()["waits"]
    sources = [np.full(slot // 4, float(i), np.float32) for i in range(slots + 3)]
    producer_done = threading.Event()

    def open_once_the_producer_waits():
        # The stream's copies are held, so no slot comes free: the producer must wait for one.
        while cw.staging_stats()["waits"] == waits_before and not producer_done.is_set():
            producer_done.wait(0.001)
        gate.open()

    with Gate(stream) as gate:  # the copy engine's queue is held behind this
        watcher = threading.Thread(target=open_once_the_producer_waits)
        watcher.start()
        try:
            devices = [cw.to_device(s, stream=stream) for s in sources]  # more chunks than slots
        finally:
            producer_done.set()
            watcher.join()
    assert cw.staging_stats()["waits"] > waits_before, "the producer never had to wait for a slot"
    for i, device in enumerate(devices):
        assert (device.to_numpy(stream=stream) == float(i)).all(), f"batch {i} was overwritten in staging"


def test_copies_from_two_threads_share_the_ring(rng):
    import threading

    errors = []

    def worker(seed):
        s = cw.Stream()
        try:
            for round_ in range(3):
                host = _random(2 * _slot_bytes() + 999 * seed, np.uint8, seed * 10 + round_)
                if not np.array_equal(cw.to_device(host, stream=s).to_numpy(stream=s), host):
                    errors.append((seed, round_))
        finally:
            s.synchronize()
            s.close()

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_non_contiguous_host_input_is_refused_not_truncated(stream):
    host = np.arange(4 * MIB, dtype=np.float32)[::2]
    with pytest.raises(ValueError, match="ascontiguousarray"):
        cw.to_device(host, stream=stream)


def test_pinned_and_out_together_are_refused(stream):
    device = cw.zeros(16, np.float32, stream=stream)
    with pytest.raises(ValueError, match="out"):
        device.to_numpy(stream=stream, out=np.empty(16, np.float32), pinned=True)


def test_staging_stats_describe_the_ring():
    stats = cw.staging_stats()
    assert stats["slots"] >= 2 and stats["slot_bytes"] >= MIB
    assert stats["acquisitions"] >= stats["waits"] >= 0


def _check_tuning(tuning: dict, pool_threads: int) -> None:
    """What a direction's copy-thread tuner reports is consistent (Note [Copy threads chosen as transfers run])."""
    counts = [c["threads"] for c in tuning["candidates"]]
    assert counts == sorted(set(counts)) and counts[-1] == pool_threads and 1 <= counts[0], counts
    assert tuning["threads"] in counts


def _staged_until_settled(direction: str, copy_once) -> dict:
    # Segments of 64 MiB go round the candidates, a few samples each, before the tuner chooses; earlier
    # tests' large copies count too, so copy until it has.
    for _ in range(12):
        if cw.staging_stats()[direction]["settled"]:
            break
        copy_once()
    return cw.staging_stats()[direction]


@pytest.mark.parametrize("direction", ["to_device", "to_host"])
def test_staged_copies_choose_their_copy_threads_by_measuring_them(stream, direction):
    nbytes = 256 * MIB
    host = _random(nbytes, np.uint8, seed=7)
    device = cw.zeros(nbytes, np.uint8, stream=stream)
    cw.copy_async(device, host, stream=stream)
    back = np.empty_like(host)

    def copy_once():
        if direction == "to_device":
            cw.copy_async(device, host, stream=stream)
        else:
            device.to_numpy(stream=stream, out=back)
        stream.synchronize()

    before = sum(c["samples"] for c in cw.staging_stats()[direction]["candidates"])
    tuning = _staged_until_settled(direction, copy_once)
    pool_threads = cw.staging_stats()["copy_threads"]
    _check_tuning(tuning, pool_threads)
    assert tuning["settled"], tuning
    candidates = tuning["candidates"]
    assert all(c["samples"] >= 3 and c["gb_per_s"] > 0 for c in candidates), candidates
    assert sum(c["samples"] for c in candidates) > before or before >= 3 * len(candidates)
    chosen = next(c for c in candidates if c["threads"] == tuning["threads"])
    # Fewer threads unless more are clearly (2%) faster: no count above the choice beats it by more.
    assert all(c["gb_per_s"] <= chosen["gb_per_s"] * 1.02 for c in candidates if c["threads"] > chosen["threads"])
    copy_once()  # the chosen count copies every byte
    if direction == "to_device":
        np.testing.assert_array_equal(device.to_numpy(stream=stream), host)
    else:
        np.testing.assert_array_equal(back, host)


def test_staged_copies_of_a_few_chunks_use_the_chosen_count_without_measuring(stream):
    # A copy shorter than a segment (64 MiB) has nothing to measure: it adds no samples.
    host = _random(2 * _slot_bytes() + 5, np.uint8, seed=8)
    device = cw.zeros(host.size, np.uint8, stream=stream)
    before = [c["samples"] for c in cw.staging_stats()["to_device"]["candidates"]]
    for _ in range(3):
        cw.copy_async(device, host, stream=stream)
    stream.synchronize()
    assert [c["samples"] for c in cw.staging_stats()["to_device"]["candidates"]] == before
    np.testing.assert_array_equal(device.to_numpy(stream=stream), host)


def test_results_of_a_recurring_size_move_to_pinned_memory(stream):
    # A size class (pinned pool classes: 28 MiB here) no other test uses; the staged-copy tests above use
    # multiples of the slot size, 16 MiB by default (classes 40 and 56 MiB).
    device = cw.zeros((27 << 20) // 4 + 3, np.float32, stream=stream)
    first = device.to_numpy(stream=stream)
    assert not cw.is_pinned(first), "a one-off result should not pay for new pinned memory"
    second = device.to_numpy(stream=stream)
    assert cw.is_pinned(second), "the second result of a size class should be pinned"
    ordinary = device.to_numpy(stream=stream, pinned=False)
    assert not cw.is_pinned(ordinary)
    del second
    cw.collect()
    again = device.to_numpy(stream=stream)  # the cached block is reused
    assert cw.is_pinned(again)
    for result in (first, ordinary, again):
        assert not result.any()


def test_small_results_stay_in_ordinary_memory(stream):
    device = cw.zeros(1000, np.float64, stream=stream)
    assert not any(cw.is_pinned(device.to_numpy(stream=stream)) for _ in range(3))
