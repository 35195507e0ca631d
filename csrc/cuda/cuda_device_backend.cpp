// The CUDA backend's devices (DeviceBackend).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_facets.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/device_synchronizer.hpp"
#include "cuda/own_calls.hpp"
#include "cuweave/device_backend.hpp"

namespace cuweave::cuda {

namespace {

class CudaDeviceBackend final : public DeviceBackend {
 public:
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
    const OwnCall own;  // Note [cuweave's own runtime calls]
    CUWEAVE_CUDA_TRY(cudaDeviceSynchronize());
  }

  bool synchronize_device_for(int device, const WaitSlice& slice) override {
    return device_synchronizer(device).wait(slice);
  }

  std::pair<int, int> driver_version() override {
    int version = 0;
    CUWEAVE_CUDA_TRY(cudaDriverGetVersion(&version));  // 0 when no driver is installed
    return {version / 1000, (version % 1000) / 10};
  }

  GraphMemoryUse graph_memory_use(int device) override {
    std::uint64_t used = 0;  // the attribute's cuuint64_t
    std::uint64_t reserved = 0;
    CUWEAVE_CUDA_TRY(cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrUsedMemCurrent, &used));
    CUWEAVE_CUDA_TRY(cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrReservedMemCurrent, &reserved));
    return {static_cast<std::size_t>(used), static_cast<std::size_t>(reserved)};
  }

  void trim_graph_memory(int device) override { CUWEAVE_CUDA_TRY(cudaDeviceGraphMemTrim(device)); }

  std::pair<int, int> runtime_version() override {
    int version = 0;
    CUWEAVE_CUDA_TRY(cudaRuntimeGetVersion(&version));
    return {version / 1000, (version % 1000) / 10};
  }

 private:
  std::atomic<int> known_device_count_{0};
  std::mutex mutex_;
  std::unordered_map<int, DeviceProperties> properties_;  // LOCK: mutex_
};

}  // namespace

std::unique_ptr<DeviceBackend> make_device_backend() {
  return std::make_unique<CudaDeviceBackend>();
}

}  // namespace cuweave::cuda
