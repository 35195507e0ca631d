"""
cuweave's compiled core (private: import cuweave instead)
"""
from __future__ import annotations
import collections.abc
import numpy
import types
import typing
import typing_extensions
sim: _sim_module  # a submodule
sanitizer: _sanitizer_module  # a submodule
ops: _ops_module  # a submodule
weave: _weave_module  # a submodule
backend_calls: types.ModuleType  # raw backend calls for tests (bind_backend_calls.cpp)
__all__: list[str] = ['CaptureState', 'CollectiveGroup', 'Communicator', 'ConditionalNode', 'DeclaredAccess', 'DeviceArray', 'DeviceProperties', 'Event', 'Graph', 'GraphNode', 'HostLatch', 'HostRegistration', 'Kernel', 'PinnedBlock', 'PinnedPool', 'SMPartition', 'SMResources', 'Stream', 'StreamLease', 'StreamPool', 'TraceSession', 'Transfer', 'WeaveState', 'abort_unfinished_collectives', 'asarray', 'ascontiguousarray', 'backend_calls', 'backend_name', 'begin_capture', 'call_holding_raised', 'checked_device', 'collect', 'collective_timeout_s', 'collective_unique_id', 'compile_kernel', 'copy_async', 'create_condition', 'cuda_device_count', 'cuda_unavailable_reason', 'current_device', 'current_stream', 'default_stream', 'device_count', 'device_properties', 'driver_version', 'empty', 'fill_bytes', 'from_dlpack', 'graph_memory_use', 'handoff_all', 'hook_steps_aside', 'hook_table', 'host_copy', 'is_pinned', 'open_ranges', 'ops', 'partition_sms', 'pending_lifetimes', 'per_thread_default_stream', 'pinned_empty', 'pinned_pool', 'pinned_zeros', 'raise_hook_failure', 'range_pop', 'range_push', 'register_host', 'runtime_version', 'sanitizer', 'select_backend', 'set_condition', 'set_current_device', 'sim', 'sm_partitions_alive', 'sm_resources', 'spin', 'staging_stats', 'synchronize_device', 'synchronize_when_capture_ends', 'to_device', 'to_device_batch', 'touched_span', 'trace_active', 'trace_stream_id', 'trim_graph_memory', 'unavailable_reason', 'weave', 'zeros']
class DeviceProperties:
    """
    What a device is and can do (read once, cached).
    """
    def __repr__(self) -> str:
        ...
    @property
    def async_engine_count(self) -> int:
        """
        Copy engines: 2 or more lets a host-to-device and a device-to-host copy run at once.
        """
    @property
    def compute_capability(self) -> tuple[int, int]:
        ...
    @property
    def multiprocessor_count(self) -> int:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def ordinal(self) -> int:
        ...
    @property
    def pci_bus_id(self) -> str:
        ...
    @property
    def priority_range(self) -> tuple[int, int]:
        """
        (lowest, highest) stream priority; numerically lower is more urgent, e.g. (0, -5).
        """
    @property
    def total_memory(self) -> int:
        ...
class SMResources:
    """
    A device's SMs, as partitions may split them.
    """
    def __repr__(self) -> str:
        ...
    @property
    def alignment(self) -> int:
        """
        A partition's SM count is a multiple of this.
        """
    @property
    def min_partition_sms(self) -> int:
        """
        The fewest SMs a partition may have.
        """
    @property
    def sm_count(self) -> int:
        """
        The device's streaming multiprocessors.
        """
class SMPartition:
    """
    A set of one device's SMs. Kernels queued on a stream made on it, ``cuweave.Stream(partition=p)``, run on
    these SMs only, so work on another partition of the device always has SMs of its own.
    
    Made by ``cuweave.Device(n).partition(sms)``. It lives while it or a stream made on it is referenced, and
    until the work queued on those streams has completed.
    """
    def __repr__(self) -> str:
        ...
    @property
    def device(self) -> int:
        ...
    @property
    def is_rest(self) -> bool:
        """
        True for the partition of the SMs a split left over.
        """
    @property
    def sms(self) -> int:
        """
        How many SMs it has (CUDA may round a request up).
        """
class Stream:
    """
    A CUDA stream: work queued on it runs in order; work on different streams may overlap.
    
    ``with stream:`` makes it this thread's current stream (nestable); cuweave operations given no
    ``stream=`` are ordered on the current stream.
    """
    @staticmethod
    def from_external(stream: typing.Any) -> Stream:
        """
        Adopts a stream made elsewhere (anything with __cuda_stream__, a torch or cupy stream, or an int handle) without owning it; the foreign object is kept alive (an int handle's owner keeps the stream alive for as long as the adoption lives: the sanitizer may ask CUDA about it until then). An adoption of a cuweave stream closes with that stream.
        """
    def __cuda_stream__(self) -> tuple[int, int]:
        ...
    def __enter__(self) -> Stream:
        """
        Makes this stream the thread's current stream until the block ends (nestable).
        """
    def __eq__(self, arg0: typing.Any) -> bool:
        ...
    def __exit__(self, exc_type: typing.Any, exc: typing.Any, traceback: typing.Any, /) -> None:
        """
        Restores the previous current stream; never hides the body's exception.
        """
    def __hash__(self) -> int:
        ...
    def __init__(self, *, priority: typing.Any = None, blocking: bool = False, device: typing.Any = None, name: str = '', partition: typing.Any = None) -> None:
        """
        New stream. priority: "low" | "normal" | "high" | int in the device's range. blocking=True makes it synchronize with the legacy default stream. name labels it in traces and its repr. partition: a cuweave.SMPartition whose SMs alone run this stream's kernels.
        """
    def __repr__(self) -> str:
        ...
    def close(self) -> None:
        """
        Destroys this stream (queued work still completes). Later use raises ValueError.
        """
    def launch_host_func(self, function: typing.Any, *args, ordered: bool = False) -> None:
        """
        Calls ``function(*args)`` on cuweave's callback thread once the work queued so far has completed. By default later work on the stream does not wait for it; with ordered=True it does (CUDA's semantics: the stream waits until the callable has returned or raised; not inside a capture). synchronize() waits for it either way and re-raises its exception as CallbackError.
        """
    def query(self) -> bool:
        """
        True when all work queued on this stream has completed (never blocks).
        """
    def record(self, event: Event | None = None) -> Event:
        """
        Records `event` (a new timing-free Event if None) after the work queued so far on this stream; returns it. Does not block.
        """
    def synchronize(self) -> None:
        """
        Blocks until all queued work and host callbacks have completed (the GIL is released). Raises CallbackError if a host callback on this stream raised.
        """
    def wait(self, event_or_stream: typing.Any, /) -> None:
        """
        Makes later work on this stream wait for an Event, or for the work queued so far on another stream (a Stream or anything with __cuda_stream__). The host does not wait.
        """
    @property
    def blocking(self) -> bool:
        ...
    @property
    def closed(self) -> bool:
        ...
    @property
    def device(self) -> int:
        ...
    @property
    def handle(self) -> int:
        ...
    @property
    def kind(self) -> str:
        ...
    @property
    def name(self) -> str:
        """
        The name given at creation ("" if none); traces label its lane with it.
        """
    @property
    def partition(self) -> SMPartition:
        """
        The cuweave.SMPartition this stream was made on, or None.
        """
    @property
    def priority(self) -> int:
        ...
