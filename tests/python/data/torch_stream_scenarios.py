"""PyTorch programs with and without races between streams, for cuweave's sanitizer and PyTorch's own (CSAN).

    python -m cuweave sanitize torch_stream_scenarios.py NAME
    TORCH_CUDA_SANITIZER=1 python torch_stream_scenarios.py NAME

Most are the scenarios of PyTorch's CSAN tests (test/test_cuda_sanitizer.py, TestEventHandler), which drive
CSAN's event handler with made-up stream, event and tensor ids; here each one is a real program: PyTorch streams,
events and operators. A kernel that reads tensors is a `sum` of each on that stream; one that writes them is a
single `_foreach_mul_` of them all (one operator, as CSAN's kernel with several read-write tensors). The rest
are PyTorch's ordering beyond events: synchronizes, `wait_stream`, and memory the caching allocator hands out
again after `record_stream`. RACES names those with a race, as CSAN's tests say. This file imports no cuweave:
it is a PyTorch-only program. It prints "done" when it ends without a race.
"""

import sys

import torch

STREAMS = 11  # CSAN's scenarios use stream ids 0 to 10
TENSORS = 10


def read(stream, *tensors):
    with torch.cuda.stream(stream):
        for tensor in tensors:
            tensor.sum()


def write(stream, *tensors):
    with torch.cuda.stream(stream):
        torch._foreach_mul_(list(tensors), 1.0)


# CSAN's TestEventHandler, one function per test (s: streams, t: tensors, e: events, by CSAN's ids).
def empty_kernel_launch(s, t, e):
    with torch.cuda.stream(s[0]):
        torch.empty(0, device="cuda")


def simple_passing(s, t, e):
    read(s[1], t[1])
    read(s[2], t[1])


def simple_error(s, t, e):
    read(s[1], t[1])
    write(s[2], t[1])


def simple_sync(s, t, e):
    read(s[1], t[1])
    e[0].record(s[1])
    s[2].wait_event(e[0])
    write(s[2], t[1])


def reads_check_last_write(s, t, e):
    write(s[1], t[1])
    e[0].record(s[1])
    s[2].wait_event(e[0])
    read(s[2], t[1])
    read(s[3], t[1])


def branch_sync(s, t, e):
    write(s[1], t[1])
    e[0].record(s[1])
    s[2].wait_event(e[0])
    s[3].wait_event(e[0])
    read(s[2], t[1])
    read(s[3], t[1])
    write(s[2], t[1])


def chain_sync(s, t, e):
    read(s[0], t[1])
    for i in range(10):
        e[i].record(s[i])
        s[i + 1].wait_event(e[i])
    write(s[10], t[1])


def expired_record(s, t, e):
    read(s[1], t[1])
    e[0].record(s[1])
    read(s[1], t[1])
    s[2].wait_event(e[0])
    write(s[2], t[1])


def deleted_record(s, t, e):
    # CSAN's ids are reused after a deletion; PyTorch's are CUDA's: the event waited for is a new one, never
    # recorded, so the wait orders nothing (PyTorch skips waiting for an event it never created).
    read(s[1], t[1])
    recorded = torch.cuda.Event()
    recorded.record(s[1])
    del recorded
    fresh = torch.cuda.Event()
    s[2].wait_event(fresh)
    write(s[2], t[1])


def _reads_then_waits(s, t, e, readers):
    """Streams 1 to `readers` read t[1] and record; stream 0 waits for the events of streams 1 to 9, then writes."""
    for i in range(1, readers + 1):
        read(s[i], t[1])
        e[i].record(s[i])
    for i in range(1, 10):
        s[0].wait_event(e[i])
    write(s[0], t[1])


def all_reads_checked_failing(s, t, e):
    _reads_then_waits(s, t, e, readers=10)  # stream 10's read is not waited for


def all_reads_checked_passing(s, t, e):
    _reads_then_waits(s, t, e, readers=9)


def multiple_errors(s, t, e):
    write(s[0], *t)
    write(s[1], *t)


def correct_state_merging(s, t, e):
    write(s[1], t[1])
    write(s[2], t[2])
    e[1].record(s[1])
    e[2].record(s[2])
    write(s[1], t[1])
    write(s[2], t[2])
    s[2].wait_event(e[1])
    s[1].wait_event(e[2])
    e[3].record(s[2])
    s[1].wait_event(e[3])
    write(s[1], t[1], t[2])


def record_override(s, t, e):
    read(s[1], t[1])
    read(s[2], t[2])
    e[1].record(s[1])
    e[1].record(s[2])
    s[3].wait_event(e[1])
    write(s[3], t[1])


