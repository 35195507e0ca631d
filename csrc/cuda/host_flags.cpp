#include "cuda/host_flags.hpp"

#include <cuda_runtime.h>

#include "cuda/cuda_check.hpp"

namespace cuweave::cuda {

namespace {
// One page of flags per slab; a flag per stream that ever queued a stream-ordered callback.
constexpr std::size_t kFlagsPerSlab = 4096 / sizeof(std::uint32_t);
}  // namespace

HostFlags& HostFlags::instance() {
  static auto* flags = new HostFlags;  // leaked: queued waits may read the slabs during shutdown
  return *flags;
}

std::uint32_t* HostFlags::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) {
    void* slab = nullptr;
    // Mapped: the device reads the flags over the bus; portable: every device may wait on them.
    CUWEAVE_CUDA_TRY(cudaHostAlloc(&slab, kFlagsPerSlab * sizeof(std::uint32_t),
                                   cudaHostAllocMapped | cudaHostAllocPortable));
    auto* flags = static_cast<std::uint32_t*>(slab);
    for (std::size_t i = 0; i < kFlagsPerSlab; ++i) {
      flags[i] = 0;
      free_.push_back(flags + i);
    }
  }
  std::uint32_t* flag = free_.back();
  free_.pop_back();
  return flag;
}

void HostFlags::give_back(std::uint32_t* flag) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    free_.push_back(flag);
  } catch (...) {
    // Out of memory: the slot is lost, which is harmless.
  }
}

}  // namespace cuweave::cuda
