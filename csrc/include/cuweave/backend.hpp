// The seam between the CUDA-free core and the code that talks to a device.
//
// Every device operation the core needs goes through Backend. The CUDA backend (csrc/cuda) is the
// only implementation that calls CUDA; a host simulator can implement the same interface. Handles are
// opaque pointers whose meaning belongs to the backend.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cuweave/arithmetic.hpp"
#include "cuweave/collective.hpp"
#include "cuweave/condition.hpp"

namespace cuweave {

using StreamHandle = void*;
using EventHandle = void*;
using HostFunction = void (*)(void* user_data);
using ModuleHandle = void*;
using KernelHandle = void*;
using GraphHandle = void*;
using GraphExecHandle = void*;
using GraphNodeHandle = void*;

// Three extents of a launch grid or block.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// The result of compiling CUDA C++ at run time.
struct CompiledKernel {
  std::string binary;        // CUBIN for the device's architecture
  std::string lowered_name;  // the symbol of the requested kernel (mangled for C++ names)
  std::string log;           // the compiler's messages (warnings), possibly empty
};

struct DeviceProperties {
  int ordinal = 0;
  std::string name;
  int multiprocessor_count = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int async_engine_count = 0;
  int lowest_priority = 0;   // numerically greatest (CUDA: 0)
  int highest_priority = 0;  // numerically least (CUDA: e.g. -5)
  std::size_t total_memory = 0;
  std::string pci_bus_id;
};

struct StreamInfo {
  int device = 0;
  int priority = 0;
  bool blocking = true;
};

// Bit flags for Backend::create_event.
enum EventFlag : unsigned {
  kEventDefault = 0,
  kEventTiming = 1u << 0,
  kEventBlockingSync = 1u << 1,
  kEventInterprocess = 1u << 2,
};

// How a capture treats calls CUDA deems unsafe while it is active (CUDA's cudaStreamCaptureMode):
// Global forbids them in every thread, ThreadLocal in the capturing thread, Relaxed nowhere.
enum class CaptureMode { Global, ThreadLocal, Relaxed };

struct CaptureState {
  enum class Status { None, Active, Invalidated };
  Status status = Status::None;
  std::uint64_t id = 0;  // unique per capture sequence; 0 when status is None
};

enum class GraphNodeKind {
  Kernel, Copy, Memset, Host, EventRecord, EventWait, Empty, ChildGraph, Allocation, Free, Conditional, Other
};

// A conditional node added to a capture, and its bodies (graphs the node owns: if, optional else; one
// while body; the cases of a switch).
struct ConditionalNode {
  GraphNodeHandle node = nullptr;
  std::vector<GraphHandle> bodies;
};

struct GraphNodeInfo {
  GraphNodeHandle node = nullptr;
  GraphNodeKind kind = GraphNodeKind::Other;
  std::string label;                          // what a reader of a drawing needs: kernel name, bytes, direction
  std::vector<GraphNodeHandle> dependencies;  // nodes this one runs after
};

// Replaces pointers into [old_base, old_base + bytes) by the same offset from new_base.
struct PointerRemap {
  const void* old_base = nullptr;
  const void* new_base = nullptr;
  std::size_t bytes = 0;
};

// One slice of a wait that the core splits so that it can be interrupted (Note [Interruptible waits]).
struct WaitSlice {
  std::chrono::steady_clock::time_point began;  // when the whole wait began
  std::chrono::steady_clock::time_point until;  // give up at this time if the work has not completed
};

// A flag in host memory that streams can wait for (Note [Stream-ordered host callbacks]).
using HostFlagHandle = void*;

// How a backend observes what ran, for traces (Note [Tracing] in trace.hpp).
class Tracer {
 public:
  virtual ~Tracer() = default;
  // Collection on and off: the core calls start() when the first trace opens and stop() after the last
  // one closed. start() throws, naming what is missing, where the backend cannot trace.
  virtual void start() = 0;
  virtual void stop() noexcept = 0;
  // Hands everything that has completed so far to trace::deliver().
  virtual void flush() = 0;
  // Now, on the clock activities are stamped with (ns).
  virtual std::uint64_t now_ns() = 0;
  // The id activities on `stream` carry (for the per-thread default stream: the calling thread's own).
  virtual std::uint64_t stream_id(StreamHandle stream, int device) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const noexcept = 0;
  virtual Tracer& tracer() = 0;

