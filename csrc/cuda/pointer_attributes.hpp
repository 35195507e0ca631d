// What CUDA knows of an address, for the questions the backend asks of pointers it is given (is it pinned,
// on which device, can a kernel on device N use it as it is, is a copy's end on a device).
#pragma once

#include <cuda_runtime.h>

namespace cuweave::cuda {

// cudaPointerGetAttributes' answer; an address CUDA refuses to describe reads as cudaMemoryTypeUnregistered
// (ordinary host memory), and the failed call's error is cleared so that no later call reports it.
inline cudaPointerAttributes pointer_attributes(const void* pointer) noexcept {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    (void)cudaGetLastError();
    attributes = cudaPointerAttributes{};
    attributes.type = cudaMemoryTypeUnregistered;
  }
  return attributes;
}

}  // namespace cuweave::cuda