def multiple_wait(s, t, e):
    write(s[1], t[1])
    e[1].record(s[1])
    s[2].wait_event(e[1])
    s[3].wait_event(e[1])
    read(s[2], t[1])
    read(s[3], t[1])


# PyTorch's ordering beyond CSAN's event scenarios.
def fill_then_read_elsewhere(s, t, e):
    """The race of issue 34: a fill on one stream, a read on another with no wait_stream."""
    x = t[1]
    with torch.cuda.stream(s[1]):
        x.fill_(1.0)
    with torch.cuda.stream(s[2]):
        y = x * 2
    return y


def fill_then_read_after_wait_stream(s, t, e):
    x = t[1]
    with torch.cuda.stream(s[1]):
        x.fill_(1.0)
    s[2].wait_stream(s[1])
    with torch.cuda.stream(s[2]):
        y = x * 2
    return y


def ordered_by_synchronizes(s, t, e):
    write(s[1], t[1])
    torch.cuda.synchronize()
    write(s[2], t[1])  # after the device's synchronize
    s[2].synchronize()
    read(s[3], t[1])  # after the stream's
    e[0].record(s[3])
    e[0].synchronize()
    write(s[4], t[1])  # after the event's
    with torch.cuda.stream(s[5]):
        t[2].add_(1.0)
        t[2].sum().item()  # copies the sum to the host and synchronizes s[5]
    write(s[6], t[2])


def copied_to_host_then_written(s, t, e):
    with torch.cuda.stream(s[1]):
        t[1].add_(1.0)
        t[1].cpu()  # copies t[1] to the host and synchronizes s[1]
    write(s[2], t[1])


def reused_after_record_stream(s, t, e):
    """A tensor made on the current stream, used on another with record_stream, then freed: the allocator
    hands its block out again only once that stream has passed the use, so new tensors there are clean."""
    for _ in range(20):
        x = torch.ones(1 << 16, device="cuda")
        s[1].wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s[1]):
            (x * 2).sum()
        x.record_stream(s[1])
        del x
        y = torch.zeros(1 << 16, device="cuda")  # often x's block again
        y.add_(1.0)
        del y


def freed_then_reused_on_another_stream(s, t, e):
    """Memory freed on one stream's pool and allocated on another's: a new block each time, no history."""
    for _ in range(20):
        with torch.cuda.stream(s[1]):
            x = torch.ones(1 << 16, device="cuda")
            x.mul_(3.0)
            del x
        with torch.cuda.stream(s[2]):
            y = torch.ones(1 << 16, device="cuda")
            y.mul_(3.0)
            del y


def _prefetch(s, record: bool, wait: bool) -> None:
    """A side-stream prefetcher: each batch is copied on s[1] and read on the current stream, then dropped; the
    batch after next takes its block on s[1]'s pool."""
    host = torch.ones(1 << 16).pin_memory()
    batch = None
    for _ in range(4):
        if wait:
            s[1].wait_stream(torch.cuda.current_stream())  # the fix of timm's PrefetchLoader
        with torch.cuda.stream(s[1]):
            upcoming = host.to("cuda", non_blocking=True)
        torch.cuda.current_stream().wait_stream(s[1])
        batch = upcoming  # the batch before is dropped here, while its reads may still run
        if record:
            batch.record_stream(torch.cuda.current_stream())  # the other fix
        (batch * 2).sum()


def prefetcher_reusing_a_block_still_read(s, t, e):
    """timm's PrefetchLoader before its fix: the reuse of a batch's block on the prefetch stream is not ordered
    after the current stream's reads of that batch."""
    _prefetch(s, record=False, wait=False)


def prefetcher_with_record_stream(s, t, e):
    _prefetch(s, record=True, wait=False)


def prefetcher_with_wait_stream(s, t, e):
    _prefetch(s, record=False, wait=True)


def stash_freed_under_a_side_copy(s, t, e):
    """torchrec's NaNs: a tensor copied to the host on a side stream, dropped on the current stream, whose next
    allocation takes its block while the copy may still read it (reused_after_record_stream is the fix)."""
    host = torch.empty(1 << 16, pin_memory=True)
    for _ in range(4):
        x = torch.ones(1 << 16, device="cuda")
        s[1].wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s[1]):
            host.copy_(x, non_blocking=True)
        del x
        y = torch.zeros(1 << 16, device="cuda")  # x's block again
        del y
    s[1].synchronize()


