// The host simulator backend: the whole API on host threads, with CUDA's ordering rules and errors.
// See Note [Simulator scheduling] in scheduler.hpp and Note [Simulated capture and graphs] in capture_book.hpp.
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cuweave/backend.hpp"
#include "sim/capture_book.hpp"
#include "sim/device_access.hpp"
#include "sim/graph_store.hpp"
#include "sim/memory_registry.hpp"
#include "sim/sim_collectives.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_error.hpp"
#include "sim/sim_graph.hpp"
#include "sim/sim_kernels.hpp"
#include "sim/sim_tracer.hpp"

namespace cuweave::sim {

namespace {

StreamHandle const kLegacyHandle = reinterpret_cast<StreamHandle>(std::uintptr_t{1});
StreamHandle const kPerThreadHandle = reinterpret_cast<StreamHandle>(std::uintptr_t{2});

int configured_device_count() {
  const char* value = std::getenv("CUWEAVE_SIM_DEVICES");
  if (value == nullptr || *value == '\0') return 1;
  const int count = std::atoi(value);
  return count > 0 ? count : 1;
}

class SimBackend final : public Backend {
 public:
  const char* name() const noexcept override { return "sim"; }
  Tracer& tracer() override { return tracer_; }

  // The stream a handle means on `device` (the calling thread's own for the per-thread default stream).
  SimStream* stream_on(StreamHandle handle, int device, const char* call) {
    if (handle == kLegacyHandle || handle == nullptr || handle == kPerThreadHandle) {
      access().check_context(device, call);
      return handle == kPerThreadHandle ? scheduler().per_thread_stream(device) : scheduler().legacy_stream(device);
    }
    auto* stream = static_cast<SimStream*>(handle);
    if (!scheduler().known(stream)) fail(call, kInvalidResourceHandle, "invalid stream handle");
    access().check_context(stream->device, call);
    return stream;
  }

  int device_count() noexcept override { return devices_; }
  std::string unavailable_reason() override { return ""; }
  void require_device() override {}

  int current_device() override { return current_device_; }
  void set_current_device(int device) override { current_device_ = checked(device, "cudaSetDevice"); }

  DeviceProperties device_properties(int device) override {
    DeviceProperties props;
    props.ordinal = checked(device, "cudaGetDeviceProperties");
    props.name = "cuweave simulator (host threads)";
    props.multiprocessor_count = 4;
    props.async_engine_count = 2;
    props.lowest_priority = 0;
    props.highest_priority = -5;  // the range current NVIDIA GPUs report
    props.total_memory = kSimulatedDeviceMemory;
    props.pci_bus_id = "sim:" + std::to_string(device);
    return props;
  }

  void synchronize_device(int device) override {
    checked(device, "cudaDeviceSynchronize");
    captures().check_device_synchronize(device, "cudaDeviceSynchronize");
    scheduler().synchronize_device(device);
    access().check_context(device, "cudaDeviceSynchronize");
  }
  bool synchronize_device_for(int device, const WaitSlice& slice) override {
    checked(device, "cudaDeviceSynchronize");
    captures().check_device_synchronize(device, "cudaDeviceSynchronize");
    const bool done = scheduler().synchronize_device(device, slice.until);
    access().check_context(device, "cudaDeviceSynchronize");
    return done;
  }
  std::pair<int, int> driver_version() override { return {0, 0}; }
  std::pair<int, int> runtime_version() override { return {0, 0}; }

  StreamHandle legacy_default_stream() const noexcept override { return kLegacyHandle; }
  StreamHandle per_thread_default_stream() const noexcept override { return kPerThreadHandle; }