class StreamLease:
    """
    Exclusive use of one StreamPool stream until released.
    """
    def __enter__(self) -> Stream:
        ...
    def __exit__(self, arg0: typing.Any, arg1: typing.Any, arg2: typing.Any) -> None:
        ...
    def release(self) -> None:
        ...
    @property
    def active(self) -> bool:
        ...
    @property
    def stream(self) -> Stream:
        ...
class StreamPool:
    """
    A fixed set of streams of one device and priority: ``next()`` hands them out round-robin,
    ``reserve()`` lends one exclusively (as a context manager) until released.
    """
    def __init__(self, size: typing.Any = 4, *, priority: typing.Any = None, blocking: bool = False, device: typing.Any = None, name: str = '') -> None:
        """
        A pool of `size` streams; `name` names them in traces ("name[0]", "name[1]", ...).
        """
    def __len__(self) -> int:
        ...
    def next(self) -> Stream:
        """
        The next unreserved stream, round-robin.
        """
    def reserve(self, timeout: typing.Any = None) -> StreamLease:
        """
        Reserves a stream until the lease is released (use it as a context manager). Waits for one to be released when all are reserved; TimeoutError after `timeout` seconds.
        """
    @property
    def device(self) -> int:
        ...
    @property
    def priority(self) -> int:
        ...
    @property
    def reserved_count(self) -> int:
        ...
    @property
    def size(self) -> int:
        ...
class Event:
    """
    A CUDA event: marks a point in a stream's work. Other streams can wait for it without the host
    waiting; the host can query or wait for it; two timing events measure the GPU time between them.
    """
    @staticmethod
    def from_ipc_handle(handle: bytes, device: typing.Any = None) -> Event:
        """
        Opens an event shared by another process.
        """
    def __await__(self) -> typing.Any:
        """
        ``await event``: waits for the event without blocking the event loop.
        """
    def __init__(self, *, timing: bool = False, blocking: bool = False, interprocess: bool = False, device: typing.Any = None) -> None:
        ...
    def __repr__(self) -> str:
        ...
    def close(self) -> None:
        ...
    def elapsed_time(self, end: Event) -> float:
        """
        Milliseconds of GPU time from this event to `end`; both need timing=True and must have completed.
        """
    def ipc_handle(self) -> bytes:
        ...
    def query(self) -> bool:
        """
        True once the recorded work has completed (never blocks).
        """
    def record(self, stream: typing.Any = None) -> None:
        """
        Records after the work queued so far on `stream` (default: current stream).
        """
    def synchronize(self) -> None:
        """
        Blocks until the recorded work has completed (the GIL is released).
        """
    def wait(self, stream: typing.Any = None) -> None:
        """
        Makes later work on `stream` (default: current stream) wait for this event.
        """
    @property
    def blocking(self) -> bool:
        ...
    @property
    def closed(self) -> bool:
        ...
    @property
    def device(self) -> int:
        ...
    @property
    def handle(self) -> int:
        ...
    @property
    def interprocess(self) -> bool:
        ...
    @property
    def recorded(self) -> bool:
        ...
    @property
    def timing(self) -> bool:
        ...
class HostLatch:
    """
    A latch the host releases. ``latch.pause(stream)`` makes the work queued on ``stream`` after it wait until
    ``latch.release()``; no thread is busy meanwhile (the stream waits for a flag in mapped host memory).
    
    Queue a burst of work behind a paused stream and release it at once, so that the device runs it without
    launch gaps; or keep work pending for exactly as long as a test needs::
    
        with cw.HostLatch(stream) as latch:   # pauses `stream`; released when the block ends
            ...queue work on stream...
            assert not stream.query()
    
    Releasing is final: pausing with a released latch pauses nothing. A latch keeps the streams it pauses alive
    until the release; one that is garbage-collected unreleased is released, so a stream is never paused forever.
    A pause cannot be captured into a graph.
    """
    def __enter__(self) -> HostLatch:
        ...
    def __exit__(self, *args) -> None:
        """
        Releases the latch, also when the block raised.
        """
    def __init__(self, *args) -> None:
        """
        ``HostLatch(*streams)``: a new latch pausing each stream given.
        """
    def __repr__(self) -> str:
        ...
    def pause(self, stream: typing.Any = None) -> None:
        """
        Later work on `stream` (default: the current stream) waits until release().
        """
    def release(self) -> None:
        """
        Lets every paused stream go on (idempotent; never blocks).
        """
    @property
    def pauses(self) -> int:
        """
        How many pauses were queued before the release.
        """
    @property
    def released(self) -> bool:
        ...
class PinnedBlock:
    """
    A block of page-locked host memory on loan from the pinned pool. It returns to the pool when the last
    reference goes and every queued copy that uses it has completed.
    """
    def __len__(self) -> int:
        ...
    def __repr__(self) -> str:
        ...
    @property
    def capacity(self) -> int:
        """
        Bytes of the size class the block came from.
        """
    @property
    def nbytes(self) -> int:
        ...
    @property
    def ptr(self) -> int:
        ...
class PinnedPool:
    """
    The process-wide cache of pinned host memory (cuweave.pinned_pool()).
    """
    @staticmethod
    def size_class(nbytes: typing.SupportsInt | typing.SupportsIndex) -> int:
        ...
    def __repr__(self) -> str:
        ...
    def allocate(self, nbytes: typing.Any) -> PinnedBlock:
        ...
    def empty_cache(self) -> int:
        """
        Frees every cached block (blocks in use or still used by queued copies stay); returns the bytes freed.
        """
    def stats(self) -> dict:
        ...
    @property
    def results_limit(self) -> int:
        """
        The most pinned memory that to_numpy() results held at once may take (default 256 MB, or CUWEAVE_PINNED_RESULTS_MB); past it, results are in ordinary memory. pinned=True is not bounded by it.
        """
    @results_limit.setter
    def results_limit(self, arg1: typing.Any) -> None:
        ...
class HostRegistration:
    """
    An existing array's memory, page-locked (cudaHostRegister) until release() or the end of the
    ``with`` block. Releasing waits for queued copies that use it.
    """
    def __enter__(self) -> typing.Any:
        ...
    def __exit__(self, arg0: typing.Any, arg1: typing.Any, arg2: typing.Any) -> None:
        ...
    def release(self) -> None:
        ...
    @property
    def active(self) -> bool:
        ...
    @property
    def nbytes(self) -> int:
        ...
