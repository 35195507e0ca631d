#include "cuweave/staging_ring.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "cuweave/interruptible_wait.hpp"
#include "cuweave/pinned_pool.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"

namespace cuweave {

namespace {
std::size_t setting(const char* name, std::size_t fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr) return fallback;
  const long parsed = std::atol(value);
  return parsed > 0 ? static_cast<std::size_t>(parsed) : fallback;
}
}  // namespace

StagingRing& StagingRing::for_device(int device) {
  static auto* mutex = new std::mutex;
  static auto* rings = new std::map<int, StagingRing*>;  // leaked: slots may be in flight at exit
  std::lock_guard<std::mutex> lock(*mutex);
  StagingRing*& ring = (*rings)[device];
  if (!ring) {
    // At least two slots: a device-to-host copy drains one while the engine fills the next.
    ring = new StagingRing(device, std::max<std::size_t>(2, setting("CUWEAVE_STAGING_SLOTS", 6)),
                           setting("CUWEAVE_STAGING_CHUNK_MB", 16) << 20);  // the fastest on the H100 machine
  }
  return *ring;
}

StagingRing::StagingRing(int device, std::size_t slots, std::size_t slot_bytes)
    : device_(device), slot_bytes_(slot_bytes), slots_(slots) {
  for (StagingSlot& slot : slots_) {
    slot.block = services().pinned().allocate(slot_bytes);
    slot.data = slot.block->data();
    slot.bytes = slot_bytes;
    slot.last_use = backend().streams().create_event(device, kEventDefault);
  }
  stats_.slots = slots;
  stats_.slot_bytes = slot_bytes;
}

StagingSlot* StagingRing::acquire() { return take(true); }

StagingSlot* StagingRing::try_acquire() { return take(false); }

StagingSlot* StagingRing::take(bool wait_for_a_free_slot) {
  StagingSlot* slot = nullptr;
  bool must_wait_for_dma = false;
  auto find_free = [&]() -> StagingSlot* {
    for (std::size_t step = 0; step < slots_.size(); ++step) {
      StagingSlot& candidate = slots_[(cursor_ + step) % slots_.size()];
      if (!candidate.taken) {
        cursor_ = (cursor_ + step + 1) % slots_.size();
        return &candidate;
      }
    }
    return nullptr;
  };
  bool counted_wait = false;
  // Every slot may be taken by other threads' copies: wait for one (interruptibly, the lock released
  // between slices).
  wait_interruptibly([&](const WaitSlice& slice) {
    std::unique_lock<std::mutex> lock(mutex_);
    slot = find_free();
    if (!slot) {
      if (!wait_for_a_free_slot) return true;
      if (!counted_wait) ++stats_.waits;
      counted_wait = true;
      if (!released_.wait_until(lock, slice.until, [&] { return (slot = find_free()) != nullptr; })) return false;
    }
    slot->taken = true;
    must_wait_for_dma = slot->recorded;
    ++stats_.acquisitions;
    return true;
  });
  if (!slot) return nullptr;
  // Outside the lock: never wait for the device while holding the ring's mutex.
  try {
    if (must_wait_for_dma && !backend().streams().event_complete(slot->last_use)) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++stats_.waits;
      }
      wait(slot);
    }
  } catch (...) {
    release(slot);  // still recorded: its next taker waits for the DMA too
    throw;
  }
  return slot;
}

void StagingRing::record(StagingSlot* slot, Stream& stream) {
  {
    // Marked before recording: if the recording fails (a lost context), the transfer queued from the slot may
    // still read it, so its next taker asks the event (which fails as every call then does) rather than
    // refilling it.
    std::lock_guard<std::mutex> lock(mutex_);
    slot->recorded = true;
  }
  stream.record_unobserved(slot->last_use);
}

void StagingRing::wait(StagingSlot* slot) {
  StreamBackend& streams = backend().streams();
  wait_interruptibly([&](const WaitSlice& slice) { return streams.synchronize_event_for(slot->last_use, slice); });
}

void StagingRing::release(StagingSlot* slot) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    slot->taken = false;
  }
  released_.notify_one();
}

StagingRingStats StagingRing::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace cuweave