  StreamHandle create_stream(int device, int priority, bool blocking) override {
    return scheduler().create_stream(checked(device, "cudaStreamCreateWithPriority"), priority, blocking);
  }
  void destroy_stream(StreamHandle handle) noexcept override {
    if (handle == kLegacyHandle || handle == kPerThreadHandle) return;
    captures().forget(static_cast<SimStream*>(handle));
    scheduler().destroy_stream(static_cast<SimStream*>(handle));
  }
  StreamInfo stream_info(StreamHandle handle) override {
    SimStream* stream = resolve_stream(handle, "cudaStreamGetDevice");
    return StreamInfo{stream->device, stream->priority, stream->blocking};
  }
  void synchronize_stream(StreamHandle handle) override {
    SimStream* stream = resolve_stream(handle, "cudaStreamSynchronize");
    captures().check_stream_synchronize(stream, "cudaStreamSynchronize");
    scheduler().synchronize_stream(stream);
    access().check_context(stream->device, "cudaStreamSynchronize");
  }
  bool synchronize_stream_for(StreamHandle handle, const WaitSlice& slice) override {
    SimStream* stream = resolve_stream(handle, "cudaStreamSynchronize");
    captures().check_stream_synchronize(stream, "cudaStreamSynchronize");
    const bool done = scheduler().synchronize_stream(stream, slice.until);
    access().check_context(stream->device, "cudaStreamSynchronize");
    return done;
  }
  bool stream_idle(StreamHandle handle) override {
    SimStream* stream = resolve_stream(handle, "cudaStreamQuery");
    captures().check_stream_query(stream, "cudaStreamQuery");
    const bool idle = scheduler().stream_idle(stream);
    access().check_context(stream->device, "cudaStreamQuery");
    return idle;
  }
  void stream_wait_event(StreamHandle handle, EventHandle event_handle) override {
    SimStream* stream = resolve_stream(handle, "cudaStreamWaitEvent");
    SimEvent* event = resolve_event(event_handle, "cudaStreamWaitEvent");
    captures().wait_or_run(stream, event,
                           [&] { scheduler().wait(stream, event, traced(trace::Kind::EventWait, *stream)); });
  }
  void launch_host_function(StreamHandle handle, HostFunction function, void* user_data) override {
    SimStream* stream = resolve_stream(handle, "cudaLaunchHostFunc");
    captures().capture_or_run(
        stream, "cudaLaunchHostFunc", [&] { return chain(HostNode{function, user_data}); },
        [&] { scheduler().enqueue(stream, [function, user_data] { function(user_data); }); });
  }

  HostFlagHandle create_host_flag() override { return scheduler().create_host_flag(); }
  void destroy_host_flag(HostFlagHandle flag) noexcept override {
    scheduler().destroy_host_flag(static_cast<HostFlag*>(flag));
  }
  void stream_wait_host_flag(StreamHandle handle, HostFlagHandle flag) override {
    SimStream* stream = resolve_stream(handle, "cuStreamWaitValue32");
    if (capture_state(handle).status != CaptureState::Status::None) {
      fail("cuStreamWaitValue32", kStreamCaptureUnsupported,
           "a wait for a host flag cannot be captured: its value is fixed when the graph is built");
    }
    scheduler().wait_host_flag(stream, static_cast<HostFlag*>(flag));
  }
  void raise_host_flag(HostFlagHandle flag) noexcept override { scheduler().raise_host_flag(static_cast<HostFlag*>(flag)); }

  EventHandle create_event(int device, unsigned flags) override {
    return scheduler().create_event(checked(device, "cudaEventCreateWithFlags"), flags);
  }
  void destroy_event(EventHandle event) noexcept override {
    captures().forget(static_cast<SimEvent*>(event));
    scheduler().destroy_event(static_cast<SimEvent*>(event));
  }
  void record_event(EventHandle event_handle, StreamHandle handle) override {
    SimEvent* event = resolve_event(event_handle, "cudaEventRecord");
    SimStream* stream = resolve_stream(handle, "cudaEventRecord");
    if (event->device != stream->device) {
      fail("cudaEventRecord", kInvalidResourceHandle,
           "the event belongs to device " + std::to_string(event->device) + " and the stream to device " +
               std::to_string(stream->device) + ": an event is recorded only on a stream of its own device");
    }
    captures().record_or_run(event, stream,
                             [&] { scheduler().record(event, stream, traced(trace::Kind::EventRecord, *stream)); });
  }
  bool event_complete(EventHandle event_handle) override {
    SimEvent* event = resolve_event(event_handle, "cudaEventQuery");
    captures().check_event_query(event, "cudaEventQuery");
    const bool complete = scheduler().event_complete(event);
    access().check_context(event->device, "cudaEventQuery");
    return complete;
  }
  void synchronize_event(EventHandle event_handle) override {
    SimEvent* event = resolve_event(event_handle, "cudaEventSynchronize");
    captures().check_event_synchronize(event, "cudaEventSynchronize");
    scheduler().synchronize_event(event);
    access().check_context(event->device, "cudaEventSynchronize");
  }
  bool synchronize_event_for(EventHandle event_handle, const WaitSlice& slice) override {
    SimEvent* event = resolve_event(event_handle, "cudaEventSynchronize");
    captures().check_event_synchronize(event, "cudaEventSynchronize");
    const bool done = scheduler().synchronize_event(event, slice.until);
    access().check_context(event->device, "cudaEventSynchronize");
    return done;
  }
  float elapsed_ms(EventHandle start, EventHandle end) override {
    SimEvent* first = resolve_event(start, "cudaEventElapsedTime");
    SimEvent* last = resolve_event(end, "cudaEventElapsedTime");
    if (!(first->flags & kEventTiming) || !(last->flags & kEventTiming)) {
      fail("cudaEventElapsedTime", kInvalidResourceHandle, "an event was created without timing");
    }
    captures().check_event_query(first, "cudaEventElapsedTime");
    captures().check_event_query(last, "cudaEventElapsedTime");
    return static_cast<float>(scheduler().elapsed_ms(first, last));
  }
  std::string event_ipc_handle(EventHandle) override {
    fail("cudaIpcGetEventHandle", kNotSupported, "interprocess events need a GPU");
  }
  EventHandle open_event_ipc_handle(const std::string&) override {
    fail("cudaIpcOpenEventHandle", kNotSupported, "interprocess events need a GPU");
  }