  // Devices. device_count() never throws: it answers 0 when no device or driver is usable, and
  // unavailable_reason() then says why.
  virtual int device_count() noexcept = 0;
  virtual std::string unavailable_reason() = 0;
  // Throws DeviceUnavailable, naming what is missing, unless at least one device is usable.
  virtual void require_device() = 0;
  virtual int current_device() = 0;
  virtual void set_current_device(int device) = 0;
  virtual DeviceProperties device_properties(int device) = 0;
  virtual void synchronize_device(int device) = 0;
  // synchronize_device for at most one slice: true once the device's work has completed.
  virtual bool synchronize_device_for(int device, const WaitSlice& slice) = 0;
  virtual std::pair<int, int> driver_version() = 0;
  virtual std::pair<int, int> runtime_version() = 0;

  // Streams. The two default streams are fixed handles valid on every device.
  virtual StreamHandle legacy_default_stream() const noexcept = 0;
  virtual StreamHandle per_thread_default_stream() const noexcept = 0;
  virtual StreamHandle create_stream(int device, int priority, bool blocking) = 0;
  virtual void destroy_stream(StreamHandle stream) noexcept = 0;
  virtual StreamInfo stream_info(StreamHandle stream) = 0;
  virtual void synchronize_stream(StreamHandle stream) = 0;
  // synchronize_stream for at most one slice: true once the stream's work has completed.
  virtual bool synchronize_stream_for(StreamHandle stream, const WaitSlice& slice) = 0;
  virtual bool stream_idle(StreamHandle stream) = 0;
  virtual void stream_wait_event(StreamHandle stream, EventHandle event) = 0;
  // Calls function(user_data) once all prior work on the stream has completed; later work waits for it.
  virtual void launch_host_function(StreamHandle stream, HostFunction function, void* user_data) = 0;
  // Host flags, raised once by the host, for which streams can wait (CUDA: cuStreamWaitValue32 on mapped
  // pinned memory). Destroy a flag only after raising it.
  virtual HostFlagHandle create_host_flag() = 0;
  virtual void destroy_host_flag(HostFlagHandle flag) noexcept = 0;
  // Later work on `stream` waits until the flag has been raised.
  virtual void stream_wait_host_flag(StreamHandle stream, HostFlagHandle flag) = 0;
  // From any host thread.
  virtual void raise_host_flag(HostFlagHandle flag) noexcept = 0;

  // Events.
  virtual EventHandle create_event(int device, unsigned flags) = 0;
  virtual void destroy_event(EventHandle event) noexcept = 0;
  virtual void record_event(EventHandle event, StreamHandle stream) = 0;
  virtual bool event_complete(EventHandle event) = 0;
  virtual void synchronize_event(EventHandle event) = 0;
  // synchronize_event for at most one slice: true once the event has completed.
  virtual bool synchronize_event_for(EventHandle event, const WaitSlice& slice) = 0;
  virtual float elapsed_ms(EventHandle start, EventHandle end) = 0;
  virtual std::string event_ipc_handle(EventHandle event) = 0;
  virtual EventHandle open_event_ipc_handle(const std::string& handle) = 0;

