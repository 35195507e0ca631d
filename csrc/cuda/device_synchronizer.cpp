#include "cuda/device_synchronizer.hpp"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "cuda/cuda_check.hpp"
#include "cuda/own_calls.hpp"

namespace cuweave::cuda {

BackgroundSynchronizer& device_synchronizer(int device) {
  static std::mutex mutex;
  // Leaked with their threads: a synchronization still running at exit must not be joined or destroyed
  // while the runtime shuts down.
  static auto* synchronizers = new std::map<int, BackgroundSynchronizer*>;
  std::lock_guard<std::mutex> lock(mutex);
  BackgroundSynchronizer*& synchronizer = (*synchronizers)[device];
  if (!synchronizer) {
    synchronizer = new BackgroundSynchronizer(
        [device] {
          const OwnCall own;  // Note [cuweave's own runtime calls]
          cudaError_t error = cudaSetDevice(device);
          if (error == cudaSuccess) error = cudaDeviceSynchronize();
          if (error != cudaSuccess) (void)cudaGetLastError();
          return static_cast<int>(error);
        },
        [](int error) {
          throw_cuda_error(static_cast<cudaError_t>(error), "cudaDeviceSynchronize()", __FILE__, __LINE__);
        });
  }
  return *synchronizer;
}

}  // namespace cuweave::cuda
