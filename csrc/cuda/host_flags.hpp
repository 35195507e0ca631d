// Host flags for the CUDA backend: 32-bit counters in mapped pinned memory that streams wait for with
// cuStreamWaitValue32 (Note [Stream-ordered host callbacks] in host_callbacks.hpp).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace cuweave::cuda {

class HostFlags {
 public:
  static HostFlags& instance();
  // A flag slot: a stream waits for its value + 1, and raising stores that. A slot's value is never
  // reset: a reused slot keeps counting up (the device compares cyclically), so a wait still queued from
  // its previous owner, which raised it before giving it back, stays satisfied.
  std::uint32_t* take();
  void give_back(std::uint32_t* flag) noexcept;

 private:
  HostFlags() = default;
  std::mutex mutex_;
  std::vector<std::uint32_t*> free_;  // LOCK: mutex_; slabs are never freed (a queued wait may read them)
};

}  // namespace cuweave::cuda
