// The captures the CUDA backend has begun, and the calls it makes on its own while one is active.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <thread>

#include "cuda/cuda_check.hpp"
#include "cuda/cuda_handles.hpp"

namespace cuweave::cuda {

// Captures begun through this backend and not yet ended (any thread). One per backend, shared by its facets:
// the capture facet counts, the others ask (Note [Bookkeeping during capture]).
class ActiveCaptures {
 public:
  // Called before a capture begins: from here on bookkeeping calls relax their thread, and those already
  // made in the thread's own mode have ended (Note [Bookkeeping during capture]).
  void beginning() noexcept {
    count_.fetch_add(1, std::memory_order_seq_cst);
    while (unrelaxed_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  }
  void ended() noexcept { count_.fetch_sub(1, std::memory_order_acq_rel); }  // also a capture that failed to begin
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
  friend class BookkeepingGuard;
  std::atomic<int> count_{0};
  mutable std::atomic<int> unrelaxed_{0};  // bookkeeping calls under way in their thread's own mode
};

// Note [Bookkeeping during capture]
// While a global or thread-local capture is active, CUDA refuses calls it deems unsafe (event and
// stream queries, allocations, host registration) and invalidates the capture. cuweave makes such
// calls on its own (the lifetime tracker's queries, pools, registration) on the capturing thread and
// on its helper threads; none touches a capturing stream's work. This guard switches the calling
// thread to relaxed mode around them, as PyTorch's allocator does. Waits the user asks for
// (synchronize) are not guarded: CUDA's rules apply to them unchanged.
// A call that found no capture runs in its thread's own mode, so a capture another thread begins meanwhile
// would be invalidated by it: such calls are counted, and a capture begins only once they have ended. Both
// counts are sequentially consistent, so either the call sees the capture or the capture sees the call.
class BookkeepingGuard {
 public:
  explicit BookkeepingGuard(const ActiveCaptures& captures) {
    captures.unrelaxed_.fetch_add(1, std::memory_order_seq_cst);
    if (captures.count_.load(std::memory_order_seq_cst) == 0) {
      unrelaxed_ = &captures.unrelaxed_;
      return;
    }
    captures.unrelaxed_.fetch_sub(1, std::memory_order_release);
    mode_ = cudaStreamCaptureModeRelaxed;
    guarded_ = cudaThreadExchangeStreamCaptureMode(&mode_) == cudaSuccess;
  }
  BookkeepingGuard(const BookkeepingGuard&) = delete;
  BookkeepingGuard& operator=(const BookkeepingGuard&) = delete;
  ~BookkeepingGuard() {
    if (unrelaxed_) unrelaxed_->fetch_sub(1, std::memory_order_release);
    if (guarded_) CUWEAVE_CUDA_TRY_QUIET(cudaThreadExchangeStreamCaptureMode(&mode_));
  }

 private:
  std::atomic<int>* unrelaxed_ = nullptr;  // set while this call counts as made in its thread's own mode
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeGlobal;
  bool guarded_ = false;
};

}  // namespace cuweave::cuda
