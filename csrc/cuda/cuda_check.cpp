// What a failed CUDA call throws: BackendError, DeviceUnavailable, or ContextLost once the context is
// poisoned (Note [Sticky errors]).
#include "cuda/cuda_check.hpp"

#include <cuda_runtime.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

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

}  // namespace

std::string no_device_hint(cudaError_t error) {
  if (error == cudaErrorInsufficientDriver || error == cudaErrorSystemDriverMismatch) {
    return ". cuweave found no usable NVIDIA driver (libcuda.so missing or older than this CUDA runtime); "
           "install or update the NVIDIA driver to use the GPU";
  }
  return ". cuweave found no usable CUDA GPU (check the driver, nvidia-smi and CUDA_VISIBLE_DEVICES); "
         "cuweave.is_available() tells before calling";
}

namespace {

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

}  // namespace cuweave::cuda