class DeviceArray:
    """
    An n-dimensional array in GPU memory. It is not readable as NumPy without a copy: use to_numpy().
    It speaks __cuda_array_interface__ (v3) and DLPack, so CuPy, PyTorch and Numba can use it in place.
    """
    def __array__(self, *args, **kwargs) -> typing.Any:
        ...
    def __dlpack__(self, *, stream: typing.Any = None, max_version: typing.Any = None, dl_device: typing.Any = None, copy: typing.Any = None) -> typing_extensions.CapsuleType:
        ...
    def __dlpack_device__(self) -> tuple[int, int]:
        ...
    def __float__(self) -> float:
        ...
    def __getitem__(self, key: typing.Any) -> DeviceArray:
        """
        A view of the elements `key` selects, as NumPy's basic indexing does (integers, slices with steps, None, ...): it shares this array's memory and keeps it alive. An integer for every axis gives a 0-d view; read it with item().
        """
    def __int__(self) -> int:
        ...
    def __iter__(self) -> typing.Any:
        """
        The views self[0], self[1], ... along the first axis.
        """
    def __len__(self) -> int:
        ...
    def __repr__(self) -> str:
        ...
    def __setitem__(self, key: typing.Any, value: typing.Any) -> None:
        """
        Writes `value` into the view `key` selects, queued on the current stream: a GPU array of that shape and dtype, or host values (arrays, lists, scalars) as NumPy converts and broadcasts them.
        """
    def copy(self, *, stream: typing.Any = None) -> DeviceArray:
        """
        A new contiguous array with the same values, copied in order on `stream` (default: current).
        """
    def handoff(self, stream: typing.Any = None, *, wait: bool = True) -> None:
        """
        Hands the array to `stream` (default: current): that stream waits for the work queued so far on the array's stream (no host wait; wait=False when the caller already ordered it), becomes the array's stream, and frees its memory in its own order when the array goes. For arrays used on another stream, by cuweave or by other libraries.
        """
    def item(self) -> typing.Any:
        """
        The array's one element as a Python scalar, read on the host (after the work that writes it).
        """
    def ravel(self, *, stream: typing.Any = None) -> DeviceArray:
        """
        The elements as one axis: a view where the array is contiguous, else a contiguous copy ordered on `stream` (default: current).
        """
    def reshape(self, *args) -> DeviceArray:
        """
        A view of the same elements, in C order, with another shape (one extent may be -1). A transposed or stepped view whose elements no strides can reach that way raises ValueError: reshape .copy() instead.
        """
    def to_numpy(self, *, stream: typing.Any = None, out: typing.Any = None, pinned: typing.Any = None) -> numpy.ndarray[typing.Any, numpy.dtype[typing.Any]]:
        """
        Copies to a NumPy array (`out`, or a new one) ordered on `stream` (default: the current stream, or the array's device's default stream when the current stream is another device's; after the streams that wrote the array) and waits for the copy; the GIL is released while waiting. A new array is on pooled pinned memory, which the copy engine fills at the link's speed, when pinned=True, or by default when its size recurs (from the second result of a size class on, and whenever the pool holds a free block of that class); pinned=False always gives ordinary memory. Large copies into ordinary memory go through pinned staging on several threads.
        """
    def transpose(self, *args) -> DeviceArray:
        """
        A view with the axes in the order given (transpose(1, 0, 2) or transpose((1, 0, 2))); none: reversed.
        """
    def view(self, dtype: typing.Any) -> DeviceArray:
        """
        The same bytes as elements of `dtype`; with another element size the last axis (which must be contiguous) changes its extent, as NumPy's view does.
        """
    @property
    def T(self) -> DeviceArray:
        """
        A view with the axes reversed.
        """
    @property
    def __cuda_array_interface__(self) -> dict:
        ...
    @property
    def base(self) -> DeviceArray:
        """
        The array this one is a view of (the first array of its memory); None for that one.
        """
    @property
    def contiguous(self) -> bool:
        ...
    @property
    def device(self) -> int:
        ...
    @property
    def dtype(self) -> numpy.dtype[typing.Any]:
        ...
    @property
    def nbytes(self) -> int:
        ...
    @property
    def ndim(self) -> int:
        ...
    @property
    def ptr(self) -> int:
        ...
    @property
    def readonly(self) -> bool:
        ...
    @property
    def shape(self) -> tuple:
        ...
    @property
    def size(self) -> int:
        ...
    @property
    def stream(self) -> Stream:
        """
        The stream this array's producing work is ordered on.
        """
    @property
    def strides(self) -> tuple:
        ...
class Transfer:
    """
    The completion of an async copy: wait(), done, event, dst.
    """
    def __await__(self) -> typing.Any:
        """
        ``await transfer``: waits for the copy without blocking the event loop, then returns wait()'s result.
        """
    def __repr__(self) -> str:
        ...
    def query(self) -> bool:
        ...
    def wait(self) -> typing.Any:
        """
        Blocks until the copy has completed (the GIL is released); returns the destination.
        """
    @property
    def done(self) -> bool:
        ...
    @property
    def dst(self) -> typing.Any:
        ...
    @property
    def event(self) -> Event:
        """
        An Event recorded right after the copy; other streams may wait on it.
        """
    @property
    def route(self) -> typing.Any:
        """
        Between two devices: "peer" (directly over the link) or "through host"; None otherwise.
        """
class TraceSession:
    """
    The record of one trace (see cuweave.trace).
    """
    def __init__(self, *, all_threads: bool = False, limit: typing.SupportsInt | typing.SupportsIndex | None = None, keep: str = 'last') -> None:
        ...
    def activities(self) -> list:
        """
        Everything recorded, as tuples (kind, name, start_ns, end_ns, device, stream, bytes, direction, correlation, link, call_site, thread, depth, graph_node), in arrival order.
        """
    def begin(self) -> None:
        """
        Opens the trace: what this thread (or every thread) issues from now on is recorded.
        """
    def end(self) -> None:
        """
        Closes the trace: waits for the work issued inside it, then collects what ran (the GIL is released).
        """
    def streams(self) -> list:
        """
        What cuweave knows of the streams seen: tuples (stream, device, kind, priority, blocking, name).
        """
    @property
    def all_threads(self) -> bool:
        ...
    @property
    def backend(self) -> str:
        ...
    @property
    def begin_ns(self) -> int:
        ...
    @property
    def dropped(self) -> int:
        """
        How many activities arrived beyond the limit and were not kept.
        """
    @property
    def end_ns(self) -> int:
        ...
    @property
    def keep(self) -> str:
        ...
    @property
    def limit(self) -> int | None:
        ...
    @property
    def recording(self) -> bool:
        ...
class _TraceOrigin:
    """
    The traces this thread's operations belong to now, for a helper thread to adopt.
    """
    def __enter__(self) -> None:
        ...
    def __exit__(self, arg0: typing.Any, arg1: typing.Any, arg2: typing.Any) -> None:
        ...
    def __init__(self) -> None:
        ...
    @property
    def tracing(self) -> bool:
        ...
class DeclaredAccess:
    """
    A kernel argument whose access is declared for one launch: cuweave.reads(array) or cuweave.writes(array).
    """
    def __init__(self, array: typing.Any, writes: bool) -> None:
        ...
    def __repr__(self) -> str:
        ...
    @property
    def array(self) -> DeviceArray:
        ...
    @property
    def writes(self) -> bool:
        ...
