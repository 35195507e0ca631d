// One check macro per situation (every CUDA call in this folder goes through one of them):
//   CUWEAVE_CUDA_TRY(call)      throws BackendError (or DeviceUnavailable) naming the call, the error
//                               name and code, and file:line.
//   CUWEAVE_CUDA_TRY_QUIET(call) for destructors and shutdown paths: never throws; clears the error.
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace cuweave::cuda {

void throw_cuda_error(cudaError_t error, const char* expression, const char* file, int line);
// What to do about `error`, which means that no device is usable (appended to its description).
std::string no_device_hint(cudaError_t error);

inline void check(cudaError_t error, const char* expression, const char* file, int line) {
  if (error != cudaSuccess) throw_cuda_error(error, expression, file, line);
}

}  // namespace cuweave::cuda

#define CUWEAVE_CUDA_TRY(call) ::cuweave::cuda::check((call), #call, __FILE__, __LINE__)
#define CUWEAVE_CUDA_TRY_QUIET(call)                       \
  do {                                                     \
    if ((call) != cudaSuccess) (void)cudaGetLastError();   \
  } while (0)