  // On a capturing stream too, an allocation is an ordinary one, usable at once (no graph node).
  void* allocate_device(std::size_t bytes, int device, StreamHandle handle) override {
    resolve_stream(handle, "cudaMallocFromPoolAsync");
    return MemoryRegistry::instance().allocate(bytes, MemoryKind::Device, checked(device, "cudaMallocFromPoolAsync"),
                                               /*pooled=*/true);
  }
  // On a capturing stream, the free follows the work queued before the capture began (captured work never
  // reaches the scheduler).
  void free_device(void* pointer, StreamHandle handle) noexcept override {
    try {  // stream-ordered: after the work queued so far on the stream
      scheduler().enqueue(resolve_stream(handle, "cudaFreeAsync"), [pointer] { MemoryRegistry::instance().release(pointer); });
    } catch (...) {
      MemoryRegistry::instance().release(pointer);
    }
  }
  void* allocate_pinned(std::size_t bytes) override {
    return MemoryRegistry::instance().allocate(bytes, MemoryKind::Pinned, -1);
  }
  void* allocate_unpooled(std::size_t bytes, int device) override {
    return MemoryRegistry::instance().allocate(bytes, MemoryKind::Device, checked(device, "cudaMalloc"));
  }
  void free_unpooled(void* pointer) noexcept override { MemoryRegistry::instance().release(pointer); }
  void free_pinned(void* pointer) noexcept override { MemoryRegistry::instance().release(pointer); }
  void register_host(void* pointer, std::size_t bytes) override {
    MemoryRegistry::instance().register_range(pointer, bytes);
  }
  void unregister_host(void* pointer) override { MemoryRegistry::instance().unregister_range(pointer); }
  bool is_pinned(const void* pointer) override {
    auto range = MemoryRegistry::instance().find(pointer);
    return range && range->kind != MemoryKind::Device;
  }
  int pointer_device(const void* pointer) override {
    auto range = MemoryRegistry::instance().find(pointer);
    return range && range->kind == MemoryKind::Device ? range->device : -1;
  }

  // Simulated devices reach each other directly, unless CUWEAVE_SIM_PEER_ACCESS=0 (no peer links: copies
  // between devices then go through the host, as CUDA's do).
  bool enable_peer_access(int device, int peer) override {
    checked(device, "cudaDeviceEnablePeerAccess");
    checked(peer, "cudaDeviceEnablePeerAccess");
    static const bool links = [] {
      const char* value = std::getenv("CUWEAVE_SIM_PEER_ACCESS");
      return value == nullptr || std::string(value) != "0";
    }();
    if (!links || device == peer) return false;
    for (auto [one, other] : {std::make_pair(device, peer), std::make_pair(peer, device)}) {
      access().enable_peer(one, other);
      access().grant_pool(other, one);
    }
    return true;
  }

  void copy_async(void* destination, const void* source, std::size_t bytes, StreamHandle handle) override {
    SimStream* stream = resolve_stream(handle, "cudaMemcpyAsync");
    if (devices_ > 1) {  // (the only device reaches its own pool)
      for (const void* side : {static_cast<const void*>(destination), source}) {
        refuse_ungranted_pool(side, current_device_, "the current device", "cudaMemcpyAsync");
        refuse_ungranted_pool(side, stream->device, "the stream's device", "cudaMemcpyAsync");
      }
    }
    queue_copy(destination, source, bytes, stream, "cudaMemcpyAsync");
  }