class Kernel:
    """
    A CUDA kernel compiled at run time and loaded on a device (made by cuweave.compile()). Call it as
    ``kernel(grid, block, args, shared_mem=0, stream=None)``.
    """
    def __call__(self, grid: typing.Any, block: typing.Any, args: typing.Any, *, shared_mem: typing.SupportsInt | typing.SupportsIndex = 0, stream: typing.Any = None) -> None:
        """
        Launches on `stream` (default: current). grid and block: an int or 1 to 3 ints. args: one per kernel parameter: device arrays (any GPU array; passed as pointers and kept alive until the kernel is done), NumPy scalars (must match the parameter's size), Python ints (checked against the parameter's size) and floats (float for 4-byte, double for 8-byte parameters).
        """
    def __init__(self, binary: bytes, lowered_name: str, device: typing.Any = None) -> None:
        ...
    @property
    def device(self) -> int:
        ...
    @property
    def name(self) -> str:
        """
        The kernel's symbol (mangled for C++ kernels).
        """
    @property
    def parameter_sizes(self) -> list[int]:
        ...
    @property
    def programmatic(self) -> bool:
        """
        False by default. True: each launch may start while the previous kernel on its stream is still running (CUDA's programmatic dependent launch, compute capability 9.0), hiding the launch's ramp-up in chains of short kernels. The kernel must call cudaGridDependencySynchronize() (or asm("griddepcontrol.wait;")) before it reads anything the previous kernel writes. Captured launches become programmatic edges.
        """
    @programmatic.setter
    def programmatic(self, arg1: typing.Any) -> None:
        ...
    @property
    def read_only(self) -> tuple:
        """
        The parameters (indices) the kernel only reads through, for the stream-race sanitizer: device arrays passed there count as read, the others as read and written. cuweave.compile() fills it with the const-pointer parameters of the kernel's signature; assign a tuple of indices to declare others.
        """
    @read_only.setter
    def read_only(self, arg1: collections.abc.Iterable) -> None:
        ...
class GraphNode:
    """
    A node of a cuweave.Graph.
    """
    def __repr__(self) -> str:
        ...
    @property
    def dependencies(self) -> list[GraphNode]:
        """
        The nodes this one runs after (filled in for nodes listed by Graph.nodes).
        """
    @property
    def kind(self) -> str:
        """
        "kernel", "copy", "memset", "host", "event_record", "event_wait", "empty", "graph", "allocation", "free" or "other".
        """
    @property
    def label(self) -> str:
        ...
class Graph:
    """
    A CUDA graph: captured with ``cuweave.capture`` or built node by node. ``replay(stream)`` launches it (it
    is instantiated on first use); changing it later (new arguments, repointed buffers, new nodes) is applied
    at the next replay by an exec update, or a new instantiation where the topology changed.
    """
    def __init__(self, device: typing.Any = None) -> None:
        """
        An empty graph for explicit construction.
        """
    def __len__(self) -> int:
        ...
    def __repr__(self) -> str:
        ...
    def _repr_svg_(self) -> str:
        """
        An SVG drawing of the graph (Jupyter shows it inline): one row per depth, arrows to dependents.
        """
    def add_conditional(self, kind: str, condition: typing.Any, bodies: typing.SupportsInt | typing.SupportsIndex = 1, *, after: typing.Any = None) -> tuple[GraphNode, list[Graph]]:
        """
        Adds a conditional node ("if" with 1 or 2 bodies, "while" with 1, "switch" with one per case) under `condition` (a handle from create_condition, or a cuweave.Condition). Returns (node, bodies): each body a Graph to add nodes to, replayed only as part of this graph.
        """
    def add_copy(self, destination: typing.Any, source: typing.Any, *, after: typing.Any = None) -> GraphNode:
        """
        Adds a copy between device arrays and/or NumPy arrays of the same shape and dtype (pinned NumPy memory copies asynchronously; the arrays are kept alive by the graph).
        """
    def add_empty(self, *, after: typing.Any = None) -> GraphNode:
        """
        Adds a node that does nothing: a join point.
        """
    def add_event_record(self, event: Event, *, after: typing.Any = None) -> GraphNode:
        ...
    def add_event_wait(self, event: Event, *, after: typing.Any = None) -> GraphNode:
        ...
    def add_graph(self, child: Graph, *, after: typing.Any = None) -> GraphNode:
        """
        Embeds a copy of another graph as one node.
        """
    def add_host(self, function: typing.Any, *args, **kwargs) -> GraphNode:
        """
        ``add_host(function, *args, after=None)``: calls ``function(*args)`` on cuweave's callback thread at every replay, once the nodes in `after` are done. Its exception is re-raised by the replay stream's synchronize().
        """
    def add_kernel(self, kernel: Kernel, grid: typing.Any, block: typing.Any, args: typing.Any, *, shared_mem: typing.SupportsInt | typing.SupportsIndex = 0, after: typing.Any = None) -> GraphNode:
        """
        Adds a launch of a cuweave.compile() kernel (arguments as for Kernel.__call__), after the nodes in `after`.
        """
    def add_memset(self, destination: typing.Any, value: typing.SupportsInt | typing.SupportsIndex, *, after: typing.Any = None) -> GraphNode:
        """
        Adds a node setting every byte of a device array to `value`.
        """
    def add_set_condition(self, condition: typing.Any, element: typing.Any, comparison: str = '!=', threshold: typing.Any = 0, *, after: typing.Any = None) -> GraphNode:
        """
        Adds a node setting `condition` from `element` (one element of a device array): 1 or 0 by `comparison` with `threshold`, or ("value") the element itself as a switch's case index.
        """
    def create_condition(self, default: typing.SupportsInt | typing.SupportsIndex = 0) -> int:
        """
        A condition (its integer handle) for a conditional node of this graph, set to `default` at the start of every replay. cuweave.Condition(default, graph=g) wraps it.
        """
    def instantiate(self) -> str:
        """
        Instantiates now (replay does it on first use) or applies pending changes.
        """
    def rebind(self, mapping: dict) -> int:
        """
        Repoints every kernel argument, copy and memset of the graph from each old device array to its new one (a dict old -> new, same dtype and size); applied at the next replay by an exec update, no re-capture. Returns how many pointers changed.
        """
    def replay(self, stream: typing.Any = None) -> None:
        """
        Launches the graph on `stream` (default: the current stream), after the work queued there; instantiates it first, or applies pending changes. Does not block.
        """
    def set_arguments(self, node: GraphNode, args: typing.Any) -> None:
        """
        New arguments for a kernel node (applied at the next replay, by an exec update).
        """
    def set_copy(self, node: GraphNode, destination: typing.Any, source: typing.Any) -> None:
        """
        Repoints a copy node (applied at the next replay, by an exec update).
        """
    def to_dot(self, name: str = 'cuweave_graph') -> str:
        """
        The graph in Graphviz's DOT language (``dot -Tsvg`` draws it).
        """
    def update(self, other: Graph) -> str:
        """
        Takes `other`'s nodes and parameters (e.g. a re-capture with new buffers): an exec update in place when the topology is the same, else a new instantiation. Returns "updated" or "reinstantiated".
        """
    def upload(self, stream: typing.Any = None) -> None:
        """
        Prepares the device for the first replay on `stream` ahead of time.
        """
    @property
    def device(self) -> int:
        ...
    @property
    def instantiated(self) -> bool:
        ...
    @property
    def is_body(self) -> bool:
        """
        Whether this is a conditional node's body.
        """
    @property
    def kinds(self) -> typing.Any:
        """
        How many nodes of each kind the graph has, e.g. ``Counter({"kernel": 3, "copy": 2})``.
        """
    @property
    def last_refresh(self) -> str:
        """
        How the executable was last brought up to date: "instantiated", "updated" (exec update in place) or "reinstantiated" (the topology changed); "none" before.
        """
    @property
    def node_priorities(self) -> bool:
        """
        False by default: a replay runs every kernel at the priority of the stream it goes to. True: each kernel runs at the priority of the stream it was captured on, so a graph replayed on a normal stream keeps the urgency of work captured on a high-priority one (CUDA's per-node priorities). Takes effect from the next replay, which instantiates the graph anew.
        """
    @node_priorities.setter
    def node_priorities(self, arg1: typing.Any) -> None:
        ...
    @property
    def nodes(self) -> list[GraphNode]:
        """
        Every node, dependencies before dependents.
        """
