// Note [Staging ring reuse]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Copies between ordinary (pageable) host memory and a device go through a fixed set of pinned slots:
// host threads fill or drain a slot while the copy engine moves another. A slot's last DMA is marked
// by an event recorded right after it; acquire() hands a slot out only once that event has completed,
// so a fast producer waits (backpressure) instead of overwriting data a queued copy still reads, and
// the ring's memory never grows. Slots are exclusive between acquire() and release(), so several
// threads (a prefetcher and the main thread, say) can share one ring.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "cuweave/backend.hpp"

namespace cuweave {

class PinnedBlock;
class Stream;

struct StagingSlot {
  std::shared_ptr<PinnedBlock> block;
  void* data = nullptr;
  std::size_t bytes = 0;
  EventHandle last_use = nullptr;  // recorded after the slot's last DMA
  bool recorded = false;           // LOCK: the ring's mutex
  bool taken = false;              // LOCK: the ring's mutex
};

struct StagingRingStats {
  std::size_t slots = 0;
  std::size_t slot_bytes = 0;
  std::size_t acquisitions = 0;
  std::size_t waits = 0;  // acquisitions that had to wait for a slot's DMA or for a free slot
};

class StagingRing {
 public:
  // The ring of `device`, created at first use: CUWEAVE_STAGING_SLOTS slots (default 6) of
  // CUWEAVE_STAGING_CHUNK_MB MiB (default 16) from the pinned pool.
  static StagingRing& for_device(int device);

  // A slot for this caller alone; waits for a free slot and for the slot's last DMA. Blocks: callers
  // release the GIL.
  StagingSlot* acquire();
  // A slot, if one is free now (waiting only for its last DMA); else null. A caller that already holds a
  // slot takes a second one only this way: holding one while waiting for another, callers on several
  // threads could each hold one and wait for ever.
  StagingSlot* try_acquire();
  // Marks the slot's last DMA: the work queued on `stream` so far.
  void record(StagingSlot* slot, Stream& stream);
  // Blocks until the slot's recorded DMA has completed (callers release the GIL).
  void wait(StagingSlot* slot);
  // Gives the slot back (its recorded DMA may still be in flight; the next acquire() waits for it).
  void release(StagingSlot* slot) noexcept;

  std::size_t slot_bytes() const noexcept { return slot_bytes_; }
  StagingRingStats stats() const;

 private:
  StagingRing(int device, std::size_t slots, std::size_t slot_bytes);
  StagingSlot* take(bool wait_for_a_free_slot);

  int device_;
  std::size_t slot_bytes_;
  mutable std::mutex mutex_;
  std::condition_variable released_;
  std::vector<StagingSlot> slots_;  // fixed after construction; fields marked LOCK change under mutex_
  std::size_t cursor_ = 0;          // LOCK: mutex_
  StagingRingStats stats_;          // LOCK: mutex_
};

}  // namespace cuweave
