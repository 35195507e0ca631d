// Switching the current device for the length of a call.
#pragma once

#include <cuda_runtime.h>

#include "cuda/cuda_check.hpp"

namespace cuweave::cuda {

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

}  // namespace cuweave::cuda