class CaptureState:
    """
    The core of a cuweave.capture block (use cuweave.capture).
    """
    def abandon(self) -> None:
        """
        Ends the capture and drops what it captured. Never raises.
        """
    def end(self) -> Graph:
        """
        Ends the capture and returns its Graph; raises CaptureError (unjoined fork, invalidated capture) after the capture has ended.
        """
    @property
    def ended(self) -> bool:
        ...
    @property
    def mode(self) -> str:
        ...
    @property
    def stream(self) -> Stream:
        ...
class _GraphFunctionBase:
    """
    cuweave.GraphFunction's base: answers a call like the previous one in C++ (Note [Graph function calls in C]); other calls go to the method _call.
    """
    def __call__(self, *args, **kwargs):
        """
        Call self as a function.
        """
    def __init__(self) -> None:
        ...
    def _clear_fast_path(self) -> None:
        ...
    def _in_turn(self, arg0: collections.abc.Callable, *args) -> typing.Any:
        """
        function(*args) as a call of this graph function: after the calls of other threads, before theirs.
        """
    def _set_fast_path(self, staging: numpy.ndarray[typing.Any, numpy.dtype[typing.Any]], graph: Graph, stream: Stream, result: typing.Any, fresh: bool) -> None:
        """
        Answers later one-input calls whose input has staging's dtype (the same object), shape and a C-contiguous layout: copy into staging, replay graph on stream, wait, return result (a tuple of arrays or one), or new arrays copied from it when `fresh`.
        """
    @property
    def _fast_hits(self) -> int:
        ...
class ConditionalNode:
    """
    A conditional node added to a capture, and its bodies.
    """
    @staticmethod
    def add(stream: typing.Any, condition: typing.SupportsInt | typing.SupportsIndex, kind: str, bodies: typing.SupportsInt | typing.SupportsIndex) -> ConditionalNode:
        ...
    def abandon_body(self) -> None:
        ...
    def begin_body(self, index: typing.SupportsInt | typing.SupportsIndex) -> Stream:
        """
        Begins capturing body `index` on a new stream, returned.
        """
    def end_body(self) -> None:
        ...
    @property
    def body_count(self) -> int:
        ...
    @property
    def stream(self) -> Stream:
        ...
class CollectiveGroup:
    """
    See cuweave.collectives.group().
    """
    def __enter__(self) -> CollectiveGroup:
        ...
    def __exit__(self, arg0: typing.Any, arg1: typing.Any, arg2: typing.Any) -> None:
        ...
    def __init__(self) -> None:
        ...
class Communicator:
    """
    One rank of a group of GPUs that run collectives together, through NCCL on a GPU (the simulator's
    rendezvous otherwise). Every rank calls the same collectives in the same order, each on a stream of its own
    device; a collective completes on a rank's stream once every rank's stream has reached it.
    
    Make one per process with ``Communicator(unique_id, ranks=, rank=, device=)`` (the id from
    ``cuweave.collectives.unique_id()`` on one process, passed to the others), or all of one process's at once
    with ``cuweave.collectives.communicators(devices)``. Operations take device arrays of any library
    (``__cuda_array_interface__``, DLPack) and ``stream=`` (default: the current stream when it is on the
    communicator's device, else that device's default stream); the arrays stay alive until the collective has
    completed.
    """
    @staticmethod
    def for_devices(devices: collections.abc.Sequence[typing.Any], *, timeout: typing.Any = None) -> list[Communicator]:
        """
        One communicator per device, ranks in the order given (one process); timeout as for Communicator().
        """
    def __enter__(self) -> Communicator:
        ...
    def __exit__(self, arg0: typing.Any, arg1: typing.Any, arg2: typing.Any) -> None:
        ...
    def __init__(self, unique_id: bytes, *, ranks: int, rank: int, device: typing.Any = None, timeout: typing.Any = None) -> None:
        """
        Joins rank `rank` of `ranks` on `device` (default: the current device); returns once all have joined. timeout: seconds that joining and each collective may take (default: CUWEAVE_COLLECTIVE_TIMEOUT_S, else 600); past it NcclError (name "ncclTimeout") is raised and the communicator aborted.
        """
    def __repr__(self) -> str:
        ...
    def abort(self) -> None:
        """
        Aborts NCCL's communicator now (ncclCommAbort): its unfinished collectives end without their results (the waits for them raise NcclError), later ones are refused, and the other ranks' waits for this one fail instead of running into their timeout.
        """
    def all_gather(self, x: typing.Any, *, out: typing.Any = None, stream: typing.Any = None) -> DeviceArray:
        """
        out[r] = rank r's x, on every rank; out has shape ``(ranks, *x.shape)`` (or any shape of that size). Returns out.
        """
    def all_reduce(self, x: typing.Any, *, out: typing.Any = None, op: str = 'sum', stream: typing.Any = None) -> DeviceArray:
        """
        out = op over ranks of x (in place when out is None); op: "sum", "prod", "max", "min", "avg". Returns out.
        """
    def broadcast(self, x: typing.Any, *, root: typing.SupportsInt | typing.SupportsIndex = 0, out: typing.Any = None, stream: typing.Any = None) -> DeviceArray:
        """
        out = the root's x on every rank (in place when out is None). Returns out.
        """
    def close(self) -> None:
        """
        Refuses later collectives; NCCL's communicator is destroyed once the queued ones have completed.
        """
    def recv(self, x: typing.Any, *, peer: typing.SupportsInt | typing.SupportsIndex, stream: typing.Any = None) -> DeviceArray:
        """
        Receives into x what rank `peer` sends; returns x.
        """
    def reduce(self, x: typing.Any, *, root: typing.SupportsInt | typing.SupportsIndex = 0, out: typing.Any = None, op: str = 'sum', stream: typing.Any = None) -> typing.Any:
        """
        On the root, out = op over ranks of x (in place when out is None), returned; None on the other ranks.
        """
    def reduce_scatter(self, x: typing.Any, *, out: typing.Any = None, op: str = 'sum', stream: typing.Any = None) -> DeviceArray:
        """
        out = op over ranks of this rank's share of x (x split along its first axis, rank r taking part r). Returns out.
        """
    def send(self, x: typing.Any, *, peer: typing.SupportsInt | typing.SupportsIndex, stream: typing.Any = None) -> None:
        """
        Sends x to rank `peer`, which receives it with recv (in order per pair of ranks).
        """
    @property
    def closed(self) -> bool:
        ...
    @property
    def device(self) -> int:
        ...
    @property
    def failure(self) -> typing.Any:
        """
        Why the communicator was aborted (a timeout, NCCL's error, abort()), or None while it works.
        """
    @property
    def rank(self) -> int:
        ...
    @property
    def ranks(self) -> int:
        ...
    @property
    def timeout(self) -> float:
        """
        Seconds that joining and each collective may take before the communicator is aborted.
        """
