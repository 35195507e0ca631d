// Launchers for cuweave's built-in kernels (builtin_kernels.cu). They return the launch error.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace cuweave::cuda {

cudaError_t launch_fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
                        cudaStream_t stream);
cudaError_t launch_spin(std::uint64_t nanoseconds, unsigned blocks, std::uint64_t* start_time,
                        cudaStream_t stream);

}  // namespace cuweave::cuda
