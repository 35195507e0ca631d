// The CUDA backend: the only code in cuweave that calls the CUDA runtime.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cuda/builtin_kernels.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_graphs.hpp"
#include "cuda/cupti_tracer.hpp"
#include "cuda/device_synchronizer.hpp"
#include "cuda/driver_api.hpp"
#include "cuda/host_flags.hpp"
#include "cuda/nccl_collectives.hpp"
#include "cuda/nvrtc_compiler.hpp"
#include "cuda/pointer_attributes.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"

namespace cuweave::cuda {

namespace {

bool means_no_device(cudaError_t error) {
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorInitializationError:
      return true;
    default:
      return false;
  }
}

std::string function_name(const char* expression) {
  const char* open = std::strchr(expression, '(');
  return open ? std::string(expression, open) : std::string(expression);
}

std::string no_device_hint(cudaError_t error) {
  if (error == cudaErrorInsufficientDriver || error == cudaErrorSystemDriverMismatch) {
    return ". cuweave found no usable NVIDIA driver (libcuda.so missing or older than this CUDA runtime); "
           "install or update the NVIDIA driver to use the GPU";
  }
  return ". cuweave found no usable CUDA GPU (check the driver, nvidia-smi and CUDA_VISIBLE_DEVICES); "
         "cuweave.is_available() tells before calling";
}

// Note [Sticky errors]
// ~~~~~~~~~~~~~~~~~~~~
// Some errors poison the CUDA context (an illegal address, a kernel's trap or assert, a hardware fault):
// CUDA says the process is in an inconsistent state and every later call returns the same error until
// the process restarts. Users then met a stream of failures that seemed unrelated to their calls. The
// first such error is remembered here; it and every later failure raise ContextLost, which says plainly
// that the context is unusable and names the call that first failed. Shutdown paths stay quiet
// (CUWEAVE_CUDA_TRY_QUIET), so the process still exits cleanly.
bool is_sticky(cudaError_t error) {
  switch (error) {
    case cudaErrorContained:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

struct FirstStickyError {
  std::mutex mutex;
  std::string call;  // LOCK: mutex; empty until a sticky error was met
  std::string name;  // LOCK: mutex
};

FirstStickyError& first_sticky_error() {
  static auto* first = new FirstStickyError;  // leaked: read by calls made during static destruction
  return *first;
}

std::atomic<bool> context_lost{false};

}  // namespace

void throw_cuda_error(cudaError_t error, const char* expression, const char* file, int line) {
  (void)cudaGetLastError();  // clear a non-sticky error so the next call does not see it
  const std::string call = function_name(expression);
  const std::string name = cudaGetErrorName(error);
  const std::string description = cudaGetErrorString(error);
  if (context_lost.load(std::memory_order_acquire) || is_sticky(error)) {
    FirstStickyError& first = first_sticky_error();
    std::unique_lock<std::mutex> lock(first.mutex);
    if (first.call.empty()) {
      first.call = call;
      first.name = name;
      context_lost.store(true, std::memory_order_release);
      lock.unlock();
      throw ContextLost(call, static_cast<int>(error), name, description, file, line, {}, {});
    }
    std::string first_call = first.call;
    std::string first_name = first.name;
    lock.unlock();
    throw ContextLost(call, static_cast<int>(error), name, description, file, line, std::move(first_call),
                      std::move(first_name));
  }
  if (means_no_device(error)) {
    throw DeviceUnavailable(call, static_cast<int>(error), name, description + no_device_hint(error), file, line);
  }
  throw BackendError(call, static_cast<int>(error), name, description, file, line);
}

namespace {

cudaStream_t as_stream(StreamHandle handle) { return static_cast<cudaStream_t>(handle); }

// A query's answer: true when complete, false when not yet; throws for a failure.
bool finished(cudaError_t status, const char* call) {
  if (status == cudaErrorNotReady) return false;
  if (status != cudaSuccess) throw_cuda_error(status, call, __FILE__, __LINE__);
  return true;
}

// A bounded wait made of queries (Note [Interruptible waits]). During the first kSpinFor of the whole
// wait it spins, yielding, as CUDA's own default synchronization does, so short waits return as soon as
// the work completes; after that it naps between queries, so a long wait costs little CPU and ends at
// most about one nap late. (A spin without yields measured the same on a 1 KB graph round trip, H100.)
template <typename Query>
bool poll_until(const WaitSlice& slice, Query&& complete) {
  constexpr auto kSpinFor = std::chrono::milliseconds(2);
  constexpr auto kNap = std::chrono::microseconds(50);
  while (!complete()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= slice.until) return false;
    if (now - slice.began < kSpinFor) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kNap);
    }
  }
  return true;
}
cudaEvent_t as_event(EventHandle handle) { return static_cast<cudaEvent_t>(handle); }

// Makes `device` current for the guard's lifetime (streams, events and pools belong to a device).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    CUWEAVE_CUDA_TRY(cudaGetDevice(&previous_));
    if (previous_ != device) CUWEAVE_CUDA_TRY(cudaSetDevice(device));
    changed_ = previous_ != device;
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  ~DeviceGuard() {
    if (changed_) CUWEAVE_CUDA_TRY_QUIET(cudaSetDevice(previous_));
  }

 private:
  int previous_ = 0;
  bool changed_ = false;
};