class WeaveState:
    """
    The bookkeeping of one cuweave.weave() block.
    """
    @staticmethod
    def begin(first: Stream, others: collections.abc.Sequence[Stream]) -> WeaveState:
        """
        Starts weaving on this thread: `first` (the current stream) is the weave's first stream, `others` the streams it may choose besides it.
        """
    @staticmethod
    def begin_on_current(count: typing.SupportsInt | typing.SupportsIndex) -> WeaveState:
        """
        Starts weaving on this thread: the current stream first, then `count - 1` streams of its device that no other weave holds (kept for the next weaves, which take them in the same order); on an SM partition, streams made for the block on it.
        """
    def end(self) -> None:
        """
        The first stream waits for every other stream's work it does not already follow; the weave is no longer active, and the spare streams it took go back for the next weaves.
        """
    @property
    def counts(self) -> tuple[int, int, int, tuple]:
        """
        What the weave queued so far: (operations, records, waits, per_stream), a tuple (cuweave.WeaveCounts makes it readable).
        """
    @property
    def streams(self) -> list[Stream]:
        ...
def _forget_call_sites() -> None:
    """
    Stops reading Python frames (interpreter shutdown).
    """
def _is_plumbing(file: str) -> bool:
    """
    Whether frames of `file` are plumbing (cuweave's, PyTorch's, CuPy's, threading's, contextlib's), never the user's call site.
    """
def _set_call_site_stand_in(thread: typing.SupportsInt | typing.SupportsIndex) -> int:
    """
    Work issued from a thread with no frame of the user's is credited to `thread`'s (a threading ident; 0: none), which waits for it: PyTorch's autograd thread works for the thread that called backward(). Returns the stand-in it replaces.
    """
def _set_error_types(arg0: dict) -> None:
    ...
def _set_package_directory(arg0: str) -> None:
    ...
def _shutdown() -> None:
    """
    Stops the host-callback thread, letting a running callback return first, then lets the releases it handed over run (registered with atexit).
    """
def abort_unfinished_collectives() -> None:
    """
    Aborts every communicator with unfinished collectives (run at exit: a collective waiting for a rank that never comes would keep the process from ending).
    """
def asarray(array: typing.Any) -> DeviceArray:
    """
    A zero-copy DeviceArray view of a GPU array from another library (__cuda_array_interface__ or DLPack); the other library's object is kept alive. Ordered after the producer's stream where it names one.
    """
def ascontiguousarray(array: typing.Any, *, stream: typing.Any = None) -> DeviceArray:
    """
    `array` itself when it is contiguous, else a contiguous copy ordered on `stream` (default: current).
    """
def backend_name() -> str:
    """
    The active backend (chosen at first use).
    """
def begin_capture(stream: typing.Any, mode: str = 'global', graph_memory: bool = False) -> CaptureState:
    ...
def call_holding_raised(call: collections.abc.Callable, *args) -> typing.Any:
    """
    Calls call(*arguments) with a race the hook set to be raised in this thread and Python has not raised yet taken back, and sets it again after: for Python code the hooked library runs outside its calls and which drops what it raises (wrap it with functools.partial, which runs no Python code before the call).
    """
def checked_device(device: typing.SupportsInt | typing.SupportsIndex) -> int:
    ...
def collect() -> int:
    """
    Releases what completed work kept alive (device arrays, pinned blocks, NumPy arrays, callables) and returns how many pieces of queued work it found completed. Waits and the pinned pool do this as they go; call it to release memory at a point of your choosing. Does not wait.
    """
def collective_timeout_s(timeout: typing.Any = None) -> float:
    """
    The seconds a communicator made with `timeout` waits (None: CUWEAVE_COLLECTIVE_TIMEOUT_S, else 600).
    """
def collective_unique_id() -> bytes:
    """
    A new id for the ranks of one communicator (bytes): make it on one process and pass it to the others.
    """
def compile_kernel(source: str, name: str, options: collections.abc.Sequence[str], device: typing.Any = None) -> tuple[bytes, str, str]:
    """
    Compiles CUDA C++ for the device's architecture: (cubin, lowered name, log). Use cuweave.compile(), which caches.
    """
def copy_async(dst: typing.Any, src: typing.Any, *, stream: typing.Any = None, by_kernel: bool = False) -> Transfer:
    """
    Queues a copy of src into dst on `stream` (default: current) and returns a Transfer. Host sides are NumPy arrays (pageable, pinned or registered); device sides are DeviceArrays or GPU arrays of other libraries. Everything it touches stays alive until it completes. Does not synchronize the stream. by_kernel=True: copy with a kernel on the stream's device instead of a copy engine where that device reaches both sides directly (its memory, pinned host memory; else a copy engine as usual): lower latency for copies up to a few hundred KB, at the cost of SMs.
    """
def create_condition(stream: typing.Any, default: typing.SupportsInt | typing.SupportsIndex) -> int:
    """
    A new condition (its integer handle) of the graph `stream` captures into, set to `default` at the start of every replay.
    """
def cuda_device_count() -> int:
    """
    CUDA devices usable on this machine, whatever the active backend (never raises).
    """
def cuda_unavailable_reason() -> str:
    ...
def current_device() -> int:
    ...
def current_stream() -> Stream:
    """
    This thread's current stream: the innermost `with stream:`, else the legacy default stream.
    """
def default_stream(device: typing.Any = None) -> Stream:
    """
    The legacy default stream (handle 1), which synchronizes with blocking streams.
    """
def device_count() -> int:
    ...
def device_properties(arg0: typing.SupportsInt | typing.SupportsIndex) -> DeviceProperties:
    ...
def driver_version() -> tuple[int, int]:
    ...
def empty(shape: typing.Any, dtype: typing.Any = ..., *, stream: typing.Any = None) -> DeviceArray:
    """
    Uninitialized device array, allocated in order on `stream` (default: current).
    """
def fill_bytes(array: DeviceArray, pattern: bytes, stream: typing.Any = None) -> None:
    ...
def from_dlpack(array: typing.Any) -> DeviceArray:
    """
    A zero-copy DeviceArray view of a DLPack GPU tensor.
    """
def graph_memory_use(device: typing.SupportsInt | typing.SupportsIndex) -> tuple[int, int]:
    """
    (used, reserved): bytes of the device's graph memory (Note [Graph memory]).
    """
def handoff_all(arrays: collections.abc.Sequence[DeviceArray], stream: typing.Any) -> None:
    """
    array.handoff(stream) for each array, in one call (a woven function's replay hands over all its arrays).
    """
def hook_steps_aside() -> bool:
    """
    Whether the current stream takes part in a capture: a hook in another library then leaves that library's operators to the Python hooks, which keep what a captured operator touches for the graph.
    """
