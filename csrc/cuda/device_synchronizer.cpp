#include "cuda/device_synchronizer.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>

#include "cuda/cuda_check.hpp"

namespace cuweave::cuda {

DeviceSynchronizer& DeviceSynchronizer::of(int device) {
  static std::mutex mutex;
  // Leaked with their threads: a synchronization still running at exit must not be joined or destroyed
  // while the runtime shuts down.
  static auto* synchronizers = new std::map<int, DeviceSynchronizer*>;
  std::lock_guard<std::mutex> lock(mutex);
  DeviceSynchronizer*& synchronizer = (*synchronizers)[device];
  if (!synchronizer) synchronizer = new DeviceSynchronizer(device);
  return *synchronizer;
}

bool DeviceSynchronizer::wait(const WaitSlice& slice) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto answered = [&] { return finished_any_ && finished_began_ >= slice.began; };
  if (!answered()) {
    want_ = true;
    start_locked();
    changed_.notify_all();
    if (!changed_.wait_until(lock, slice.until, answered)) return false;
  }
  if (finished_error_ != cudaSuccess) {
    throw_cuda_error(static_cast<cudaError_t>(finished_error_), "cudaDeviceSynchronize()", __FILE__, __LINE__);
  }
  return true;
}

void DeviceSynchronizer::after_next_synchronization(std::function<void()> action) {
  std::lock_guard<std::mutex> lock(mutex_);
  deferred_.push_back(Deferred{Clock::now(), std::move(action)});
}

void DeviceSynchronizer::start_locked() {
  if (started_) return;
  std::thread([this] { run(); }).detach();
  started_ = true;
}

void DeviceSynchronizer::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return want_; });
    want_ = false;
    const Clock::time_point began = Clock::now();
    lock.unlock();
    cudaError_t error = cudaSetDevice(device_);
    if (error == cudaSuccess) error = cudaDeviceSynchronize();
    if (error != cudaSuccess) (void)cudaGetLastError();
    lock.lock();
    finished_began_ = began;
    finished_any_ = true;
    finished_error_ = error;
    changed_.notify_all();
    // Actions asked for before this synchronization began: the work queued before them has completed.
    std::vector<Deferred> due;
    auto first_not_due = std::stable_partition(deferred_.begin(), deferred_.end(),
                                               [began](const Deferred& d) { return d.asked < began; });
    due.assign(std::make_move_iterator(deferred_.begin()), std::make_move_iterator(first_not_due));
    deferred_.erase(deferred_.begin(), first_not_due);
    if (!due.empty()) {
      lock.unlock();
      for (Deferred& d : due) d.action();
      lock.lock();
    }
  }
}

}  // namespace cuweave::cuda
