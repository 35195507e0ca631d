// Parallel host memcpy: one thread copies about 13 GB/s, fewer than the link carries (about 55 GB/s
// each way on PCIe Gen5 x16), so large host-side copies are split across a small persistent pool.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cuweave {

class HostCopyThreads {
 public:
  // A pool of CUWEAVE_COPY_THREADS threads, default min(32, the CPUs this process may run on), the caller's
  // among them. Its threads live until the process ends: the pool must outlive every copy (services.hpp keeps it).
  static std::unique_ptr<HostCopyThreads> sized_from_environment();
  HostCopyThreads(const HostCopyThreads&) = delete;
  HostCopyThreads& operator=(const HostCopyThreads&) = delete;

  // Copies `bytes` from `source` to `destination`, split across at most `threads` of the pool's threads
  // (the calling thread among them; 0: all); returns when all of it is copied. `streaming` bypasses the
  // caches on the stores: faster into memory that is written again and again (staging slots), slower into
  // freshly allocated pages (measured on an H200 host: 50 vs 47 GB/s into slots, 12 vs 18 GB/s into a new
  // NumPy array). Callers release the GIL.
  void copy(void* destination, const void* source, std::size_t bytes, bool streaming, std::size_t threads = 0);
  std::size_t threads() const noexcept { return workers_.size() + 1; }
  // The thread counts worth trying for large copies (Note [Copy threads chosen as transfers run]): a
  // quarter, half, three quarters and all of the pool; only the pool's size when CUWEAVE_COPY_THREADS set it.
  std::vector<std::size_t> counts_to_try() const;

  // Note [Copies that overlap in the pool]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // copy() is a fork-join: every thread waits at its end for the slowest piece. A staged transfer copies
  // chunk after chunk, and with one copy in the pool at a time, the threads done early idled at each chunk's
  // end; on a host whose cores others share, one late thread held up all of them, chunk after chunk (H100
  // machine: 28 GB/s staged with 16 MB chunks, 32 with 64 MB, where torch's pin_memory copies 44).
  // start() queues a copy's pieces and returns at once, so the next chunk's pieces are queued while this
  // chunk's last ones are copied, and finish() waits for one copy alone.
  class Copy {
   public:
    Copy() = default;
    Copy(const Copy&) = delete;
    Copy& operator=(const Copy&) = delete;
    ~Copy();  // finishes the copy if it was started and not finished (its pieces point into this object)
    // Whether every piece has been copied (finish() then waits for nothing); its bytes are then visible here.
    bool done() const noexcept { return remaining_.load(std::memory_order_acquire) == 0; }
    // When its last piece was done, whichever thread copied it; read after finish().
    std::chrono::steady_clock::time_point finished_at() const noexcept {
      return std::chrono::steady_clock::time_point(
          std::chrono::steady_clock::duration(finished_at_.load(std::memory_order_relaxed)));
    }

   private:
    friend class HostCopyThreads;
    void piece_done() noexcept;  // stamps the time, then counts the piece done
    HostCopyThreads* pool_ = nullptr;  // set while started and not finished
    std::atomic<std::size_t> remaining_{0};  // pieces not yet done
    std::atomic<std::chrono::steady_clock::rep> finished_at_{0};  // the latest piece's end, since the clock's epoch
  };
  // Queues the pieces of a copy of `bytes` for at most `threads` threads (0: all); `copy` must stay put
  // until finished.
  void start(Copy& copy, void* destination, const void* source, std::size_t bytes, bool streaming,
             std::size_t threads = 0);
  // Copies pieces of `copy` nobody has taken yet, then waits for those other threads are copying.
  void finish(Copy& copy) noexcept;

 private:
  HostCopyThreads(std::size_t workers, bool size_was_set);
  struct Piece {
    void* destination;
    const void* source;
    std::size_t bytes;
    bool streaming;
    Copy* copy;                           // whose piece it is
    std::size_t workers;                  // the pool's workers 0 to workers - 1 may take it (the caller too)
  };
  std::size_t pieces_of(std::size_t bytes, std::size_t threads) const noexcept;
  // Takes the first queued piece `eligible` accepts, if there is one: a piece of the caller's own copy, or
  // one that a worker may copy.
  template <typename Eligible>
  bool take_first(Piece& piece, Eligible eligible);
  bool has_piece_for(std::size_t worker) const;  // LOCK: mutex_
  void pieces_changed();                         // LOCK: mutex_; updates queued_ and widest_
  void run(std::size_t worker);

  // Note [Copy threads spin before sleeping]: a large transfer hands out a chunk's pieces every 0.1 to
  // 0.2 ms; waking a sleeping thread can cost tens of microseconds (more in a virtual machine), so
  // workers keep looking for work for a short while before they block, and the caller waits for its
  // pieces by polling an atomic count rather than a condition variable.
  std::mutex mutex_;
  std::condition_variable work_;
  std::deque<Piece> pieces_;           // LOCK: mutex_
  std::atomic<std::size_t> queued_{0};  // pieces_.size(), readable without the lock
  std::atomic<std::size_t> widest_{0};  // the most workers a queued piece allows (written under mutex_)
  std::vector<std::thread> workers_;
  bool size_was_set_;  // by CUWEAVE_COPY_THREADS: the user's count, not one to tune
};

}  // namespace cuweave
