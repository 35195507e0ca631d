// Note [Pinned pool reuse]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Page-locked host memory is slow to get (cudaHostAlloc: about 1.3 ms per MB-sized block), so blocks are
// cached by size class and handed out again. A block returns to the cache when its PinnedBlock is
// destroyed, and queued copies that read or write it hold the PinnedBlock (through the Python object
// that owns it) until their event has completed: see Note [Stream-ordered lifetimes]. So a cached block
// is never one an in-flight copy still uses, and no device-wide synchronize is ever needed.
// The pool never calls the backend while holding its mutex.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace cuweave {

class LifetimeTracker;
class MemoryBackend;
class PinnedPool;

// One block of pinned host memory on loan from `pool`; destroying it gives the memory back.
class PinnedBlock {
 public:
  PinnedBlock(PinnedPool& pool, void* pointer, std::size_t bytes, std::size_t capacity) noexcept
      : pool_(pool), pointer_(pointer), bytes_(bytes), capacity_(capacity) {}
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;
  ~PinnedBlock();

  void* data() const noexcept { return pointer_; }
  std::size_t size() const noexcept { return bytes_; }
  std::size_t capacity() const noexcept { return capacity_; }

 private:
  PinnedPool& pool_;
  void* pointer_;
  std::size_t bytes_;
  std::size_t capacity_;
};

struct PinnedPoolStats {
  std::size_t in_use_bytes = 0;
  std::size_t in_use_blocks = 0;
  std::size_t cached_bytes = 0;
  std::size_t cached_blocks = 0;
  std::size_t peak_in_use_bytes = 0;
  std::size_t hits = 0;
  std::size_t misses = 0;
  std::size_t results_in_use_bytes = 0;  // held by host read results (Note [Pinned results for recurring sizes])
  std::size_t results_limit_bytes = 0;
};

class PinnedPool {
 public:
  // Blocks of `memory`'s pinned memory; `lifetimes` is collected before a miss allocates (completed copies give
  // their blocks back). The results' limit comes from the environment (Note [Pinned results for recurring sizes]).
  PinnedPool(MemoryBackend& memory, LifetimeTracker& lifetimes);
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // The size class a request of `bytes` is served from.
  static std::size_t size_class(std::size_t bytes) noexcept;

  // A cached block, or nullptr when none of the size class is cached. Never calls the backend.
  std::shared_ptr<PinnedBlock> try_allocate_cached(std::size_t bytes);
  // A cached block, else one freshly allocated from the backend (may block: callers release the GIL).
  std::shared_ptr<PinnedBlock> allocate(std::size_t bytes);
  PinnedPoolStats stats() const;
  // Frees every cached block; returns the bytes given back. May block: callers release the GIL.
  std::size_t empty_cache();

  // Note [Pinned results for recurring sizes]
  // A device-to-host result in pinned memory arrives at the link's speed (about 55 GB/s on PCIe Gen5)
  // against about 20-28 GB/s into fresh ordinary memory, whose pages the kernel must first fault in and
  // zero; but getting new pinned memory costs about 0.3 ms per MB. So a result is pinned when that costs
  // nothing (a block of its size class is cached) or when its size class recurs (the second request
  // pays for a block that later requests reuse); a one-off result stays in ordinary memory. Results a program
  // keeps hold their blocks, so the pinned memory that live results hold is bounded (results_limit, 256 MB
  // unless CUWEAVE_PINNED_RESULTS_MB says otherwise): past it, a result is ordinary memory, and page-locked
  // memory, which the system cannot swap, does not grow with a list of kept results.
  // Returns nullptr when the result should stay in ordinary memory. May block: callers release the GIL.
  std::shared_ptr<PinnedBlock> allocate_result(std::size_t bytes);
  std::size_t results_limit() const;
  void set_results_limit(std::size_t bytes);
  // A result's block went (called as it goes).
  void result_released(std::size_t capacity) noexcept;

 private:
  friend class PinnedBlock;
  std::shared_ptr<PinnedBlock> take_cached(std::size_t bytes, std::size_t capacity);
  // Counts a block as in use and wraps it; `source` names where it came from (for CUWEAVE_DEBUG_POOL).
  // Caller holds mutex_.
  std::shared_ptr<PinnedBlock> hand_out(void* pointer, std::size_t bytes, std::size_t capacity, const char* source);
  void give_back(void* pointer, std::size_t capacity) noexcept;

  MemoryBackend& memory_;
  LifetimeTracker& lifetimes_;
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> cached_;  // LOCK: mutex_ (size class -> blocks)
  PinnedPoolStats stats_;                                        // LOCK: mutex_
  std::unordered_set<std::size_t> requested_classes_;            // LOCK: mutex_ (by allocate_result)
};

}  // namespace cuweave