  void copy_between_devices(void* destination, int destination_device, const void* source, int source_device,
                            std::size_t bytes, StreamHandle handle) override {
    checked(destination_device, "cudaMemcpyPeerAsync");
    checked(source_device, "cudaMemcpyPeerAsync");
    const bool direct = access().pool_granted(destination_device, source_device) &&
                        access().pool_granted(source_device, destination_device);
    if (direct) {
      copy_async(destination, source, bytes, handle);
      return;
    }
    // As cudaMemcpyPeerAsync: staged through the host, needing no access to either side.
    queue_copy(destination, source, bytes, resolve_stream(handle, "cudaMemcpyPeerAsync"), "cudaMemcpyPeerAsync");
  }

  // Queues a copy whose access was checked (Note [Simulated device access]).
  void queue_copy(void* destination, const void* source, std::size_t bytes, SimStream* stream, const char* call) {
    const bool source_pageable = !within_range(source, bytes, call);
    const bool destination_pageable = !within_range(destination, bytes, call);
    std::uint64_t wait_for = 0;
    captures().capture_or_run(
        stream, call, [&] { return chain(CopyNode{destination, source, bytes}); },
        [&] {
          if (source_pageable && destination_pageable) {
            std::memcpy(destination, source, bytes);
            return;
          }
          auto trace = traced(trace::Kind::Copy, *stream, {}, bytes, copy_direction(destination, source));
          if (source_pageable) {
            // CUDA stages pageable sources before returning: later host writes do not reach the copy.
            auto staged = std::make_shared<std::vector<unsigned char>>(
                static_cast<const unsigned char*>(source), static_cast<const unsigned char*>(source) + bytes);
            scheduler().enqueue(
                stream, [destination, staged] { std::memcpy(destination, staged->data(), staged->size()); }, {}, {},
                std::move(trace));
          } else if (destination_pageable) {
            // CUDA returns from a copy into pageable memory only once it has completed (waited for below).
            wait_for = scheduler().enqueue(stream, [=] { std::memcpy(destination, source, bytes); }, {}, {},
                                           std::move(trace));
          } else {
            scheduler().enqueue(stream, [=] { std::memcpy(destination, source, bytes); }, {}, {}, std::move(trace));
          }
        });
    if (wait_for != 0) scheduler().wait_for_count(stream, wait_for);
  }

  bool copy_by_kernel(void* destination, const void* source, std::size_t bytes, int device,
                      StreamHandle handle) override {
    SimStream* stream = resolve_stream(handle, "cudaLaunchKernel");
    // As on a GPU: the device reaches its own memory and pinned host memory, nothing else.
    const auto reachable = [&](const void* pointer) {
      auto range = MemoryRegistry::instance().find(pointer);
      return range && (range->kind != MemoryKind::Device || range->device == device);
    };
    if (!reachable(destination) || !reachable(source)) return false;
    within_range(destination, bytes, "cudaLaunchKernel");
    within_range(source, bytes, "cudaLaunchKernel");
    captures().capture_or_run(
        stream, "cudaLaunchKernel", [&] { return chain(CopyKernel{destination, source, bytes}); },
        [&] {
          scheduler().enqueue(stream, [=] { std::memcpy(destination, source, bytes); }, {}, {},
                              traced(trace::Kind::Kernel, *stream, "copy_kernel"));
        });
    return true;
  }

  void memset_async(void* destination, int value, std::size_t bytes, StreamHandle handle) override {
    within_range(destination, bytes, "cudaMemsetAsync");
    SimStream* stream = resolve_stream(handle, "cudaMemsetAsync");
    captures().capture_or_run(
        stream, "cudaMemsetAsync", [&] { return chain(MemsetNode{destination, value, bytes}); },
        [&] {
          scheduler().enqueue(stream, [=] { std::memset(destination, value, bytes); }, {}, {},
                              traced(trace::Kind::Memset, *stream, {}, bytes));
        });
  }

  void fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
            StreamHandle handle) override {
    within_range(destination, count * pattern_bytes, "fill kernel");
    std::vector<unsigned char> value(static_cast<const unsigned char*>(pattern),
                                     static_cast<const unsigned char*>(pattern) + pattern_bytes);
    SimStream* stream = resolve_stream(handle, "cudaLaunchKernel");
    captures().capture_or_run(
        stream, "cudaLaunchKernel", [&] { return chain(FillKernel{destination, count, value}); },
        [&] {
          if (!kernel_reaches(*stream, {destination})) return queue_fault(stream, "fill");
          scheduler().enqueue(stream, [destination, count, value] { run_fill(destination, count, value); }, {}, {},
                              traced(trace::Kind::Kernel, *stream, "fill"));
        });
  }

