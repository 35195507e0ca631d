// One check macro per situation (every CUDA call in this folder goes through one of them):
//   CUWEAVE_CUDA_TRY(call)      throws BackendError (or DeviceUnavailable) naming the call, the error
//                               name and code, and file:line.
//   CUWEAVE_CUDA_TRY_QUIET(call) for destructors and shutdown paths: never throws; clears the error.
#pragma once

#include <cuda_runtime.h>

namespace cuweave::cuda {

void throw_cuda_error(cudaError_t error, const char* expression, const char* file, int line);

inline void check(cudaError_t error, const char* expression, const char* file, int line) {
  if (error != cudaSuccess) throw_cuda_error(error, expression, file, line);
}

}  // namespace cuweave::cuda

#define CUWEAVE_CUDA_TRY(call) ::cuweave::cuda::check((call), #call, __FILE__, __LINE__)
#define CUWEAVE_CUDA_TRY_QUIET(call)                       \
  do {                                                     \
    if ((call) != cudaSuccess) (void)cudaGetLastError();   \
  } while (0)
