#include "cuda/device_synchronizer.hpp"

#include <cuda_runtime.h>

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
    if (!started_) {
      std::thread([this] { run(); }).detach();
      started_ = true;
    }
    changed_.notify_all();
    if (!changed_.wait_until(lock, slice.until, answered)) return false;
  }
  if (finished_error_ != cudaSuccess) {
    throw_cuda_error(static_cast<cudaError_t>(finished_error_), "cudaDeviceSynchronize()", __FILE__, __LINE__);
  }
  return true;
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
  }
}

}  // namespace cuweave::cuda