def hook_table() -> typing_extensions.CapsuleType:
    """
    The weave and the sanitizer as C functions, in a capsule (hook_table.h in cuweave/_torch_native): for a hook built against another library, which shares no C++ ABI with cuweave.
    """
def host_copy(destination: numpy.ndarray[typing.Any, numpy.dtype[typing.Any]], source: numpy.ndarray[typing.Any, numpy.dtype[typing.Any]]) -> None:
    """
    Copies source's bytes into destination (C-contiguous NumPy arrays of one size) with cuweave's host copy threads, which fill staging buffers for large copies: several times one thread's speed on a big host.
    """
def is_pinned(array: typing.Any) -> bool:
    """
    True if the array's memory is page-locked (pooled, registered or cudaHostAlloc'd).
    """
def open_ranges() -> int:
    """
    How many ranges this thread has open.
    """
def partition_sms(device: typing.SupportsInt | typing.SupportsIndex, sms: typing.Any, groups: typing.Any) -> list[SMPartition]:
    ...
def pending_lifetimes() -> int:
    ...
def per_thread_default_stream(device: typing.Any = None) -> Stream:
    """
    The per-thread default stream (handle 2): each thread's own.
    """
def pinned_empty(shape: typing.Any, dtype: typing.Any = ...) -> numpy.ndarray[typing.Any, numpy.dtype[typing.Any]]:
    """
    A numpy.ndarray on pooled pinned memory (uninitialized).
    """
def pinned_pool() -> PinnedPool:
    ...
def pinned_zeros(shape: typing.Any, dtype: typing.Any = ...) -> numpy.ndarray[typing.Any, numpy.dtype[typing.Any]]:
    """
    A numpy.ndarray on pooled pinned memory, zero-filled.
    """
def raise_hook_failure() -> None:
    """
    Raises the first failure of a hook table call on this thread since the last call, if there was one; else a race found since and not yet raised.
    """
def range_pop() -> None:
    """
    Closes the innermost range this thread opened.
    """
def range_push(name: str) -> None:
    """
    Opens a named range on this thread (see cuweave.range).
    """
def register_host(array: typing.Any) -> HostRegistration:
    ...
def runtime_version() -> tuple[int, int]:
    ...
def select_backend(name: str) -> None:
    ...
def set_condition(condition: typing.SupportsInt | typing.SupportsIndex, element: typing.Any, comparison: str, threshold: typing.Any, stream: typing.Any) -> None:
    """
    Queues a kernel on the capturing `stream` setting `condition` from the array's one element: 1 or 0 by `comparison` with `threshold`, or ("value") the element itself as a switch's case index.
    """
def set_current_device(arg0: typing.SupportsInt | typing.SupportsIndex) -> None:
    ...
def sm_partitions_alive() -> int:
    """
    SMPartition objects alive in this process (for tests).
    """
def sm_resources(device: typing.SupportsInt | typing.SupportsIndex) -> SMResources:
    ...
def spin(seconds: typing.SupportsFloat | typing.SupportsIndex, stream: typing.Any = None, blocks: typing.SupportsInt | typing.SupportsIndex = 1, start_times: typing.Any = None, slot: typing.SupportsInt | typing.SupportsIndex = 0) -> None:
    ...
def staging_stats(device: typing.Any = None) -> dict:
    """
    The staging ring of a device (large copies to and from ordinary NumPy memory pass through it): slots, slot_bytes, acquisitions, waits (acquisitions that waited for a slot: backpressure), copy_threads (the pool of host threads that fill and drain slots: CUWEAVE_COPY_THREADS, default up to 32), and for each direction (to_device, to_host) how many of them staged copies use now (threads), whether that choice rests on measurements of every candidate count (settled), and each candidate's median host copy rate over recent segments of large transfers (candidates: threads, gb_per_s, samples).
    """
def synchronize_device(device: typing.SupportsInt | typing.SupportsIndex) -> int:
    ...
def synchronize_when_capture_ends(capturing: Stream, stream: Stream) -> None:
    """
    Synchronizes `stream` once the capture on `capturing` has ended (where a global capture forbids it before): work queued there (e.g. writing what the graph will read) completes before any replay.
    """
def to_device(array: typing.Any, *, stream: typing.Any = None) -> DeviceArray:
    """
    A new DeviceArray holding a copy of a NumPy array, ordered on `stream` (default: current). Does not wait.
    """
def to_device_batch(arrays: typing.Any, *, stream: typing.Any = None) -> list:
    """
    New DeviceArrays holding copies of a list of NumPy arrays, ordered on `stream` (default: current), in as few calls as CUDA allows: the pinned arrays and the pageable ones under 1 MB in one batch of copies. Does not wait.
    """
def touched_span(array: typing.Any) -> tuple[int, int]:
    """
    (address, bytes) from a GPU array's lowest element to its highest, as the sanitizer counts it.
    """
def trace_active() -> bool:
    """
    True while any trace is open.
    """
def trace_stream_id(stream: Stream) -> int:
    """
    The id trace activities on `stream` carry.
    """
def trim_graph_memory(device: typing.SupportsInt | typing.SupportsIndex) -> None:
    """
    cudaDeviceGraphMemTrim.
    """
def unavailable_reason() -> str:
    ...
def zeros(shape: typing.Any, dtype: typing.Any = ..., *, stream: typing.Any = None) -> DeviceArray:
    """
    Zero-filled device array, allocated and cleared in order on `stream` (default: current).
    """

class _sim_module(types.ModuleType):
    """The simulator's controls behind cuweave.sim (refused on the CUDA backend)."""

    @staticmethod
    def configure(seed: typing.SupportsInt | typing.SupportsIndex | None) -> None:
        ...
    @staticmethod
    def configure_faults(seed: typing.SupportsInt | typing.SupportsIndex | None, rate: typing.SupportsFloat | typing.SupportsIndex, kinds: collections.abc.Sequence[str] = []) -> None:
        ...
    @staticmethod
    def injected_faults() -> list[tuple[str, str]]:
        ...
    @staticmethod
    def memory_in_use() -> dict:
        ...
    @staticmethod
    def seed() -> int | None:
        ...

