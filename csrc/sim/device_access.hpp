// Note [Simulated device access]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CUDA's ordering rules are not the only ones a program must keep on several devices; on two H200s these
// held as well (tests/python/test_device_rules.py keeps the table, checked on both backends):
//  * Memory from a device's stream-ordered pool is reachable only from the devices its pool grants
//    (cudaMemPoolSetAccess), its own by default. cudaMemcpyAsync checks the current device as well as the
//    stream's: a copy touching pool memory that either has not been granted fails with cudaErrorInvalidValue.
//    cudaDeviceEnablePeerAccess does not grant pools; cudaMemcpyPeerAsync needs neither.
//  * Plain device memory (cudaMalloc) is copied from any current device, and reached by a peer's kernels once
//    peer access is enabled.
//  * An event is recorded only on a stream of its own device (else cudaErrorInvalidResourceHandle); a wait
//    across devices, and a launch on a stream of a device that is not current, are allowed.
//  * A kernel that touches device memory its device cannot reach faults: cudaErrorIllegalAddress at the next
//    synchronization, and the device's context is lost (every later call on it fails). Work queued on it runs no
//    further: no kernel, no copy, no host function (cudaLaunchHostFunc's are not called after a context error).
// The simulator keeps each of them here, so that a program that breaks one fails in CI as it would on GPUs.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "sim/memory_registry.hpp"

namespace cuweave::sim {

class DeviceAccess {
 public:
  DeviceAccess() = default;
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;

  // cudaMemPoolSetAccess(pool of `pool_device`, {`accessor`, read-write}).
  void grant_pool(int pool_device, int accessor);
  // cudaDeviceEnablePeerAccess with `device` current: its kernels reach `peer`'s plain memory.
  void enable_peer(int device, int peer);
  // Whether `accessor` may touch memory of `pool_device`'s pool (always its own).
  bool pool_granted(int pool_device, int accessor);
  // Whether kernels on `device` reach `range`: host memory that is page-locked, the device's own memory, a
  // granted pool's memory, plain memory of a peer with peer access enabled.
  bool kernel_reaches(int device, const MemoryRange& range);

  // A kernel on `device` faulted (by default: it touched memory it cannot reach; `cause` says otherwise, e.g. an
  // injected fault): its context is lost from now on.
  void lose_context(int device, std::string cause = {});
  // Throws ContextLost (cudaErrorIllegalAddress, naming the first call that reported it) for `call` on a device
  // whose context is lost; nothing otherwise.
  void check_context(int device, const char* call);
  // Whether `device`'s context is lost: then its queued work no longer runs (the scheduler asks).
  bool context_lost(int device);

 private:
  std::mutex mutex_;
  std::set<std::pair<int, int>> pool_grants_;  // LOCK: mutex_; (pool device, accessor)
  std::set<std::pair<int, int>> peers_;        // LOCK: mutex_; (device, peer)
  std::map<int, std::string> lost_;             // LOCK: mutex_; devices whose context is lost, and why
  std::atomic<bool> any_lost_{false};           // set once lost_ is not empty: every call asks, rarely in vain
  std::string first_call_;                      // LOCK: mutex_; the first call that reported a loss
};

}  // namespace cuweave::sim
