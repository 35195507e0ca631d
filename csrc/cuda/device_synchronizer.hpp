// cudaDeviceSynchronize in slices (Note [Interruptible waits]): CUDA offers no bounded or polled form
// of it, so a helper thread per device makes the blocking call while callers wait in slices. A caller
// that gives up leaves the call running; each caller is answered by a synchronization that began after
// its wait began, so none returns before the work it asked about has completed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "cuweave/backend.hpp"

namespace cuweave::cuda {

class DeviceSynchronizer {
 public:
  static DeviceSynchronizer& of(int device);
  // True once a synchronization that began at or after slice.began has finished (rethrowing its error).
  bool wait(const WaitSlice& slice);
  // Runs `action` on the helper thread once a synchronization that began after this call has finished
  // (whatever its result): after all work queued on the device so far. Never blocks the caller, and
  // starts no synchronization of its own: a device synchronize nobody asked for would fail any capture
  // in progress on the device (CUDA forbids synchronizing a device with a capturing stream), so the
  // action waits for the next one a caller asks for (cuweave.synchronize(), device.synchronize()).
  void after_next_synchronization(std::function<void()> action);

 private:
  explicit DeviceSynchronizer(int device) : device_(device) {}
  void start_locked();
  void run();

  struct Deferred {
    std::chrono::steady_clock::time_point asked;
    std::function<void()> action;
  };

  using Clock = std::chrono::steady_clock;
  const int device_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool started_ = false;          // LOCK: mutex_
  bool want_ = false;             // LOCK: someone waits for a synchronization not yet begun
  Clock::time_point finished_began_{};  // LOCK: when the latest finished synchronization began
  bool finished_any_ = false;     // LOCK
  int finished_error_ = 0;        // LOCK: its cudaError_t
  std::vector<Deferred> deferred_;  // LOCK: actions waiting for a synchronization that began after them
};

}  // namespace cuweave::cuda