  CompiledKernel compile(const std::string&, const std::string&, const std::vector<std::string>&, int) override {
    fail("nvrtcCompileProgram", kNotSupported,
         "runtime-compiled CUDA kernels need the CUDA backend and a GPU: the simulator cannot run CUDA C++. "
         "On the simulator use the built-in kernels (cuweave.ops)");
  }
  ModuleHandle load_module(const std::string&, int) override {
    fail("cudaLibraryLoadData", kNotSupported, kCompiledKernelsNeedGpu);
  }
  void unload_module(ModuleHandle, int) noexcept override {}
  KernelHandle get_kernel(ModuleHandle, const std::string&) override {
    fail("cudaLibraryGetKernel", kNotSupported, kCompiledKernelsNeedGpu);
  }
  std::vector<std::size_t> kernel_parameter_sizes(KernelHandle) override {
    fail("cudaFuncGetParamInfo", kNotSupported, kCompiledKernelsNeedGpu);
  }
  void launch_kernel(KernelHandle, Dim3, Dim3, std::size_t, void**, StreamHandle) override {
    fail("cudaLaunchKernel", kNotSupported, kCompiledKernelsNeedGpu);
  }

  void begin_capture(StreamHandle handle, CaptureMode mode) override {
    captures().begin(resolve_stream(handle, "cudaStreamBeginCapture"), mode);
  }
  GraphHandle end_capture(StreamHandle handle) override {
    return graphs().adopt(captures().end(resolve_stream(handle, "cudaStreamEndCapture")));
  }
  void capture_graph(StreamHandle handle, GraphHandle graph) override {
    constexpr const char* kCall = "cudaGraphAddChildGraphNode";
    SimStream* stream = resolve_stream(handle, kCall);
    std::shared_ptr<Graph> copy = graphs().copy_of(graph, kCall);
    captures().capture_or_run(
        stream, kCall, [&] { return chain(ChildGraphNode{copy}); },
        [&] { fail(kCall, kIllegalState, "this stream is not capturing: there is no capture to add the graph to"); });
  }
  CaptureState capture_state(StreamHandle handle) override {
    return captures().state(resolve_stream(handle, "cudaStreamGetCaptureInfo"));
  }