def item_of_a_side_streams_result(s, t, e):
    """`.item()` of a tensor another stream writes, with no wait: the copy to the host reads it on the current
    stream."""
    with torch.cuda.stream(s[1]):
        t[1].add_(1.0)
    t[1][0].item()


def cpu_of_a_side_streams_result(s, t, e):
    with torch.cuda.stream(s[1]):
        t[1].add_(1.0)
    t[1].cpu()


def _copied_to_pinned(s):
    """A GPU-to-CPU copy into pinned memory with non_blocking=True: the call returns before the copy has run."""
    host = torch.empty(1 << 16, pin_memory=True)
    host.copy_(torch.ones(1 << 16, device="cuda"), non_blocking=True)
    return host


def host_read_of_a_copy_not_waited_for(s, t, e):
    """sglang's bug: the copy's result read on the host (here by a CPU operator) before any synchronize."""
    _copied_to_pinned(s).sum()


def host_tolist_of_a_copy_not_waited_for(s, t, e):
    _copied_to_pinned(s).tolist()


def non_blocking_to_cpu_read_at_once(s, t, e):
    """`to("cpu", non_blocking=True)` returns pinned memory the copy has yet to fill."""
    torch.ones(1 << 16, device="cuda").to("cpu", non_blocking=True).numpy()


def host_read_after_the_copy_synchronized(s, t, e):
    host = _copied_to_pinned(s)
    torch.cuda.current_stream().synchronize()
    host.sum()
    host.tolist()


def pinned_block_reused_after_its_copy(s, t, e):
    """PyTorch's host allocator hands a pinned block out again only once the copies that used it are done."""
    for _ in range(4):
        host = torch.ones(1 << 16).pin_memory()
        host.to("cuda", non_blocking=True)
        del host
        torch.ones(1 << 16).pin_memory().fill_(2.0)  # often the same block


def graph_replayed_then_read(s, t, e):
    """A CUDA graph PyTorch captured (on a capture stream of its own) replayed on the current stream, and its
    result read there: ordered by that stream, whichever stream captured it."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        t[1].add_(1.0)
    for _ in range(3):
        graph.replay()
        t[1].sum().item()


def graph_replay_then_read_elsewhere(s, t, e):
    """A replay on s[2] writes t[1]; s[1] reads it with no wait."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        t[1].add_(1.0)
    with torch.cuda.stream(s[2]):
        graph.replay()
    read(s[1], t[1])


SCENARIOS = {f.__name__: f for f in (
    empty_kernel_launch, simple_passing, simple_error, simple_sync, reads_check_last_write, branch_sync, chain_sync,
    expired_record, deleted_record, all_reads_checked_failing, all_reads_checked_passing, multiple_errors,
    correct_state_merging, record_override, multiple_wait, fill_then_read_elsewhere, fill_then_read_after_wait_stream,
    ordered_by_synchronizes, copied_to_host_then_written, reused_after_record_stream,
    freed_then_reused_on_another_stream, graph_replayed_then_read, graph_replay_then_read_elsewhere,
    prefetcher_reusing_a_block_still_read, prefetcher_with_record_stream, prefetcher_with_wait_stream,
    stash_freed_under_a_side_copy, item_of_a_side_streams_result, cpu_of_a_side_streams_result,
    host_read_of_a_copy_not_waited_for, host_tolist_of_a_copy_not_waited_for, non_blocking_to_cpu_read_at_once,
    host_read_after_the_copy_synchronized, pinned_block_reused_after_its_copy)}
RACES = {"simple_error", "reads_check_last_write", "branch_sync", "expired_record", "deleted_record",
         "all_reads_checked_failing", "multiple_errors", "record_override", "fill_then_read_elsewhere",
         "graph_replay_then_read_elsewhere", "prefetcher_reusing_a_block_still_read", "stash_freed_under_a_side_copy",
         "item_of_a_side_streams_result", "cpu_of_a_side_streams_result", "host_read_of_a_copy_not_waited_for",
         "host_tolist_of_a_copy_not_waited_for", "non_blocking_to_cpu_read_at_once"}


def main(name: str) -> None:
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]
    tensors = [torch.zeros(256, device="cuda") for _ in range(TENSORS)]
    events = [torch.cuda.Event() for _ in range(STREAMS)]
    torch.cuda.synchronize()  # the tensors' zeros are done: each scenario starts from no pending work
    SCENARIOS[name](streams, tensors, events)
    torch.cuda.synchronize()
    print("done")


if __name__ == "__main__":
    main(sys.argv[1])
