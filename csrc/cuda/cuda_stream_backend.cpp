// The CUDA backend's streams, events and host flags (StreamBackend).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "cuda/active_captures.hpp"
#include "cuda/builtin_kernels.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_facets.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/driver_api.hpp"
#include "cuda/host_flags.hpp"
#include "cuda/own_calls.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/stream_backend.hpp"

namespace cuweave::cuda {

namespace {

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

class CudaStreamBackend final : public StreamBackend {
 public:
  explicit CudaStreamBackend(const ActiveCaptures& captures) : captures_(captures) {}

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
    const OwnCall own;  // Note [cuweave's own runtime calls]
    CUWEAVE_CUDA_TRY(cudaStreamSynchronize(as_stream(stream)));
  }

  bool synchronize_stream_for(StreamHandle stream, const WaitSlice& slice) override {
    return poll_until(slice, [&] { return finished(cudaStreamQuery(as_stream(stream)), "cudaStreamQuery"); });
  }

  bool stream_idle(StreamHandle stream) override {
    BookkeepingGuard guard(captures_);
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
    load_builtin_kernels_before_a_pause(stream);
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
    BookkeepingGuard guard(captures_);
    const cudaError_t status = cudaEventQuery(as_event(event));
    if (status == cudaErrorNotReady) return false;
    CUWEAVE_CUDA_TRY(status);
    return true;
  }

  void synchronize_event(EventHandle event) override {
    const OwnCall own;  // Note [cuweave's own runtime calls]
    CUWEAVE_CUDA_TRY(cudaEventSynchronize(as_event(event)));
  }

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

 private:
  // Note [Loading kernels before a pause]
  // With lazy loading (CUDA's default since 12.2), a kernel is loaded at its first launch, and loading
  // may wait for the device's queued work (the programming guide's "potential hazards" of lazy loading).
  // Behind a stream paused for the host (a latch, an ordered callback) that work cannot finish until the
  // host lets go, so the first launch of a built-in kernel there hung until the release: with the release
  // due later on the launching thread, forever (seen on an H100). Before the first pause on a device,
  // every built-in kernel is loaded. Runtime-compiled kernels are loaded when compiled (cuModuleGetFunction).
  void load_builtin_kernels_before_a_pause(StreamHandle stream) {
    int device = 0;
    CUWEAVE_CUDA_TRY(cudaStreamGetDevice(as_stream(stream), &device));
    std::lock_guard<std::mutex> lock(builtin_kernels_mutex_);
    if (builtin_kernels_loaded_.count(device) != 0) return;
    DeviceGuard on(device);
    CUWEAVE_CUDA_TRY(load_builtin_kernels());
    builtin_kernels_loaded_.insert(device);
  }

  const ActiveCaptures& captures_;
  std::mutex builtin_kernels_mutex_;
  std::unordered_set<int> builtin_kernels_loaded_;  // LOCK: builtin_kernels_mutex_; devices
};

}  // namespace

std::unique_ptr<StreamBackend> make_stream_backend(const ActiveCaptures& captures) {
  return std::make_unique<CudaStreamBackend>(captures);
}

}  // namespace cuweave::cuda