class _sanitizer_foreign_module(types.ModuleType):
    """What another library did, told by its hooks (cuweave/_torch_hooks.py, cuweave/_cupy_hooks.py); call only while the sanitizer is enabled."""

    @staticmethod
    def allocated(address: typing.SupportsInt | typing.SupportsIndex, bytes: typing.SupportsInt | typing.SupportsIndex, stream: Stream, allocator: str = 'PyTorch') -> None:
        """
        Another library's allocator ("PyTorch" or "CuPy": whose fixes a report gives) handed out [address, address + bytes) for work on `stream`: its earlier users must be ordered before its new holder's first use.
        """
    @staticmethod
    def argument_ranges(layout: typing.Any, values: collections.abc.Sequence[str]) -> typing.Any:
        """
        What a launch of a kernel of parameters `layout` with these argument values touches, as (address, bytes, writes) ranges; None where the values do not fit the parameters.
        """
    @staticmethod
    def device_synchronized(device: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @staticmethod
    def event_destroyed(event: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @staticmethod
    def event_recorded(event: typing.SupportsInt | typing.SupportsIndex, stream: Stream) -> None:
        ...
    @staticmethod
    def event_synchronized(event: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @staticmethod
    def freed(address: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        The block handed out at `address` was freed by its allocator.
        """
    @staticmethod
    def host_operation(name: str, ranges: collections.abc.Sequence[tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex, bool]]) -> None:
        """
        Checks what the host reads and writes now through another library, (address, bytes, writes) ranges of memory that streams' copies also touch (pinned host memory).
        """
    @staticmethod
    def launch(kernel: str, layout: typing.Any, stream: typing.SupportsInt | typing.SupportsIndex, movable: bool, values: collections.abc.Sequence[str], checked: collections.abc.Callable) -> tuple[typing.Any, typing.Any]:
        """
        One launch of another library's kernel as the watch answers it (for a backend without the watch): returns (the stream handle the weave moved it to, or None; the exception class to raise after it, or None).
        """
    @staticmethod
    def launch_queued() -> None:
        """
        The launch moved last is queued: the stream it was called on follows it.
        """
    @staticmethod
    def operation(stream: Stream, name: str, ranges: collections.abc.Sequence[tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex, bool]], synchronizes_reported: bool = False) -> None:
        """
        Checks an operation another library queued on `stream` touching (address, bytes, writes) ranges (synchronizes_reported: that library reports all its synchronizes, so the stream is never found idle).
        """
    @staticmethod
    def place_foreign_work(on: bool, stream: typing.SupportsInt | typing.SupportsIndex | None = None) -> bool:
        """
        Whether the watch places other libraries' launches on this thread (inside a weave). Turned on in a weave under a capture, the library's current `stream` joins the capture, so that its work in the block is captured; turned off, the weave's first stream waits for the streams that joined (call it before the weave ends). Returns whether a stream joined.
        """
    @staticmethod
    def stream_recorded(address: typing.SupportsInt | typing.SupportsIndex, stream: Stream) -> None:
        """
        The block handed out at `address` is used on `stream` too, recorded with its allocator (record_stream).
        """
    @staticmethod
    def stream_synchronized(stream: Stream) -> None:
        ...
    @staticmethod
    def stream_waited_event(stream: Stream, event: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    @staticmethod
    def synchronizes_reported(stream: Stream) -> None:
        """
        The owner of the adopted `stream` reports its synchronizes: found idle, it is not taken as waited for.
        """
    @staticmethod
    def unmoved(stream: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Work queued on `stream` that was not moved: launches moved off it later wait for it.
        """
    @staticmethod
    def watch_launches(wants: typing.Any, checked: typing.Any, copied: typing.Any = None, ordered: typing.Any = None) -> None:
        """
        Watches kernels launched through the driver by other libraries: wants(kernel, module) is asked once per kernel, answering its parameters as (array, writes, ndim, itemsize) tuples, or None not to watch it. Inside a weave that places other libraries' work, a watched launch is placed by the bytes its arrays cover; while the sanitizer is on, checked(kernel, stream, placed stream or None, ranges or None: the values did not fit) is told each watched launch, answering None or an exception class to raise after the launch. copied(call, destination, destination_memory, source, source_memory, bytes, stream) is told each copy they make through the runtime (memory: 'device', 'pinned' or 'pageable'), and ordered(kind, event, stream) each event record ('record'), stream wait ('wait') and synchronize ('synchronize stream', 'synchronize event', 'synchronize device': the device's index in place of the stream) they make through the runtime, both while the sanitizer is on; (None, None) stops.
        """

class _sanitizer_module(types.ModuleType):
    """The stream-race sanitizer behind cuweave.sanitize()."""

    foreign: _sanitizer_foreign_module
    @staticmethod
    def clock_sizes() -> tuple[int, int]:
        """
        (agents not dropped, entries of the longest clock)
        """
    @staticmethod
    def disable() -> None:
        ...
    @staticmethod
    def enable(mode: str) -> None:
        ...
    @staticmethod
    def enabled() -> bool:
        ...
    @staticmethod
    def host_allocated(address: typing.SupportsInt | typing.SupportsIndex, bytes: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Host memory another library's allocator handed out once every earlier use was done (PyTorch's pinned blocks): its history is forgotten.
        """
    @staticmethod
    def shadow_ranges() -> int:
        ...

class _ops_module(types.ModuleType):
    """The built-in kernels behind cuweave.ops."""

    @staticmethod
    def add(x: typing.Any, y: typing.Any, *, out: typing.Any = None, stream: typing.Any = None) -> DeviceArray:
        """
        out = x + y, y an array of x's shape and dtype or a scalar; a new array when out is None. Ordered on `stream` (default: current); returns out.
        """
    @staticmethod
    def axpy(alpha: typing.Any, x: typing.Any, y: typing.Any, *, out: typing.Any = None, stream: typing.Any = None) -> DeviceArray:
        """
        out = alpha * x + y, a new array when out is None (into y: out=y). Ordered on `stream` (default: current); returns out.
        """
    @staticmethod
    def copy(dst: typing.Any, src: typing.Any, *, stream: typing.Any = None) -> DeviceArray:
        """
        dst[...] = src on the device, ordered on `stream` (default: current); returns dst.
        """
    @staticmethod
    def multiply(x: typing.Any, y: typing.Any, *, out: typing.Any = None, stream: typing.Any = None) -> DeviceArray:
        """
        out = x * y, y an array of x's shape and dtype or a scalar; a new array when out is None. Ordered on `stream` (default: current); returns out.
        """
    @staticmethod
    def scale(x: typing.Any, alpha: typing.Any, *, out: typing.Any = None, stream: typing.Any = None) -> DeviceArray:
        """
        out = alpha * x, a new array when out is None (in place: out=x). Ordered on `stream` (default: current); returns out.
        """
    @staticmethod
    def sum(x: typing.Any, *, out: typing.Any = None, stream: typing.Any = None) -> DeviceArray:
        """
        The sum of x's elements as a 0-d device array (int32 sums widen to int64), ordered on `stream`; into `out` (one element of that type) when given. Deterministic: the same input gives the same result.
        """

class _weave_module(types.ModuleType):
    """The active cuweave.weave() block, for work it cannot see by itself."""

    @staticmethod
    def active() -> bool:
        """
        Whether a weave is active on this thread.
        """
    @staticmethod
    def allocated(pointer: typing.SupportsInt | typing.SupportsIndex, bytes: typing.SupportsInt | typing.SupportsIndex, stream: Stream) -> None:
        """
        Memory another library allocated in `stream`'s order inside the active weave (its users elsewhere wait).
        """
    @staticmethod
    def kept_by_capture(stream: Stream, objects: list) -> bool:
        """
        Whether `stream` takes part in a capture; if it does, `objects` (another library's arrays its captured work touches) live as long as the graph the capture makes, so that their memory is not handed out again while replays may still use it.
        """
    @staticmethod
    def place(ranges: collections.abc.Sequence[tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex, bool]], stream: typing.Any = None) -> Stream:
        """
        Places an operation touching (address, bytes, writes) ranges in the active weave: the stream to queue it on, after the waits it needs.
        """
    @staticmethod
    def placing_device() -> int:
        """
        The current stream's device where a hook built against another library places its operators now (a weave active on this thread, no capture on the current stream), else -1.
        """
