#include "cuda/builtin_kernels.hpp"

#include <cstring>

namespace cuweave::cuda {

namespace {

struct Bytes16 {  // complex128 elements need only 8-byte alignment
  unsigned long long low, high;
};

template <typename T>
__global__ void fill_kernel(T* destination, std::size_t count, T value) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    destination[i] = value;
  }
}

__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void spin_kernel(std::uint64_t nanoseconds, std::uint64_t* start_time) {
  const std::uint64_t start = global_timer_ns();
  if (start_time != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *start_time = start;
  while (global_timer_ns() - start < nanoseconds) {
    __nanosleep(500);
  }
}

template <typename T>
cudaError_t launch_fill_as(void* destination, std::size_t count, const void* pattern, cudaStream_t stream) {
  T value;
  std::memcpy(&value, pattern, sizeof(T));
  constexpr unsigned kThreads = 256;
  const std::size_t wanted = (count + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 8192 ? wanted : 8192);
  fill_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(destination), count, value);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
                        cudaStream_t stream) {
  switch (pattern_bytes) {
    case 1: return launch_fill_as<unsigned char>(destination, count, pattern, stream);
    case 2: return launch_fill_as<unsigned short>(destination, count, pattern, stream);
    case 4: return launch_fill_as<unsigned int>(destination, count, pattern, stream);
    case 8: return launch_fill_as<unsigned long long>(destination, count, pattern, stream);
    case 16: return launch_fill_as<Bytes16>(destination, count, pattern, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_spin(std::uint64_t nanoseconds, unsigned blocks, std::uint64_t* start_time,
                        cudaStream_t stream) {
  spin_kernel<<<blocks, 1, 0, stream>>>(nanoseconds, start_time);
  return cudaGetLastError();
}

}  // namespace cuweave::cuda
