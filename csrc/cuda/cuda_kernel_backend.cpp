// The CUDA backend's built-in and runtime-compiled kernels (KernelBackend).
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/active_captures.hpp"
#include "cuda/builtin_kernels.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/own_launch.hpp"
#include "cuda/own_modules.hpp"
#include "cuda/cuda_facets.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/device_synchronizer.hpp"
#include "cuda/driver_api.hpp"
#include "cuda/nvrtc_compiler.hpp"
#include "cuweave/kernel_backend.hpp"

namespace cuweave::cuda {

namespace {

class CudaKernelBackend final : public KernelBackend {
 public:
  CudaKernelBackend(const ActiveCaptures& captures, DeviceBackend& devices, MemoryBackend& memory)
      : captures_(captures), devices_(devices), memory_(memory) {}

  void fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
            StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(launch_fill(destination, count, pattern, pattern_bytes, as_stream(stream)));
  }

  void copy_strided(const StridedCopy& copy, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(launch_copy_strided(copy, as_stream(stream)));
  }

  void spin(std::uint64_t nanoseconds, unsigned blocks, std::uint64_t* start_time, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(launch_spin(nanoseconds, blocks, start_time, as_stream(stream)));
  }

  CompiledKernel compile(const std::string& source, const std::string& name_expression,
                         const std::vector<std::string>& options, int device) override {
    const DeviceProperties props = devices_.device_properties(device);
    return nvrtc_compile(source, name_expression, options, props.compute_capability_major,
                         props.compute_capability_minor);
  }

  // Note [Kernels through the driver]: modules and CUfunctions, not libraries.
  ModuleHandle load_module(const std::string& binary, int device) override {
    DeviceGuard guard(device);
    make_runtime_context_current();
    CUmodule module = nullptr;
    CUWEAVE_DRIVER_TRY(driver().module_load_data(&module, binary.data()));
    note_module_loaded(module);
    return module;
  }

  void unload_module(ModuleHandle module, int device) noexcept override {
    try {
      device_synchronizer(device).after_next_synchronization([module] {
        try {
          note_module_unloaded(static_cast<CUmodule>(module));
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
                     StreamHandle stream, bool programmatic) override {
    constexpr std::size_t kDefaultSharedLimit = 48 << 10;  // more needs an explicit opt-in per kernel
    OwnLaunch launch;
    launch.function = static_cast<CUfunction>(kernel);
    if (shared_bytes > kDefaultSharedLimit) {
      CUWEAVE_DRIVER_TRY(driver().function_set_attribute(
          launch.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(shared_bytes)));
    }
    launch.grid = grid;
    launch.block = block;
    launch.shared_bytes = static_cast<unsigned>(shared_bytes);
    launch.stream = static_cast<CUstream>(stream);
    launch.programmatic = programmatic;
    const CUresult status = launch_own_kernel(launch, arguments);
    if (status != CUDA_SUCCESS) check_driver(status, "cuLaunchKernelEx", __FILE__, __LINE__);
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
    if (captures_.capturing(stream)) {
      CUWEAVE_CUDA_TRY(cudaMallocAsync(&scratch, scratch_bytes, as_stream(stream)));
    } else {
      int device = 0;
      CUWEAVE_CUDA_TRY(cudaStreamGetDevice(as_stream(stream), &device));
      scratch = memory_.allocate_device(scratch_bytes, device, stream);
    }
    const cudaError_t launched = launch_sum(out, x, count, type, scratch, as_stream(stream));
    CUWEAVE_CUDA_TRY_QUIET(cudaFreeAsync(scratch, as_stream(stream)));
    CUWEAVE_CUDA_TRY(launched);
  }

 private:
  const ActiveCaptures& captures_;
  DeviceBackend& devices_;  // the properties a compilation targets
  MemoryBackend& memory_;   // stream-ordered scratch for sums
};

}  // namespace

std::unique_ptr<KernelBackend> make_kernel_backend(const ActiveCaptures& captures, DeviceBackend& devices,
                                                   MemoryBackend& memory) {
  return std::make_unique<CudaKernelBackend>(captures, devices, memory);
}

}  // namespace cuweave::cuda
