// Parallel host memcpy: one thread copies about 13 GB/s, fewer than the link carries (about 55 GB/s
// each way on PCIe Gen5 x16), so large host-side copies are split across a small persistent pool.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace cuweave {

class HostCopyThreads {
 public:
  // The process-wide pool: CUWEAVE_COPY_THREADS threads, default min(16, hardware threads).
  static HostCopyThreads& instance();

  // Copies `bytes` from `source` to `destination`, split across the pool and the calling thread;
  // returns when all of it is copied. `streaming` bypasses the caches on the stores: faster into memory
  // that is written again and again (staging slots), slower into freshly allocated pages (measured on an
  // H200 host: 50 vs 47 GB/s into slots, 12 vs 18 GB/s into a new NumPy array). Callers release the GIL.
  void copy(void* destination, const void* source, std::size_t bytes, bool streaming);
  std::size_t threads() const noexcept { return workers_.size() + 1; }

 private:
  explicit HostCopyThreads(std::size_t workers);
  struct Piece {
    void* destination;
    const void* source;
    std::size_t bytes;
    bool streaming;
    std::atomic<std::size_t>* remaining;  // pieces of its copy not yet done
  };
  // Takes a queued piece of the copy that `remaining` counts (any copy's when null), if there is one.
  bool take(Piece& piece, const std::atomic<std::size_t>* remaining);
  void run();

  // Note [Copy threads spin before sleeping]: a large transfer hands out a chunk's pieces every 0.1 to
  // 0.2 ms; waking a sleeping thread can cost tens of microseconds (more in a virtual machine), so
  // workers keep looking for work for a short while before they block, and the caller waits for its
  // pieces by polling an atomic count rather than a condition variable.
  std::mutex mutex_;
  std::condition_variable work_;
  std::deque<Piece> pieces_;           // LOCK: mutex_
  std::atomic<std::size_t> queued_{0};  // pieces_.size(), readable without the lock
  std::vector<std::thread> workers_;
};

}  // namespace cuweave