  ConditionHandle create_condition(StreamHandle handle, unsigned default_value) override {
    return captures().create_condition(resolve_stream(handle, "cudaGraphConditionalHandleCreate"), default_value);
  }
  ConditionalNode capture_conditional(StreamHandle handle, ConditionHandle condition, ConditionalKind kind,
                                      unsigned bodies) override {
    return captures().add_conditional(resolve_stream(handle, "cudaGraphAddNode"), condition, kind, bodies);
  }
  std::vector<GraphNodeHandle> capture_frontier(StreamHandle handle) override {
    return captures().frontier(resolve_stream(handle, "cudaStreamGetCaptureInfo"));
  }
  void begin_capture_into(StreamHandle handle, GraphHandle graph, CaptureMode mode) override {
    captures().begin_into(resolve_stream(handle, "cudaStreamBeginCaptureToGraph"), graph, mode);
  }
  void end_capture_into(StreamHandle handle) override {
    captures().end_into(resolve_stream(handle, "cudaStreamEndCapture"));
  }
  ConditionHandle create_graph_condition(GraphHandle, unsigned default_value) override {
    return make_condition(default_value);
  }
  ConditionalNode add_conditional_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                       ConditionHandle condition, ConditionalKind kind, unsigned bodies) override {
    return graphs().add_conditional(graph, dependencies, condition, kind, bodies);
  }
  GraphNodeHandle add_set_condition_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                         ConditionHandle condition, const ConditionRule& rule) override {
    within_range(rule.element, element_bytes(rule.type), "cudaGraphAddKernelNode");
    return graphs().add(graph, dependencies, SetConditionKernel{condition, rule}, "cudaGraphAddKernelNode");
  }
  void set_condition(ConditionHandle condition, const ConditionRule& rule, StreamHandle handle) override {
    constexpr const char* kCall = "cudaLaunchKernel";
    within_range(rule.element, element_bytes(rule.type), kCall);
    SimStream* stream = resolve_stream(handle, kCall);
    captures().capture_or_run(
        stream, kCall, [&] { return chain(SetConditionKernel{condition, rule}); },
        [&] {
          fail(kCall, kIllegalState,
               "a condition is set by work captured into the graph that owns it; this stream is not capturing");
        });
  }

  GraphHandle create_graph() override { return graphs().create(); }
  void destroy_graph(GraphHandle graph) noexcept override { graphs().destroy_graph(graph); }
  GraphNodeHandle add_kernel_node(GraphHandle, const std::vector<GraphNodeHandle>&, KernelHandle, Dim3, Dim3,
                                  std::size_t, void**) override {
    fail("cudaGraphAddKernelNode", kNotSupported, kCompiledKernelsNeedGpu);
  }
  GraphNodeHandle add_copy_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies, void* destination,
                                const void* source, std::size_t bytes) override {
    within_range(source, bytes, "cudaGraphAddMemcpyNode1D");
    within_range(destination, bytes, "cudaGraphAddMemcpyNode1D");
    return graphs().add(graph, dependencies, CopyNode{destination, source, bytes}, "cudaGraphAddMemcpyNode1D");
  }
  GraphNodeHandle add_memset_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies, void* destination,
                                  int value, std::size_t bytes) override {
    within_range(destination, bytes, "cudaGraphAddMemsetNode");
    return graphs().add(graph, dependencies, MemsetNode{destination, value, bytes}, "cudaGraphAddMemsetNode");
  }
  GraphNodeHandle add_host_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                HostFunction function, void* user_data) override {
    if (function == nullptr) fail("cudaGraphAddHostNode", kInvalidValue, "the host function is null");
    return graphs().add(graph, dependencies, HostNode{function, user_data}, "cudaGraphAddHostNode");
  }
  GraphNodeHandle add_event_record_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                        EventHandle event) override {
    return graphs().add(graph, dependencies, EventRecordNode{resolve_event(event, "cudaGraphAddEventRecordNode")},
                        "cudaGraphAddEventRecordNode");
  }
  GraphNodeHandle add_event_wait_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                      EventHandle event) override {
    return graphs().add(graph, dependencies, EventWaitNode{resolve_event(event, "cudaGraphAddEventWaitNode")},
                        "cudaGraphAddEventWaitNode");
  }
  GraphNodeHandle add_empty_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies) override {
    return graphs().add(graph, dependencies, EmptyNode{}, "cudaGraphAddEmptyNode");
  }
  GraphNodeHandle add_child_graph_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                       GraphHandle child) override {
    return graphs().add_child(graph, dependencies, child, "cudaGraphAddChildGraphNode");
  }
  std::vector<GraphNodeInfo> graph_nodes(GraphHandle graph) override { return graphs().nodes(graph); }
  void set_kernel_node_arguments(GraphNodeHandle, void**) override {
    fail("cudaGraphKernelNodeSetParams", kNotSupported, kCompiledKernelsNeedGpu);
  }
  void set_copy_node(GraphNodeHandle node, void* destination, const void* source, std::size_t bytes) override {
    within_range(source, bytes, "cudaGraphMemcpyNodeSetParams1D");
    within_range(destination, bytes, "cudaGraphMemcpyNodeSetParams1D");
    graphs().set_copy(node, CopyNode{destination, source, bytes});
  }
  std::size_t replace_pointers(GraphHandle graph, const std::vector<PointerRemap>& remaps) override {
    return graphs().replace_pointers(graph, remaps);
  }

  GraphExecHandle instantiate_graph(GraphHandle graph) override { return graphs().instantiate(graph); }
  void destroy_graph_exec(GraphExecHandle exec) noexcept override { graphs().destroy_exec(exec); }
  void upload_graph(GraphExecHandle exec, StreamHandle handle) override {
    graphs().launchable(exec, "cudaGraphUpload");  // nothing to upload: checks the handles only
    resolve_stream(handle, "cudaGraphUpload");
  }
  void launch_graph(GraphExecHandle exec, StreamHandle handle) override {
    SimStream* stream = resolve_stream(handle, "cudaGraphLaunch");
    Launchable launchable = graphs().launchable(exec, "cudaGraphLaunch");
    captures().capture_or_run(
        stream, "cudaGraphLaunch",
        [&] { return chain(ChildGraphNode{std::shared_ptr<Graph>(launchable.graph->clone())}); },
        [&] { launch(stream, launchable); });
  }
  bool update_graph_exec(GraphExecHandle exec, GraphHandle graph) override { return graphs().update(exec, graph); }

  void arithmetic(const Arithmetic& operation, StreamHandle handle) override {
    const std::size_t bytes = operation.count * element_bytes(operation.type);
    within_range(operation.out, bytes, "cudaLaunchKernel");
    within_range(operation.x, bytes, "cudaLaunchKernel");
    if (operation.y) within_range(operation.y, bytes, "cudaLaunchKernel");
    SimStream* stream = resolve_stream(handle, "cudaLaunchKernel");
    captures().capture_or_run(
        stream, "cudaLaunchKernel", [&] { return chain(ArithmeticKernel{operation}); },
        [&] {
          if (!kernel_reaches(*stream, {operation.out, operation.x, operation.y})) {
            return queue_fault(stream, arithmetic_name(operation.op));
          }
          scheduler().enqueue(stream, [operation] { run_arithmetic(operation); }, {}, {},
                              traced(trace::Kind::Kernel, *stream, arithmetic_name(operation.op)));
        });
  }

  std::string collective_id() override { return sim::collective_id(); }
  CommunicatorHandle create_communicator(const std::string& id, int ranks, int rank, int device) override {
    return join_communicator(id, ranks, rank, checked(device, "ncclCommInitRank"));
  }
  std::vector<CommunicatorHandle> create_communicators(const std::vector<int>& devices) override {
    for (int device : devices) checked(device, "ncclCommInitRankConfig");
    return communicators_for_devices(devices);
  }
  bool communicator_ready(CommunicatorHandle communicator) override { return sim::communicator_ready(communicator); }
  void abort_communicator(CommunicatorHandle communicator) noexcept override {
    sim::abort_communicator(communicator);
  }
  void destroy_communicator(CommunicatorHandle communicator) noexcept override {
    sim::destroy_communicator(communicator);
  }
  void begin_collective_group() override { sim::begin_group(); }
  void end_collective_group() override { sim::end_group(); }
  void collective(const Collective& collective, CommunicatorHandle communicator, StreamHandle handle) override {
    enqueue_collective(collective, communicator, stream_on(handle, communicator_device(communicator), "ncclGroupEnd"));
  }
  bool collective_completed(EventHandle event) override {
    return scheduler().event_done(resolve_event(event, "cudaEventQuery"));
  }

  std::size_t sum_scratch_bytes(std::size_t) override { return 0; }  // partial sums live on the host

  void sum(void* out, const void* x, std::size_t count, NumericType type, void*, StreamHandle handle) override {
    within_range(x, count * element_bytes(type), "cudaLaunchKernel");
    within_range(out, element_bytes(sum_type(type)), "cudaLaunchKernel");
    SimStream* stream = resolve_stream(handle, "cudaLaunchKernel");
    captures().capture_or_run(
        stream, "cudaLaunchKernel",
        [&] {  // two kernels, as the CUDA backend launches them
          return std::vector<NodeParams>{SumPartialsKernel{x, count, type}, SumFinalKernel{out, type}};
        },
        [&] {
          if (!kernel_reaches(*stream, {out, x})) return queue_fault(stream, "sum");
          scheduler().enqueue(
              stream, [out, x, count, type] { run_sum_final(out, run_sum_partials(x, count, type), type); }, {}, {},
              traced(trace::Kind::Kernel, *stream, "sum"));
        });
  }

  void spin(std::uint64_t nanoseconds, unsigned, std::uint64_t* start_time, StreamHandle handle) override {
    SimStream* stream = resolve_stream(handle, "cudaLaunchKernel");
    captures().capture_or_run(
        stream, "cudaLaunchKernel", [&] { return chain(SpinKernel{nanoseconds, start_time}); },
        [&] {
          // When exploring schedules nothing takes time: only the order of work matters.
          if (!kernel_reaches(*stream, {start_time})) return queue_fault(stream, "spin");
          const bool take_time = !scheduler().seed().has_value();
          scheduler().enqueue(stream, [=] { run_spin(nanoseconds, start_time, take_time); }, {}, {},
                              traced(trace::Kind::Kernel, *stream, "spin"));
        });
  }

 private:
  static constexpr const char* kCompiledKernelsNeedGpu = "compiled CUDA kernels need the CUDA backend and a GPU";

  static Scheduler& scheduler() { return Scheduler::instance(); }
  static CaptureBook& captures() { return CaptureBook::instance(); }
  static GraphStore& graphs() { return GraphStore::instance(); }
  static DeviceAccess& access() { return DeviceAccess::instance(); }

  // Note [Simulated device access]: a copy touching pool memory that `device` (the current device, or the
  // stream's) has not been granted fails as cudaMemcpyAsync does.
  static void refuse_ungranted_pool(const void* pointer, int device, const char* which, const char* call) {
    const std::optional<MemoryRange> range = MemoryRegistry::instance().find(pointer);
    if (!range || range->kind != MemoryKind::Device || !range->pooled) return;
    if (access().pool_granted(range->device, device)) return;
    fail(call, kInvalidValue,
         "the copy touches memory of device " + std::to_string(range->device) + "'s stream-ordered pool, which " +
             which + " (device " + std::to_string(device) + ") has not been granted (cudaMemPoolSetAccess)");
  }

  // Whether a kernel on `stream` reaches every pointer given (null ones are not touched).
  bool kernel_reaches(const SimStream& stream, std::initializer_list<const void*> pointers) const {
    if (devices_ == 1) return true;  // all device memory is the stream's device's
    for (const void* pointer : pointers) {
      if (pointer == nullptr) continue;
      const std::optional<MemoryRange> range = MemoryRegistry::instance().find(pointer);
      if (range && !access().kernel_reaches(stream.device, *range)) return false;
    }
    return true;
  }

  // A kernel that touches memory its device cannot reach faults when it runs: the device's context is lost,
  // which the next call on it reports (Note [Simulated device access]).
  void queue_fault(SimStream* stream, const char* kernel) {
    scheduler().enqueue(stream, [device = stream->device] { DeviceAccess::instance().lose_context(device); }, {}, {},
                        traced(trace::Kind::Kernel, *stream, kernel));
  }

  static std::vector<NodeParams> chain(NodeParams node) { return {std::move(node)}; }

  // One scheduler operation that runs the whole graph (Note [Simulated capture and graphs]), or one per
  // piece where it meets collectives (Note [Simulated collectives]).
  void launch(SimStream* stream, const Launchable& launchable) {
    std::vector<SimEvent*> waits, records;
    collect_events(*launchable.graph, waits, records);
    for (const auto* events : {&waits, &records}) {
      for (SimEvent* event : *events) {
        if (!scheduler().known(event)) {
          fail("cudaGraphLaunch", kInvalidResourceHandle, "an event that the graph's event nodes name was destroyed");
        }
      }
    }
    const std::optional<std::uint64_t> order_seed = scheduler().exploring_draw();
    std::shared_ptr<const Graph> graph = launchable.graph;
    std::shared_ptr<OperationTrace> trace =
        traced(trace::Kind::Graph, *stream, "graph (" + std::to_string(graph->size()) + " nodes)");
    auto run = std::make_shared<GraphRun>();
    if (order_seed) run->order.emplace(*order_seed);
    run->take_time = !order_seed;  // when exploring, nothing takes time
    run->traced = trace.get();
    std::vector<Step> steps;
    if (!holds_collectives(*graph)) {
      steps.push_back(Step{[graph, run] { run_graph(*graph, *run); }, {}, {}, nullptr});
    } else {
      // Cut where it meets collectives (Note [Simulated collectives]), whose places are taken now.
      for (const LaunchPiece& piece : plan_launch(*graph, run->order ? &*run->order : nullptr)) {
        if (piece.collective) {
          for (Step& step : collective_steps(*piece.collective)) steps.push_back(std::move(step));
        } else {
          steps.push_back(Step{[graph, run, nodes = piece.nodes] {
                                 for (const Node* node : nodes) run_node(*node, *run);
                               },
                               {}, {}, nullptr});
        }
      }
    }
    scheduler().enqueue_launch(stream, std::move(steps), waits, records, launchable.launches, trace);
  }

  int checked(int device, const char* call) const {
    if (device < 0 || device >= devices_) fail(call, kInvalidDevice, "device " + std::to_string(device) + " does not exist");
    return device;
  }

  SimStream* resolve_stream(StreamHandle handle, const char* call) { return stream_on(handle, current_device_, call); }

  SimEvent* resolve_event(EventHandle handle, const char* call) {
    auto* event = static_cast<SimEvent*>(handle);
    if (!scheduler().known(event)) fail(call, kInvalidResourceHandle, "invalid event handle");
    access().check_context(event->device, call);
    return event;
  }

  const int devices_ = configured_device_count();
  SimTracer tracer_;
  static thread_local int current_device_;
};

thread_local int SimBackend::current_device_ = 0;

SimBackend& the_backend() {
  static auto* instance = new SimBackend;  // leaked: used until the process ends
  return *instance;
}

}  // namespace

std::uint64_t SimTracer::stream_id(StreamHandle stream, int device) {
  return the_backend().stream_on(stream, device, "cuptiGetStreamIdEx")->id;
}

}  // namespace cuweave::sim

namespace cuweave {

Backend& sim_backend() { return sim::the_backend(); }

}  // namespace cuweave
