// The captures the CUDA backend has begun, and the calls it makes on its own while one is active.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_handles.hpp"

namespace cuweave::cuda {

// Captures begun through this backend and not yet ended (any thread). One per backend, shared by its facets:
// the capture facet counts, the others ask (Note [Bookkeeping during capture]).
class ActiveCaptures {
 public:
  void began() noexcept { count_.fetch_add(1, std::memory_order_acq_rel); }
  void ended() noexcept { count_.fetch_sub(1, std::memory_order_acq_rel); }
  bool any() const noexcept { return count_.load(std::memory_order_acquire) != 0; }

  // Whether `stream` is capturing; costs nothing while no capture is active.
  bool capturing(StreamHandle stream) const {
    if (!any()) return false;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(as_stream(stream), &status) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return status != cudaStreamCaptureStatusNone;
  }

 private:
  std::atomic<int> count_{0};
};

// Note [Bookkeeping during capture]
// While a global or thread-local capture is active, CUDA refuses calls it deems unsafe (event and
// stream queries, allocations, host registration) and invalidates the capture. cuweave makes such
// calls on its own (the lifetime tracker's queries, pools, registration) on the capturing thread and
// on its helper threads; none touches a capturing stream's work. This guard switches the calling
// thread to relaxed mode around them, as PyTorch's allocator does. Waits the user asks for
// (synchronize) are not guarded: CUDA's rules apply to them unchanged.
class BookkeepingGuard {
 public:
  explicit BookkeepingGuard(const ActiveCaptures& captures) {
    if (!captures.any()) return;
    mode_ = cudaStreamCaptureModeRelaxed;
    guarded_ = cudaThreadExchangeStreamCaptureMode(&mode_) == cudaSuccess;
  }
  BookkeepingGuard(const BookkeepingGuard&) = delete;
  BookkeepingGuard& operator=(const BookkeepingGuard&) = delete;
  ~BookkeepingGuard() {
    if (guarded_) CUWEAVE_CUDA_TRY_QUIET(cudaThreadExchangeStreamCaptureMode(&mode_));
  }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeGlobal;
  bool guarded_ = false;
};

}  // namespace cuweave::cuda