cudaGraph_t as_graph(GraphHandle handle) { return static_cast<cudaGraph_t>(handle); }
cudaGraphExec_t as_exec(GraphExecHandle handle) { return static_cast<cudaGraphExec_t>(handle); }
cudaGraphNode_t as_node(GraphNodeHandle handle) { return static_cast<cudaGraphNode_t>(handle); }

// Captures begun through this backend and not yet ended (any thread).
std::atomic<int> active_captures{0};

cudaStreamCaptureMode cuda_capture_mode(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::Global: return cudaStreamCaptureModeGlobal;
    case CaptureMode::ThreadLocal: return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::Relaxed: return cudaStreamCaptureModeRelaxed;
  }
  return cudaStreamCaptureModeGlobal;
}

// The graph `stream` captures into and the nodes its next captured operation will depend on.
struct ActiveCapture {
  cudaGraph_t graph = nullptr;
  std::vector<cudaGraphNode_t> frontier;
};

// Throws for `call` (the node-adding call that would follow) when `stream` is not capturing.
ActiveCapture active_capture(StreamHandle stream, const char* call) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ActiveCapture capture;
  const cudaGraphNode_t* frontier = nullptr;
  std::size_t count = 0;
  CUWEAVE_CUDA_TRY(cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(stream), &status, nullptr, &capture.graph,
                                            &frontier, nullptr, &count));
  if (status != cudaStreamCaptureStatusActive) {
    throw_cuda_error(
        status == cudaStreamCaptureStatusNone ? cudaErrorIllegalState : cudaErrorStreamCaptureInvalidated, call,
        __FILE__, __LINE__);
  }
  capture.frontier.assign(frontier, frontier + count);
  return capture;
}

// Note [Bookkeeping during capture]
// While a global or thread-local capture is active, CUDA refuses calls it deems unsafe (event and
// stream queries, allocations, host registration) and invalidates the capture. cuweave makes such
// calls on its own (the lifetime tracker's queries, pools, registration) on the capturing thread and
// on its helper threads; none touches a capturing stream's work. This guard switches the calling
// thread to relaxed mode around them, as PyTorch's allocator does. Waits the user asks for
// (synchronize) are not guarded: CUDA's rules apply to them unchanged.
class BookkeepingGuard {
 public:
  BookkeepingGuard() {
    if (active_captures.load(std::memory_order_acquire) == 0) return;
    mode_ = cudaStreamCaptureModeRelaxed;
    guarded_ = cudaThreadExchangeStreamCaptureMode(&mode_) == cudaSuccess;
  }
  BookkeepingGuard(const BookkeepingGuard&) = delete;
  BookkeepingGuard& operator=(const BookkeepingGuard&) = delete;
  ~BookkeepingGuard() {
    if (guarded_) CUWEAVE_CUDA_TRY_QUIET(cudaThreadExchangeStreamCaptureMode(&mode_));
  }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeGlobal;
  bool guarded_ = false;
};

std::vector<cudaGraphNode_t> as_nodes(const std::vector<GraphNodeHandle>& handles) {
  std::vector<cudaGraphNode_t> nodes;
  nodes.reserve(handles.size());
  for (GraphNodeHandle handle : handles) nodes.push_back(as_node(handle));
  return nodes;
}

class CudaBackend final : public Backend {
 public:
  const char* name() const noexcept override { return "cuda"; }
  Tracer& tracer() override { return cupti_tracer(); }

  int device_count() noexcept override {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return count;
  }