  // Memory. Device allocations are stream-ordered: usable on `stream` at once, freed after its prior work.
  virtual void* allocate_device(std::size_t bytes, int device, StreamHandle stream) = 0;
  virtual void free_device(void* pointer, StreamHandle stream) noexcept = 0;
  virtual void* allocate_pinned(std::size_t bytes) = 0;
  virtual void free_pinned(void* pointer) noexcept = 0;
  virtual void register_host(void* pointer, std::size_t bytes) = 0;
  virtual void unregister_host(void* pointer) = 0;
  virtual bool is_pinned(const void* pointer) = 0;
  // The device whose memory `pointer` points into, or -1 for host or unknown memory.
  virtual int pointer_device(const void* pointer) = 0;
  virtual void copy_async(void* destination, const void* source, std::size_t bytes, StreamHandle stream) = 0;
  // copy_async done by a kernel on `device`, the stream's, instead of a copy engine (Note [Copies by
  // kernel]), where that device reaches both sides directly (its own memory, pinned host memory mapped into
  // its address space); returns false, queuing nothing, where it does not.
  virtual bool copy_by_kernel(void* destination, const void* source, std::size_t bytes, int device,
                              StreamHandle stream) = 0;
  // Lets the work of `device` and `peer` reach each other's memory directly where the hardware allows, both
  // ways: peer access, and each device's stream-ordered pool granted to the other (CUDA's peer access does not
  // cover pools: Note [Simulated device access]); enabled once per pair. Returns whether it can.
  virtual bool enable_peer_access(int device, int peer) = 0;
  // A copy between the memory of two devices on `stream` (of either): directly where enable_peer_access gave
  // them each other's memory, else staged through the host by the driver (CUDA: cudaMemcpyPeerAsync, which
  // needs no access to either side).
  virtual void copy_between_devices(void* destination, int destination_device, const void* source,
                                    int source_device, std::size_t bytes, StreamHandle stream) = 0;
  // Plain device memory (CUDA: cudaMalloc), outside the stream-ordered pools, which any current device may copy
  // to and from. cuweave's arrays live in the pools; this is the kind of memory other libraries' arrays often
  // hold, and the rules of the two differ (Note [Simulated device access]).
  virtual void* allocate_unpooled(std::size_t bytes, int device) = 0;
  virtual void free_unpooled(void* pointer) noexcept = 0;
  virtual void memset_async(void* destination, int value, std::size_t bytes, StreamHandle stream) = 0;

  // Built-in kernels. `pattern` holds `pattern_bytes` (1, 2, 4, 8 or 16) bytes repeated `count` times.
  virtual void fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
                    StreamHandle stream) = 0;
  // Each of `blocks` blocks busy-waits `nanoseconds`; when start_time is given, block 0 writes the device
  // clock (ns) at its start there.
  virtual void spin(std::uint64_t nanoseconds, unsigned blocks, std::uint64_t* start_time, StreamHandle stream) = 0;
  // Runtime compilation and launch of user kernels. compile() throws CompileError with the compiler's
  // log; `name_expression` is an extern "C" name or a C++ name expression such as "scale<float>".
  virtual CompiledKernel compile(const std::string& source, const std::string& name_expression,
                                 const std::vector<std::string>& options, int device) = 0;
  virtual ModuleHandle load_module(const std::string& binary, int device) = 0;
  // Unloads once the work queued on `device` so far has completed (a queued launch may still use the
  // code), without blocking the caller: a thread that holds the GIL must never wait for the device here,
  // where a held stream may be waiting for Python (Note [Enqueueing behind a held stream]). The module may
  // stay loaded until the device is next synchronized (a synchronize nobody asked for would fail captures).
  virtual void unload_module(ModuleHandle module, int device) noexcept = 0;
  virtual KernelHandle get_kernel(ModuleHandle module, const std::string& lowered_name) = 0;
  // The size in bytes of each of the kernel's parameters, in order.
  virtual std::vector<std::size_t> kernel_parameter_sizes(KernelHandle kernel) = 0;
  // `arguments` points at one value per parameter, of that parameter's size.
  virtual void launch_kernel(KernelHandle kernel, Dim3 grid, Dim3 block, std::size_t shared_bytes, void** arguments,
                             StreamHandle stream) = 0;

  // Stream capture. begin_capture starts capturing the work queued on `stream` (and on streams that
  // join by waiting for its events); end_capture returns the graph, or throws (an unjoined fork, an
  // invalidated capture) after the stream has left capture either way.
  virtual void begin_capture(StreamHandle stream, CaptureMode mode) = 0;
  virtual GraphHandle end_capture(StreamHandle stream) = 0;
  virtual CaptureState capture_state(StreamHandle stream) = 0;
  // Adds a copy of `graph` as one node of the capture `stream` takes part in, after the stream's captured
  // work (how a graph replayed inside a capture is captured, without instantiating it there).
  virtual void capture_graph(StreamHandle stream, GraphHandle graph) = 0;

