// The host simulator backend: the whole API on host threads, with CUDA's ordering rules and errors.
// See Note [Simulator scheduling] in scheduler.hpp.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "cuweave/backend.hpp"
#include "sim/memory_registry.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_error.hpp"

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

// Host versions of the built-in arithmetic, rounding as arithmetic.hpp says (this file is compiled
// with -ffp-contract=off, so a product and a sum are never fused).
template <typename T>
T wrap_multiply(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename T>
T wrap_plus(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
void run_arithmetic(const Arithmetic& a, T alpha) {
  auto* out = static_cast<T*>(a.out);
  const auto* x = static_cast<const T*>(a.x);
  const auto* y = static_cast<const T*>(a.y);
  for (std::size_t i = 0; i < a.count; ++i) {
    switch (a.op) {
      case ArithmeticOp::Scale: out[i] = wrap_multiply(alpha, x[i]); break;
      case ArithmeticOp::Axpy: out[i] = wrap_plus(wrap_multiply(alpha, x[i]), y[i]); break;
      case ArithmeticOp::Add: out[i] = wrap_plus(x[i], y[i]); break;
      case ArithmeticOp::AddScalar: out[i] = wrap_plus(x[i], alpha); break;
    }
  }
}

template <typename T, typename Acc, typename Out>
void run_sum(void* out, const void* x, std::size_t count) {
  Acc total = 0;
  const auto* in = static_cast<const T*>(x);
  for (std::size_t i = 0; i < count; ++i) total = wrap_plus(total, static_cast<Acc>(in[i]));
  *static_cast<Out*>(out) = static_cast<Out>(total);
}

std::size_t element_bytes(NumericType type) {
  return type == NumericType::Float32 || type == NumericType::Int32 ? 4 : 8;
}

std::uint64_t host_clock_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

class SimBackend final : public Backend {
 public:
  const char* name() const noexcept override { return "sim"; }

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
    scheduler().synchronize_device(checked(device, "cudaDeviceSynchronize"));
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
    scheduler().destroy_stream(static_cast<SimStream*>(handle));
  }
  StreamInfo stream_info(StreamHandle handle) override {
    SimStream* stream = resolve_stream(handle, "cudaStreamGetDevice");
    return StreamInfo{stream->device, stream->priority, stream->blocking};
  }
  void synchronize_stream(StreamHandle handle) override {
    scheduler().synchronize_stream(resolve_stream(handle, "cudaStreamSynchronize"));
  }
  bool stream_idle(StreamHandle handle) override { return scheduler().stream_idle(resolve_stream(handle, "cudaStreamQuery")); }
  void stream_wait_event(StreamHandle handle, EventHandle event) override {
    scheduler().wait(resolve_stream(handle, "cudaStreamWaitEvent"), resolve_event(event, "cudaStreamWaitEvent"));
  }
  void launch_host_function(StreamHandle handle, HostFunction function, void* user_data) override {
    scheduler().enqueue(resolve_stream(handle, "cudaLaunchHostFunc"), [function, user_data] { function(user_data); });
  }

  EventHandle create_event(int device, unsigned flags) override {
    return scheduler().create_event(checked(device, "cudaEventCreateWithFlags"), flags);
  }
  void destroy_event(EventHandle event) noexcept override { scheduler().destroy_event(static_cast<SimEvent*>(event)); }
  void record_event(EventHandle event, StreamHandle handle) override {
    scheduler().record(resolve_event(event, "cudaEventRecord"), resolve_stream(handle, "cudaEventRecord"));
  }
  bool event_complete(EventHandle event) override { return scheduler().event_complete(resolve_event(event, "cudaEventQuery")); }
  void synchronize_event(EventHandle event) override {
    scheduler().synchronize_event(resolve_event(event, "cudaEventSynchronize"));
  }
  float elapsed_ms(EventHandle start, EventHandle end) override {
    SimEvent* first = resolve_event(start, "cudaEventElapsedTime");
    SimEvent* last = resolve_event(end, "cudaEventElapsedTime");
    if (!(first->flags & kEventTiming) || !(last->flags & kEventTiming)) {
      fail("cudaEventElapsedTime", kInvalidResourceHandle, "an event was created without timing");
    }
    return static_cast<float>(scheduler().elapsed_ms(first, last));
  }
  std::string event_ipc_handle(EventHandle) override {
    fail("cudaIpcGetEventHandle", kNotSupported, "interprocess events need a GPU");
  }
  EventHandle open_event_ipc_handle(const std::string&) override {
    fail("cudaIpcOpenEventHandle", kNotSupported, "interprocess events need a GPU");
  }

  void* allocate_device(std::size_t bytes, int device, StreamHandle handle) override {
    resolve_stream(handle, "cudaMallocFromPoolAsync");
    return MemoryRegistry::instance().allocate(bytes, MemoryKind::Device, checked(device, "cudaMallocFromPoolAsync"));
  }
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

  void copy_async(void* destination, const void* source, std::size_t bytes, StreamHandle handle) override {
    SimStream* stream = resolve_stream(handle, "cudaMemcpyAsync");
    const bool source_pageable = !within_range(source, bytes, "cudaMemcpyAsync");
    const bool destination_pageable = !within_range(destination, bytes, "cudaMemcpyAsync");
    if (source_pageable && destination_pageable) {
      std::memcpy(destination, source, bytes);
    } else if (source_pageable) {
      // CUDA stages pageable sources before returning: later host writes do not reach the copy.
      auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(source),
                                                                 static_cast<const unsigned char*>(source) + bytes);
      scheduler().enqueue(stream, [destination, staged] { std::memcpy(destination, staged->data(), staged->size()); });
    } else if (destination_pageable) {
      // CUDA returns from a copy into pageable memory only once it has completed.
      const auto count = scheduler().enqueue(stream, [=] { std::memcpy(destination, source, bytes); });
      scheduler().wait_for_count(stream, count);
    } else {
      scheduler().enqueue(stream, [=] { std::memcpy(destination, source, bytes); });
    }
  }

  void memset_async(void* destination, int value, std::size_t bytes, StreamHandle handle) override {
    within_range(destination, bytes, "cudaMemsetAsync");
    scheduler().enqueue(resolve_stream(handle, "cudaMemsetAsync"), [=] { std::memset(destination, value, bytes); });
  }

  void fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
            StreamHandle handle) override {
    within_range(destination, count * pattern_bytes, "fill kernel");
    std::vector<unsigned char> value(static_cast<const unsigned char*>(pattern),
                                     static_cast<const unsigned char*>(pattern) + pattern_bytes);
    scheduler().enqueue(resolve_stream(handle, "cudaLaunchKernel"), [destination, count, value] {
      auto* out = static_cast<unsigned char*>(destination);
      for (std::size_t i = 0; i < count; ++i) std::memcpy(out + i * value.size(), value.data(), value.size());
    });
  }

  CompiledKernel compile(const std::string&, const std::string&, const std::vector<std::string>&, int) override {
    fail("nvrtcCompileProgram", kNotSupported,
         "runtime-compiled CUDA kernels need the CUDA backend and a GPU: the simulator cannot run CUDA C++. "
         "On the simulator use the built-in kernels (cuweave.ops)");
  }
  ModuleHandle load_module(const std::string&, int) override {
    fail("cudaLibraryLoadData", kNotSupported, "compiled CUDA kernels need the CUDA backend and a GPU");
  }
  void unload_module(ModuleHandle) noexcept override {}
  KernelHandle get_kernel(ModuleHandle, const std::string&) override {
    fail("cudaLibraryGetKernel", kNotSupported, "compiled CUDA kernels need the CUDA backend and a GPU");
  }
  std::vector<std::size_t> kernel_parameter_sizes(KernelHandle) override {
    fail("cudaFuncGetParamInfo", kNotSupported, "compiled CUDA kernels need the CUDA backend and a GPU");
  }
  void launch_kernel(KernelHandle, Dim3, Dim3, std::size_t, void**, StreamHandle) override {
    fail("cudaLaunchKernel", kNotSupported, "compiled CUDA kernels need the CUDA backend and a GPU");
  }

  void arithmetic(const Arithmetic& operation, StreamHandle handle) override {
    const std::size_t bytes = operation.count * element_bytes(operation.type);
    within_range(operation.out, bytes, "cudaLaunchKernel");
    within_range(operation.x, bytes, "cudaLaunchKernel");
    if (operation.y) within_range(operation.y, bytes, "cudaLaunchKernel");
    scheduler().enqueue(resolve_stream(handle, "cudaLaunchKernel"), [operation] {
      switch (operation.type) {
        case NumericType::Float32: run_arithmetic<float>(operation, static_cast<float>(operation.alpha.real)); break;
        case NumericType::Float64: run_arithmetic<double>(operation, operation.alpha.real); break;
        case NumericType::Int32:
          run_arithmetic<std::int32_t>(operation, static_cast<std::int32_t>(operation.alpha.integer));
          break;
        case NumericType::Int64: run_arithmetic<std::int64_t>(operation, operation.alpha.integer); break;
      }
    });
  }

  void sum(void* out, const void* x, std::size_t count, NumericType type, StreamHandle handle) override {
    within_range(x, count * element_bytes(type), "cudaLaunchKernel");
    within_range(out, element_bytes(sum_type(type)), "cudaLaunchKernel");
    scheduler().enqueue(resolve_stream(handle, "cudaLaunchKernel"), [out, x, count, type] {
      switch (type) {
        case NumericType::Float32: run_sum<float, double, float>(out, x, count); break;
        case NumericType::Float64: run_sum<double, double, double>(out, x, count); break;
        case NumericType::Int32: run_sum<std::int32_t, std::int64_t, std::int64_t>(out, x, count); break;
        case NumericType::Int64: run_sum<std::int64_t, std::int64_t, std::int64_t>(out, x, count); break;
      }
    });
  }

  void spin(std::uint64_t nanoseconds, unsigned, std::uint64_t* start_time, StreamHandle handle) override {
    SimStream* stream = resolve_stream(handle, "cudaLaunchKernel");
    // When exploring schedules nothing takes time: only the order of work matters.
    const bool take_time = !scheduler().seed().has_value();
    scheduler().enqueue(stream, [=] {
      if (start_time) *start_time = host_clock_ns();
      if (take_time) std::this_thread::sleep_for(std::chrono::nanoseconds(nanoseconds));
    });
  }

 private:
  static Scheduler& scheduler() { return Scheduler::instance(); }

  int checked(int device, const char* call) const {
    if (device < 0 || device >= devices_) fail(call, kInvalidDevice, "device " + std::to_string(device) + " does not exist");
    return device;
  }

  SimStream* resolve_stream(StreamHandle handle, const char* call) {
    if (handle == kLegacyHandle || handle == nullptr) return scheduler().legacy_stream(current_device_);
    if (handle == kPerThreadHandle) return scheduler().per_thread_stream(current_device_);
    auto* stream = static_cast<SimStream*>(handle);
    if (!scheduler().known(stream)) fail(call, kInvalidResourceHandle, "invalid stream handle");
    return stream;
  }

  SimEvent* resolve_event(EventHandle handle, const char* call) {
    auto* event = static_cast<SimEvent*>(handle);
    if (!scheduler().known(event)) fail(call, kInvalidResourceHandle, "invalid event handle");
    return event;
  }

  // True if [pointer, pointer + bytes) lies in simulated device or page-locked memory; false for
  // ordinary host memory. Refuses a range that starts inside a known allocation and runs past its end.
  static bool within_range(const void* pointer, std::size_t bytes, const char* call) {
    auto range = MemoryRegistry::instance().find(pointer);
    if (!range) return false;
    if (reinterpret_cast<std::uintptr_t>(pointer) + bytes > range->start + range->bytes) {
      fail(call, kInvalidValue, "the access runs past the end of its allocation");
    }
    return true;
  }

  const int devices_ = configured_device_count();
  static thread_local int current_device_;
};

thread_local int SimBackend::current_device_ = 0;

}  // namespace
}  // namespace cuweave::sim

namespace cuweave {

Backend& sim_backend() {
  static auto* instance = new sim::SimBackend;  // leaked: used until the process ends
  return *instance;
}

}  // namespace cuweave