  std::string unavailable_reason() override {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(error) + " (" +
             std::to_string(static_cast<int>(error)) + "): " + cudaGetErrorString(error) + no_device_hint(error);
    }
    return count == 0 ? "cudaGetDeviceCount found 0 devices" : "";
  }

  void require_device() override {
    int known = known_device_count_.load(std::memory_order_relaxed);
    if (known > 0) return;
    int count = 0;
    CUWEAVE_CUDA_TRY(cudaGetDeviceCount(&count));
    if (count == 0) throw_cuda_error(cudaErrorNoDevice, "cudaGetDeviceCount", __FILE__, __LINE__);
    known_device_count_.store(count, std::memory_order_relaxed);
  }

  int current_device() override {
    require_device();
    int device = 0;
    CUWEAVE_CUDA_TRY(cudaGetDevice(&device));
    return device;
  }

  void set_current_device(int device) override { CUWEAVE_CUDA_TRY(cudaSetDevice(device)); }

  DeviceProperties device_properties(int device) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = properties_.find(device);
      if (it != properties_.end()) return it->second;
    }
    DeviceProperties props;
    props.ordinal = device;
    cudaDeviceProp raw{};
    CUWEAVE_CUDA_TRY(cudaGetDeviceProperties(&raw, device));
    props.name = raw.name;
    props.total_memory = raw.totalGlobalMem;
    CUWEAVE_CUDA_TRY(cudaDeviceGetAttribute(&props.multiprocessor_count, cudaDevAttrMultiProcessorCount, device));
    CUWEAVE_CUDA_TRY(cudaDeviceGetAttribute(&props.compute_capability_major, cudaDevAttrComputeCapabilityMajor, device));
    CUWEAVE_CUDA_TRY(cudaDeviceGetAttribute(&props.compute_capability_minor, cudaDevAttrComputeCapabilityMinor, device));
    CUWEAVE_CUDA_TRY(cudaDeviceGetAttribute(&props.async_engine_count, cudaDevAttrAsyncEngineCount, device));
    {
      DeviceGuard guard(device);
      CUWEAVE_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&props.lowest_priority, &props.highest_priority));
    }
    char bus_id[32] = {};
    CUWEAVE_CUDA_TRY(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device));
    props.pci_bus_id = bus_id;
    std::lock_guard<std::mutex> lock(mutex_);
    properties_.emplace(device, props);
    return props;
  }

  void synchronize_device(int device) override {
    DeviceGuard guard(device);
    CUWEAVE_CUDA_TRY(cudaDeviceSynchronize());
  }

  bool synchronize_device_for(int device, const WaitSlice& slice) override {
    return DeviceSynchronizer::of(device).wait(slice);
  }

  std::pair<int, int> driver_version() override {
    int version = 0;
    CUWEAVE_CUDA_TRY(cudaDriverGetVersion(&version));  // 0 when no driver is installed
    return {version / 1000, (version % 1000) / 10};
  }

  std::pair<int, int> runtime_version() override {
    int version = 0;
    CUWEAVE_CUDA_TRY(cudaRuntimeGetVersion(&version));
    return {version / 1000, (version % 1000) / 10};
  }

  StreamHandle legacy_default_stream() const noexcept override { return cudaStreamLegacy; }
  StreamHandle per_thread_default_stream() const noexcept override { return cudaStreamPerThread; }

  StreamHandle create_stream(int device, int priority, bool blocking) override {
    DeviceGuard guard(device);
    cudaStream_t stream = nullptr;
    CUWEAVE_CUDA_TRY(cudaStreamCreateWithPriority(&stream, blocking ? cudaStreamDefault : cudaStreamNonBlocking,
                                                  priority));
    return stream;
  }

  void destroy_stream(StreamHandle stream) noexcept override {
    CUWEAVE_CUDA_TRY_QUIET(cudaStreamDestroy(as_stream(stream)));
  }

  StreamInfo stream_info(StreamHandle stream) override {
    StreamInfo info;
    unsigned flags = 0;
    CUWEAVE_CUDA_TRY(cudaStreamGetDevice(as_stream(stream), &info.device));
    CUWEAVE_CUDA_TRY(cudaStreamGetPriority(as_stream(stream), &info.priority));
    CUWEAVE_CUDA_TRY(cudaStreamGetFlags(as_stream(stream), &flags));
    info.blocking = (flags & cudaStreamNonBlocking) == 0;
    return info;
  }

  void synchronize_stream(StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(cudaStreamSynchronize(as_stream(stream)));
  }

  bool synchronize_stream_for(StreamHandle stream, const WaitSlice& slice) override {
    return poll_until(slice, [&] { return finished(cudaStreamQuery(as_stream(stream)), "cudaStreamQuery"); });
  }

  bool stream_idle(StreamHandle stream) override {
    BookkeepingGuard guard;
    const cudaError_t status = cudaStreamQuery(as_stream(stream));
    if (status == cudaErrorNotReady) return false;
    CUWEAVE_CUDA_TRY(status);
    return true;
  }

  void stream_wait_event(StreamHandle stream, EventHandle event) override {
    // Note [Hot calls through the driver]
    CUWEAVE_DRIVER_IN_A_CONTEXT(
        driver().stream_wait_event(static_cast<CUstream>(stream), static_cast<CUevent>(event), 0));
  }

  void launch_host_function(StreamHandle stream, HostFunction function, void* user_data) override {
    CUWEAVE_CUDA_TRY(cudaLaunchHostFunc(as_stream(stream), function, user_data));
  }

  HostFlagHandle create_host_flag() override { return HostFlags::instance().take(); }

  void destroy_host_flag(HostFlagHandle flag) noexcept override {
    HostFlags::instance().give_back(static_cast<std::uint32_t*>(flag));
  }

  void stream_wait_host_flag(StreamHandle stream, HostFlagHandle flag) override {
    load_builtin_kernels_before_a_hold(stream);
    // Mapped pinned memory has one address on the host and every device (unified addressing). Only its
    // owner writes a taken flag, so reading it here is not a race.
    auto* value = static_cast<std::uint32_t*>(flag);
    CUWEAVE_DRIVER_TRY(driver().stream_wait_value32(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(value),
                                                    *value + 1, CU_STREAM_WAIT_VALUE_GEQ));
  }

  void raise_host_flag(HostFlagHandle flag) noexcept override {
    // Release: what the host wrote before (a callback's results) is visible before the stream moves on.
    auto* value = static_cast<std::uint32_t*>(flag);
    __atomic_store_n(value, *value + 1, __ATOMIC_RELEASE);
  }

  EventHandle create_event(int device, unsigned flags) override {
    unsigned cuda_flags = cudaEventDefault;
    if (!(flags & kEventTiming)) cuda_flags |= cudaEventDisableTiming;
    if (flags & kEventBlockingSync) cuda_flags |= cudaEventBlockingSync;
    if (flags & kEventInterprocess) cuda_flags |= cudaEventInterprocess;
    DeviceGuard guard(device);
    cudaEvent_t event = nullptr;
    CUWEAVE_CUDA_TRY(cudaEventCreateWithFlags(&event, cuda_flags));
    return event;
  }

  void destroy_event(EventHandle event) noexcept override {
    CUWEAVE_CUDA_TRY_QUIET(cudaEventDestroy(as_event(event)));
  }

  void record_event(EventHandle event, StreamHandle stream) override {
    // Note [Hot calls through the driver]
    CUWEAVE_DRIVER_IN_A_CONTEXT(driver().event_record(static_cast<CUevent>(event), static_cast<CUstream>(stream)));
  }

  bool event_complete(EventHandle event) override {
    BookkeepingGuard guard;
    const cudaError_t status = cudaEventQuery(as_event(event));
    if (status == cudaErrorNotReady) return false;
    CUWEAVE_CUDA_TRY(status);
    return true;
  }

  void synchronize_event(EventHandle event) override { CUWEAVE_CUDA_TRY(cudaEventSynchronize(as_event(event))); }

  bool synchronize_event_for(EventHandle event, const WaitSlice& slice) override {
    return poll_until(slice, [&] { return finished(cudaEventQuery(as_event(event)), "cudaEventQuery"); });
  }

  float elapsed_ms(EventHandle start, EventHandle end) override {
    float ms = 0;
    CUWEAVE_CUDA_TRY(cudaEventElapsedTime(&ms, as_event(start), as_event(end)));
    return ms;
  }

  std::string event_ipc_handle(EventHandle event) override {
    cudaIpcEventHandle_t handle;
    CUWEAVE_CUDA_TRY(cudaIpcGetEventHandle(&handle, as_event(event)));
    return std::string(handle.reserved, sizeof(handle.reserved));
  }

  EventHandle open_event_ipc_handle(const std::string& bytes) override {
    cudaIpcEventHandle_t handle;
    if (bytes.size() != sizeof(handle.reserved)) {
      throw InvalidArgument("an event IPC handle has " + std::to_string(sizeof(handle.reserved)) +
                            " bytes, got " + std::to_string(bytes.size()));
    }
    std::memcpy(handle.reserved, bytes.data(), sizeof(handle.reserved));
    cudaEvent_t event = nullptr;
    CUWEAVE_CUDA_TRY(cudaIpcOpenEventHandle(&event, handle));
    return event;
  }

  void* allocate_device(std::size_t bytes, int device, StreamHandle stream) override {
    BookkeepingGuard guard;
    void* pointer = nullptr;
    if (capturing(stream)) {
      // Captured, the allocation would become a graph node owned by the graph. cuweave's arrays own
      // their memory, so allocate outside the capture and make it usable everywhere before returning.
      cudaStream_t side = side_stream(device);
      CUWEAVE_CUDA_TRY(cudaMallocFromPoolAsync(&pointer, bytes, memory_pool(device), side));
      CUWEAVE_CUDA_TRY(cudaStreamSynchronize(side));
      return pointer;
    }
    CUWEAVE_CUDA_TRY(cudaMallocFromPoolAsync(&pointer, bytes, memory_pool(device), as_stream(stream)));
    return pointer;
  }

  void free_device(void* pointer, StreamHandle stream) noexcept override {
    BookkeepingGuard guard;
    CUWEAVE_CUDA_TRY_QUIET(cudaFreeAsync(pointer, as_stream(stream)));
  }

  void* allocate_pinned(std::size_t bytes) override {
    BookkeepingGuard guard;
    void* pointer = nullptr;
    CUWEAVE_CUDA_TRY(cudaHostAlloc(&pointer, bytes, cudaHostAllocPortable));
    return pointer;
  }

  void free_pinned(void* pointer) noexcept override {
    BookkeepingGuard guard;
    CUWEAVE_CUDA_TRY_QUIET(cudaFreeHost(pointer));
  }

  void register_host(void* pointer, std::size_t bytes) override {
    BookkeepingGuard guard;
    CUWEAVE_CUDA_TRY(cudaHostRegister(pointer, bytes, cudaHostRegisterPortable));
  }

  void unregister_host(void* pointer) override {
    BookkeepingGuard guard;
    CUWEAVE_CUDA_TRY(cudaHostUnregister(pointer));
  }

  bool is_pinned(const void* pointer) override { return pointer_attributes(pointer).type == cudaMemoryTypeHost; }

  int pointer_device(const void* pointer) override {
    const cudaPointerAttributes attributes = pointer_attributes(pointer);
    const bool on_device = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    return on_device ? attributes.device : -1;
  }

  void copy_async(void* destination, const void* source, std::size_t bytes, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, as_stream(stream)));
  }

  bool copy_by_kernel(void* destination, const void* source, std::size_t bytes, int device,
                      StreamHandle stream) override {
    DeviceGuard on(device);  // (cudaStreamGetDevice is refused while the stream captures)
    if (!reachable_as_is(device, destination) || !reachable_as_is(device, source)) return false;
    CUWEAVE_CUDA_TRY(launch_copy(destination, source, bytes, as_stream(stream)));
    return true;
  }

  bool enable_peer_access(int device, int peer) override {
    if (device == peer) return false;
    std::lock_guard<std::mutex> lock(peers_mutex_);
    const std::pair<int, int> pair{std::min(device, peer), std::max(device, peer)};
    auto known = peer_access_.find(pair);
    if (known != peer_access_.end()) return known->second;
    int forward = 0, backward = 0;
    CUWEAVE_CUDA_TRY(cudaDeviceCanAccessPeer(&forward, device, peer));
    CUWEAVE_CUDA_TRY(cudaDeviceCanAccessPeer(&backward, peer, device));
    const bool direct = forward != 0 && backward != 0;
    if (direct) {
      reach_peer(device, peer);
      reach_peer(peer, device);
    }
    peer_access_.emplace(pair, direct);
    return direct;
  }

  void copy_between_devices(void* destination, int destination_device, const void* source, int source_device,
                            std::size_t bytes, StreamHandle stream) override {
    if (peers_reach_each_other(destination_device, source_device)) {
      // The pools grant each other (enable_peer_access): the copy engine goes over the link directly.
      CUWEAVE_CUDA_TRY(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, as_stream(stream)));
    } else {
      // Needs no access to either side: the driver stages the copy through the host.
      CUWEAVE_CUDA_TRY(
          cudaMemcpyPeerAsync(destination, destination_device, source, source_device, bytes, as_stream(stream)));
    }
  }

  void* allocate_unpooled(std::size_t bytes, int device) override {
    BookkeepingGuard guard;
    DeviceGuard on(device);
    void* pointer = nullptr;
    CUWEAVE_CUDA_TRY(cudaMalloc(&pointer, bytes));
    return pointer;
  }

  void free_unpooled(void* pointer) noexcept override {
    BookkeepingGuard guard;
    CUWEAVE_CUDA_TRY_QUIET(cudaFree(pointer));
  }

  void memset_async(void* destination, int value, std::size_t bytes, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(cudaMemsetAsync(destination, value, bytes, as_stream(stream)));
  }

  void fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
            StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(launch_fill(destination, count, pattern, pattern_bytes, as_stream(stream)));
  }

  void spin(std::uint64_t nanoseconds, unsigned blocks, std::uint64_t* start_time, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(launch_spin(nanoseconds, blocks, start_time, as_stream(stream)));
  }

  CompiledKernel compile(const std::string& source, const std::string& name_expression,
                         const std::vector<std::string>& options, int device) override {
    const DeviceProperties props = device_properties(device);
    return nvrtc_compile(source, name_expression, options, props.compute_capability_major,
                         props.compute_capability_minor);
  }

  // Note [Kernels through the driver]: modules and CUfunctions, not libraries.
  ModuleHandle load_module(const std::string& binary, int device) override {
    DeviceGuard guard(device);
    make_runtime_context_current();
    CUmodule module = nullptr;
    CUWEAVE_DRIVER_TRY(driver().module_load_data(&module, binary.data()));
    return module;
  }

  void unload_module(ModuleHandle module, int device) noexcept override {
    try {
      DeviceSynchronizer::of(device).after_next_synchronization([module] {
        try {
          (void)driver().module_unload(static_cast<CUmodule>(module));
        } catch (...) {
        }
      });
    } catch (...) {
      // Could not queue the unload (out of memory): the module stays loaded, which is harmless.
    }
  }

  KernelHandle get_kernel(ModuleHandle module, const std::string& lowered_name) override {
    CUfunction function = nullptr;
    CUWEAVE_DRIVER_TRY(driver().module_get_function(&function, static_cast<CUmodule>(module), lowered_name.c_str()));
    return function;
  }

  std::vector<std::size_t> kernel_parameter_sizes(KernelHandle kernel) override {
    std::vector<std::size_t> sizes;
    for (std::size_t index = 0;; ++index) {
      std::size_t offset = 0, size = 0;
      const CUresult status = driver().function_parameter(static_cast<CUfunction>(kernel), index, &offset, &size);
      if (status == CUDA_ERROR_INVALID_VALUE) break;  // past the last parameter
      check_driver(status, "cuFuncGetParamInfo", __FILE__, __LINE__);  // Note [Driver calls in errors]
      sizes.push_back(size);
    }
    return sizes;
  }

  void launch_kernel(KernelHandle kernel, Dim3 grid, Dim3 block, std::size_t shared_bytes, void** arguments,
                     StreamHandle stream) override {
    constexpr std::size_t kDefaultSharedLimit = 48 << 10;  // more needs an explicit opt-in per kernel
    auto* function = static_cast<CUfunction>(kernel);
    if (shared_bytes > kDefaultSharedLimit) {
      CUWEAVE_DRIVER_TRY(driver().function_set_attribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                         static_cast<int>(shared_bytes)));
    }
    CUWEAVE_DRIVER_IN_A_CONTEXT(driver().launch_kernel(function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                                       static_cast<unsigned>(shared_bytes),
                                                       static_cast<CUstream>(stream), arguments, nullptr));
  }

  void arithmetic(const Arithmetic& operation, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(launch_arithmetic(operation, as_stream(stream)));
  }

  std::size_t sum_scratch_bytes(std::size_t count) override {
    return sum_scratch_elements(count) * sizeof(std::int64_t);
  }

  void sum(void* out, const void* x, std::size_t count, NumericType type, void* given_scratch,
           StreamHandle stream) override {
    if (given_scratch) {
      CUWEAVE_CUDA_TRY(launch_sum(out, x, count, type, given_scratch, as_stream(stream)));
      return;
    }
    // Partial sums live in stream-ordered scratch, freed right after the kernels that use it. Captured,
    // the scratch is the graph's own (allocation and free nodes from the device's default pool).
    const std::size_t scratch_bytes = sum_scratch_bytes(count);
    void* scratch = nullptr;
    if (capturing(stream)) {
      CUWEAVE_CUDA_TRY(cudaMallocAsync(&scratch, scratch_bytes, as_stream(stream)));
    } else {
      int device = 0;
      CUWEAVE_CUDA_TRY(cudaStreamGetDevice(as_stream(stream), &device));
      scratch = allocate_device(scratch_bytes, device, stream);
    }
    const cudaError_t launched = launch_sum(out, x, count, type, scratch, as_stream(stream));
    CUWEAVE_CUDA_TRY_QUIET(cudaFreeAsync(scratch, as_stream(stream)));
    CUWEAVE_CUDA_TRY(launched);
  }

  std::string collective_id() override { return nccl_unique_id(); }
  CommunicatorHandle create_communicator(const std::string& id, int ranks, int rank, int device) override {
    return nccl_join(id, ranks, rank, device);
  }
  std::vector<CommunicatorHandle> create_communicators(const std::vector<int>& devices) override {
    return nccl_for_devices(devices);
  }
  // The watchdog asks and aborts from its own thread, maybe while another thread captures in global mode.
  bool communicator_ready(CommunicatorHandle communicator) override {
    BookkeepingGuard guard;
    return nccl_ready(communicator);
  }
  void abort_communicator(CommunicatorHandle communicator) noexcept override {
    BookkeepingGuard guard;
    nccl_abort(communicator);
  }
  void destroy_communicator(CommunicatorHandle communicator) noexcept override {
    BookkeepingGuard guard;
    nccl_destroy(communicator);
  }
  void begin_collective_group() override { nccl_group_start(); }
  void end_collective_group() override { nccl_group_end(); }
  void collective(const Collective& collective, CommunicatorHandle communicator, StreamHandle stream) override {
    nccl_collective(collective, communicator, as_stream(stream));
  }
  bool collective_completed(EventHandle event) override { return event_complete(event); }

  void begin_capture(StreamHandle stream, CaptureMode mode) override {
    CUWEAVE_CUDA_TRY(cudaStreamBeginCapture(as_stream(stream), cuda_capture_mode(mode)));
    active_captures.fetch_add(1, std::memory_order_acq_rel);
  }

  GraphHandle end_capture(StreamHandle stream) override {
    cudaGraph_t graph = nullptr;
    const cudaError_t status = cudaStreamEndCapture(as_stream(stream), &graph);
    if (status != cudaErrorStreamCaptureUnmatched && status != cudaErrorIllegalState) {
      active_captures.fetch_sub(1, std::memory_order_acq_rel);  // the capture is over, however it ended
    }
    if (status != cudaSuccess && graph) CUWEAVE_CUDA_TRY_QUIET(cudaGraphDestroy(graph));
    CUWEAVE_CUDA_TRY(status);
    return graph;
  }

  CaptureState capture_state(StreamHandle stream) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    CUWEAVE_CUDA_TRY(cudaStreamGetCaptureInfo(as_stream(stream), &status, &id));
    CaptureState state;
    if (status == cudaStreamCaptureStatusActive) state.status = CaptureState::Status::Active;
    if (status == cudaStreamCaptureStatusInvalidated) state.status = CaptureState::Status::Invalidated;
    if (state.status != CaptureState::Status::None) state.id = id;
    return state;
  }

  void capture_graph(StreamHandle stream, GraphHandle graph) override {
    const ActiveCapture capture = active_capture(stream, "cudaGraphAddChildGraphNode");
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddChildGraphNode(&node, capture.graph, capture.frontier.data(),
                                                capture.frontier.size(), as_graph(graph)));
    CUWEAVE_CUDA_TRY(cudaStreamUpdateCaptureDependencies(as_stream(stream), &node, nullptr, 1,
                                                         cudaStreamSetCaptureDependencies));
  }

  ConditionHandle create_condition(StreamHandle stream, unsigned default_value) override {
    return create_graph_condition(active_capture(stream, "cudaGraphConditionalHandleCreate").graph, default_value);
  }

  ConditionalNode capture_conditional(StreamHandle stream, ConditionHandle condition, ConditionalKind kind,
                                      unsigned bodies) override {
    const ActiveCapture capture = active_capture(stream, "cudaGraphAddNode");
    std::vector<GraphNodeHandle> frontier(capture.frontier.begin(), capture.frontier.end());
    ConditionalNode made = add_conditional_node(capture.graph, frontier, condition, kind, bodies);
    cudaGraphNode_t node = as_node(made.node);
    CUWEAVE_CUDA_TRY(cudaStreamUpdateCaptureDependencies(as_stream(stream), &node, nullptr, 1,
                                                         cudaStreamSetCaptureDependencies));
    return made;
  }

  ConditionHandle create_graph_condition(GraphHandle graph, unsigned default_value) override {
    cudaGraphConditionalHandle condition = 0;
    CUWEAVE_CUDA_TRY(
        cudaGraphConditionalHandleCreate(&condition, as_graph(graph), default_value, cudaGraphCondAssignDefault));
    return condition;
  }

  ConditionalNode add_conditional_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                       ConditionHandle condition, ConditionalKind kind, unsigned bodies) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = condition;
    params.conditional.type = kind == ConditionalKind::If      ? cudaGraphCondTypeIf
                              : kind == ConditionalKind::While ? cudaGraphCondTypeWhile
                                                               : cudaGraphCondTypeSwitch;
    params.conditional.size = bodies;
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddNode(&node, as_graph(graph), deps.data(), nullptr, deps.size(), &params));
    ConditionalNode made;
    made.node = node;
    std::vector<cudaGraph_t> body_graphs(params.conditional.phGraph_out, params.conditional.phGraph_out + bodies);
    for (cudaGraph_t body : body_graphs) made.bodies.push_back(body);
    remember_conditional(node, kind, std::move(body_graphs));
    return made;
  }

  GraphNodeHandle add_set_condition_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                         ConditionHandle condition, const ConditionRule& rule) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(add_set_condition_kernel_node(&node, as_graph(graph), deps.data(), deps.size(), condition, rule));
    return node;
  }

  std::vector<GraphNodeHandle> capture_frontier(StreamHandle stream) override {
    const ActiveCapture capture = active_capture(stream, "cudaStreamGetCaptureInfo");
    return std::vector<GraphNodeHandle>(capture.frontier.begin(), capture.frontier.end());
  }

  void begin_capture_into(StreamHandle stream, GraphHandle graph, CaptureMode mode) override {
    CUWEAVE_CUDA_TRY(cudaStreamBeginCaptureToGraph(as_stream(stream), as_graph(graph), nullptr, nullptr, 0,
                                                   cuda_capture_mode(mode)));
    active_captures.fetch_add(1, std::memory_order_acq_rel);
  }

  void end_capture_into(StreamHandle stream) override {
    cudaGraph_t graph = nullptr;  // the body it captured into, which its conditional node owns
    const cudaError_t status = cudaStreamEndCapture(as_stream(stream), &graph);
    if (status != cudaErrorStreamCaptureUnmatched && status != cudaErrorIllegalState) {
      active_captures.fetch_sub(1, std::memory_order_acq_rel);
    }
    CUWEAVE_CUDA_TRY(status);
  }

  void set_condition(ConditionHandle condition, const ConditionRule& rule, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(launch_set_condition(condition, rule, as_stream(stream)));
  }

  GraphHandle create_graph() override {
    cudaGraph_t graph = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphCreate(&graph, 0));
    return graph;
  }

  void destroy_graph(GraphHandle graph) noexcept override {
    forget_conditionals(as_graph(graph));
    CUWEAVE_CUDA_TRY_QUIET(cudaGraphDestroy(as_graph(graph)));
  }

  GraphNodeHandle add_kernel_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                  KernelHandle kernel, Dim3 grid, Dim3 block, std::size_t shared_bytes,
                                  void** arguments) override {
    CUDA_KERNEL_NODE_PARAMS params{};
    params.func = static_cast<CUfunction>(kernel);
    params.gridDimX = grid.x;
    params.gridDimY = grid.y;
    params.gridDimZ = grid.z;
    params.blockDimX = block.x;
    params.blockDimY = block.y;
    params.blockDimZ = block.z;
    params.sharedMemBytes = static_cast<unsigned>(shared_bytes);
    params.kernelParams = arguments;
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_DRIVER_TRY(driver().graph_add_kernel_node(reinterpret_cast<CUgraphNode*>(&node),
                                                      reinterpret_cast<CUgraph>(graph),
                                                      reinterpret_cast<const CUgraphNode*>(deps.data()), deps.size(),
                                                      &params));
    return node;
  }

  GraphNodeHandle add_copy_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                void* destination, const void* source, std::size_t bytes) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddMemcpyNode1D(&node, as_graph(graph), deps.data(), deps.size(), destination, source,
                                              bytes, cudaMemcpyDefault));
    return node;
  }

  GraphNodeHandle add_memset_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                  void* destination, int value, std::size_t bytes) override {
    cudaMemsetParams params{};
    params.dst = destination;
    params.value = static_cast<unsigned>(value) & 0xffu;
    params.elementSize = 1;
    params.width = bytes;
    params.height = 1;
    params.pitch = bytes;
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddMemsetNode(&node, as_graph(graph), deps.data(), deps.size(), &params));
    return node;
  }

  GraphNodeHandle add_host_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                HostFunction function, void* user_data) override {
    cudaHostNodeParams params{};
    params.fn = function;
    params.userData = user_data;
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddHostNode(&node, as_graph(graph), deps.data(), deps.size(), &params));
    return node;
  }

  GraphNodeHandle add_event_record_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                        EventHandle event) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(
        cudaGraphAddEventRecordNode(&node, as_graph(graph), deps.data(), deps.size(), as_event(event)));
    return node;
  }

  GraphNodeHandle add_event_wait_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                      EventHandle event) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddEventWaitNode(&node, as_graph(graph), deps.data(), deps.size(), as_event(event)));
    return node;
  }

  GraphNodeHandle add_empty_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddEmptyNode(&node, as_graph(graph), deps.data(), deps.size()));
    return node;
  }

  GraphNodeHandle add_child_graph_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                       GraphHandle child) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(
        cudaGraphAddChildGraphNode(&node, as_graph(graph), deps.data(), deps.size(), as_graph(child)));
    return node;
  }

  std::vector<GraphNodeInfo> graph_nodes(GraphHandle graph) override { return cuda::graph_nodes(as_graph(graph)); }

  void set_kernel_node_arguments(GraphNodeHandle node, void** arguments) override {
    cuda::set_kernel_node_arguments(as_node(node), arguments);
  }

  void set_copy_node(GraphNodeHandle node, void* destination, const void* source, std::size_t bytes) override {
    CUWEAVE_CUDA_TRY(cudaGraphMemcpyNodeSetParams1D(as_node(node), destination, source, bytes, cudaMemcpyDefault));
  }

  std::size_t replace_pointers(GraphHandle graph, const std::vector<PointerRemap>& remaps) override {
    return cuda::replace_pointers(as_graph(graph), remaps);
  }

  GraphExecHandle instantiate_graph(GraphHandle graph) override {
    cudaGraphExec_t exec = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphInstantiate(&exec, as_graph(graph), 0));
    return exec;
  }

  void destroy_graph_exec(GraphExecHandle exec) noexcept override {
    CUWEAVE_CUDA_TRY_QUIET(cudaGraphExecDestroy(as_exec(exec)));
  }

  void upload_graph(GraphExecHandle exec, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(cudaGraphUpload(as_exec(exec), as_stream(stream)));
  }

  void launch_graph(GraphExecHandle exec, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(cudaGraphLaunch(as_exec(exec), as_stream(stream)));
  }

  bool update_graph_exec(GraphExecHandle exec, GraphHandle graph) override {
    cudaGraphExecUpdateResultInfo info{};
    const cudaError_t status = cudaGraphExecUpdate(as_exec(exec), as_graph(graph), &info);
    if (status == cudaErrorGraphExecUpdateFailure) {
      (void)cudaGetLastError();
      return false;  // topology or node kinds changed: the caller instantiates anew
    }
    CUWEAVE_CUDA_TRY(status);
    return true;
  }

 private:
  // Note [Loading kernels before a hold]
  // With lazy loading (CUDA's default since 12.2), a kernel is loaded at its first launch, and loading
  // may wait for the device's queued work (the programming guide's "potential hazards" of lazy loading).
  // Behind a stream held for the host (a latch, an ordered callback) that work cannot finish until the
  // host lets go, so the first launch of a built-in kernel there hung until the release: with the release
  // due later on the launching thread, forever (seen on an H100). Before the first hold on a device,
  // every built-in kernel is loaded. Runtime-compiled kernels are loaded when compiled (cuModuleGetFunction).
  void load_builtin_kernels_before_a_hold(StreamHandle stream) {
    int device = 0;
    CUWEAVE_CUDA_TRY(cudaStreamGetDevice(as_stream(stream), &device));
    std::lock_guard<std::mutex> lock(builtin_kernels_mutex_);
    if (builtin_kernels_loaded_.count(device) != 0) return;
    DeviceGuard on(device);
    CUWEAVE_CUDA_TRY(load_builtin_kernels());
    builtin_kernels_loaded_.insert(device);
  }

  // Peer access from `device` to `peer`'s memory, and `peer`'s pool granted to `device`: cudaDeviceEnablePeerAccess
  // maps the peer's cudaMalloc memory only; the pool's memory needs its own grant (Note [Simulated device access]).
  void reach_peer(int device, int peer) {
    {
      DeviceGuard on(device);
      const cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // enabled by another library in this process: as good
      } else {
        CUWEAVE_CUDA_TRY(status);
      }
    }
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = device;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    CUWEAVE_CUDA_TRY(cudaMemPoolSetAccess(memory_pool(peer), &access, 1));
  }

  bool peers_reach_each_other(int device, int peer) {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    auto known = peer_access_.find({std::min(device, peer), std::max(device, peer)});
    return known != peer_access_.end() && known->second;
  }

  // Whether kernels on `device` (the current device) can use `pointer` as it is: its own or managed memory,
  // or pinned host memory mapped at the same address (always so under unified addressing).
  static bool reachable_as_is(int device, const void* pointer) {
    const cudaPointerAttributes attributes = pointer_attributes(pointer);
    switch (attributes.type) {
      case cudaMemoryTypeDevice: return attributes.device == device;
      case cudaMemoryTypeManaged: return true;
      case cudaMemoryTypeHost: return attributes.devicePointer == pointer;
      default: return false;
    }
  }

  bool capturing(StreamHandle stream) {
    if (active_captures.load(std::memory_order_acquire) == 0) return false;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(as_stream(stream), &status) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return status != cudaStreamCaptureStatusNone;
  }

  // A stream of cuweave's own per device, never captured, for work that must stay outside a capture.
  cudaStream_t side_stream(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = side_streams_.find(device);
    if (it != side_streams_.end()) return it->second;
    DeviceGuard guard(device);
    cudaStream_t stream = nullptr;
    CUWEAVE_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    side_streams_.emplace(device, stream);
    return stream;
  }

  // cuweave's own stream-ordered pool per device, so that freed memory is cached without touching the
  // device's default pool, which other libraries may configure.
  cudaMemPool_t memory_pool(int device) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = pools_.find(device);
      if (it != pools_.end()) return it->second;
    }
    // Created outside the lock (no CUDA call under a mutex); a thread that loses the race destroys its pool.
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    CUWEAVE_CUDA_TRY(cudaMemPoolCreate(&pool, &props));
    std::uint64_t keep_everything = UINT64_MAX;
    CUWEAVE_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    cudaMemPool_t winner = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      winner = pools_.emplace(device, pool).first->second;
    }
    if (winner != pool) CUWEAVE_CUDA_TRY_QUIET(cudaMemPoolDestroy(pool));
    return winner;
  }

  std::atomic<int> known_device_count_{0};
  std::mutex mutex_;
  std::unordered_map<int, DeviceProperties> properties_;  // LOCK: mutex_
  std::unordered_map<int, cudaMemPool_t> pools_;          // LOCK: mutex_
  std::unordered_map<int, cudaStream_t> side_streams_;    // LOCK: mutex_
  std::mutex builtin_kernels_mutex_;
  std::unordered_set<int> builtin_kernels_loaded_;  // LOCK: builtin_kernels_mutex_; devices
  std::mutex peers_mutex_;
  std::map<std::pair<int, int>, bool> peer_access_;  // LOCK: peers_mutex_; (lower, higher device) -> direct
};

}  // namespace
}  // namespace cuweave::cuda

namespace cuweave {

Backend& cuda_backend() {
  static auto* instance = new cuda::CudaBackend;  // leaked: used until the process ends
  return *instance;
}

}  // namespace cuweave