  // Conditional nodes (Note [Conditional nodes] in conditional.hpp). create_condition makes a condition
  // of the graph `stream` captures into, reset to `default_value` at the start of every replay;
  // capture_conditional adds a node running `bodies` graphs under it after the stream's captured work,
  // and makes that node the stream's only dependency. capture_frontier: the nodes the stream's next
  // captured operation would depend on. begin_capture_into captures `stream`'s work into `graph` (a body),
  // with no dependencies; end_capture_into ends that, leaving the nodes in the body.
  virtual ConditionHandle create_condition(StreamHandle stream, unsigned default_value) = 0;
  virtual ConditionalNode capture_conditional(StreamHandle stream, ConditionHandle condition, ConditionalKind kind,
                                              unsigned bodies) = 0;
  virtual std::vector<GraphNodeHandle> capture_frontier(StreamHandle stream) = 0;
  virtual void begin_capture_into(StreamHandle stream, GraphHandle graph, CaptureMode mode) = 0;
  virtual void end_capture_into(StreamHandle stream) = 0;
  // A built-in kernel setting `condition` from rule.element (evaluate_condition in condition.hpp); only
  // inside a capture of the graph that owns the condition (or of one of its bodies).
  virtual void set_condition(ConditionHandle condition, const ConditionRule& rule, StreamHandle stream) = 0;
  // The same for graphs built node by node: a condition of `graph` (the graph that will hold its node),
  // a conditional node with `bodies` empty bodies, a node of the built-in kernel setting a condition.
  virtual ConditionHandle create_graph_condition(GraphHandle graph, unsigned default_value) = 0;
  virtual ConditionalNode add_conditional_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                               ConditionHandle condition, ConditionalKind kind, unsigned bodies) = 0;
  virtual GraphNodeHandle add_set_condition_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                                 ConditionHandle condition, const ConditionRule& rule) = 0;

  // Graphs. Nodes are added after `dependencies` (nodes of the same graph).
  virtual GraphHandle create_graph() = 0;
  virtual void destroy_graph(GraphHandle graph) noexcept = 0;
  virtual GraphNodeHandle add_kernel_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                          KernelHandle kernel, Dim3 grid, Dim3 block, std::size_t shared_bytes,
                                          void** arguments) = 0;
  virtual GraphNodeHandle add_copy_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                        void* destination, const void* source, std::size_t bytes) = 0;
  virtual GraphNodeHandle add_memset_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                          void* destination, int value, std::size_t bytes) = 0;
  virtual GraphNodeHandle add_host_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                        HostFunction function, void* user_data) = 0;
  virtual GraphNodeHandle add_event_record_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                                EventHandle event) = 0;
  virtual GraphNodeHandle add_event_wait_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                              EventHandle event) = 0;
  virtual GraphNodeHandle add_empty_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies) = 0;
  // Embeds a copy of `child` (later changes to `child` do not reach this graph).
  virtual GraphNodeHandle add_child_graph_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                               GraphHandle child) = 0;
  // Every node of `graph`, dependencies before dependents.
  virtual std::vector<GraphNodeInfo> graph_nodes(GraphHandle graph) = 0;
  // New arguments for a kernel node (same kernel, `arguments` as for launch_kernel).
  virtual void set_kernel_node_arguments(GraphNodeHandle node, void** arguments) = 0;
  virtual void set_copy_node(GraphNodeHandle node, void* destination, const void* source, std::size_t bytes) = 0;
  // Repoints kernel arguments, copies and memsets of `graph` (child graphs included) from old to new
  // buffers; returns how many places changed.
  virtual std::size_t replace_pointers(GraphHandle graph, const std::vector<PointerRemap>& remaps) = 0;

  // Executable graphs.
  virtual GraphExecHandle instantiate_graph(GraphHandle graph) = 0;
  virtual void destroy_graph_exec(GraphExecHandle exec) noexcept = 0;
  virtual void upload_graph(GraphExecHandle exec, StreamHandle stream) = 0;
  virtual void launch_graph(GraphExecHandle exec, StreamHandle stream) = 0;
  // Gives `exec` the parameters of `graph`, which must have its topology; false (and `exec` unchanged)
  // when the topology or node kinds differ, so the caller instantiates anew.
  virtual bool update_graph_exec(GraphExecHandle exec, GraphHandle graph) = 0;

  // Element-wise arithmetic (see arithmetic.hpp for the rounding every backend keeps).
  virtual void arithmetic(const Arithmetic& operation, StreamHandle stream) = 0;
  // *out = the sum of x[0..count), in sum_type(type); deterministic for a given count. `scratch`, when
  // given, holds sum_scratch_bytes(count) bytes of device memory the caller keeps alive until the sum has
  // completed (at every replay, when captured); without it the backend uses stream-ordered scratch, which
  // a capture turns into allocation nodes (not allowed inside conditional bodies).
  virtual std::size_t sum_scratch_bytes(std::size_t count) = 0;
  virtual void sum(void* out, const void* x, std::size_t count, NumericType type, void* scratch,
                   StreamHandle stream) = 0;

  // Collectives (Note [Collectives] in collective.hpp). collective_id: a new id that the ranks of one
  // communicator share (NCCL's ncclUniqueId, kCollectiveIdBytes bytes). create_communicator starts making the
  // communicator of rank `rank` of `ranks` on `device`; create_communicators one per device of `devices`,
  // ranks in that order, for one process. Collectives between begin_collective_group and
  // end_collective_group (calling thread; nestable) are issued together, as one thread driving several ranks
  // must. None of these waits for the other ranks (Note [Collective timeouts] in communicator.hpp): they may
  // leave the communicator busy (joining, queuing), and communicator_ready says whether it still is, without
  // waiting; it throws the backend's error where the communicator failed, asynchronously included (a peer
  // that went away). abort_communicator ends whatever the communicator does or has queued, so that its
  // streams move on, and frees it (NCCL's ncclCommAbort); never waits for the other ranks.
  // collective_completed: whether `event`, recorded after a collective, has completed, asked from the
  // watchdog's thread: it never runs queued work (the simulator exploring schedules runs work only for the
  // program's waits).
  static constexpr std::size_t kCollectiveIdBytes = 128;
  virtual std::string collective_id() = 0;
  virtual CommunicatorHandle create_communicator(const std::string& id, int ranks, int rank, int device) = 0;
  virtual std::vector<CommunicatorHandle> create_communicators(const std::vector<int>& devices) = 0;
  virtual bool communicator_ready(CommunicatorHandle communicator) = 0;
  virtual void abort_communicator(CommunicatorHandle communicator) noexcept = 0;
  virtual void destroy_communicator(CommunicatorHandle communicator) noexcept = 0;
  virtual void begin_collective_group() = 0;
  virtual void end_collective_group() = 0;
  virtual void collective(const Collective& collective, CommunicatorHandle communicator, StreamHandle stream) = 0;
  virtual bool collective_completed(EventHandle event) = 0;
};

// The process-wide backend, chosen once, at first use: CUWEAVE_BACKEND=cuda|sim|auto (default auto:
// CUDA when a GPU is usable, else the simulator), unless select_backend() chose before.
Backend& backend();
// Whether the process sees more than one device (set when the backend is chosen). With one, that device is
// always current, and Note [The device follows the stream] has nothing to do.
inline bool several_devices() noexcept;
// Chooses the backend by name ("cuda", "sim" or "auto") before first use. Choosing again is allowed
// only for the same backend; once objects exist their backend cannot change.
void select_backend(const std::string& name);
// The backends themselves (defined in csrc/cuda and csrc/sim).
Backend& cuda_backend();
Backend& sim_backend();

namespace detail {
extern std::atomic<bool> several_devices;  // written once, when the backend is chosen
}
inline bool several_devices() noexcept { return detail::several_devices.load(std::memory_order_relaxed); }

}  // namespace cuweave
