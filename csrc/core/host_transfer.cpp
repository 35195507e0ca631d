#include "cuweave/host_transfer.hpp"

#include "cuweave/services.hpp"
#include "cuweave/submission.hpp"

#include <algorithm>
#include <deque>
#include <optional>

#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/copy_thread_tuner.hpp"
#include "cuweave/host_copy_threads.hpp"
#include "cuweave/interruptible_wait.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/staging_ring.hpp"
#include "cuweave/tuned_chunks.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"

namespace cuweave {

namespace {

bool wants_staging(const void* host, std::size_t bytes) {
  return bytes >= kStagedCopyThreshold && !backend().memory().is_pinned(host);
}

// Releases a taken slot unless ownership moved on (exception safety).
class SlotGuard {
 public:
  SlotGuard(StagingRing& ring, StagingSlot* slot) noexcept : ring_(ring), slot_(slot) {}
  SlotGuard(const SlotGuard&) = delete;
  SlotGuard& operator=(const SlotGuard&) = delete;
  ~SlotGuard() {
    if (slot_) ring_.release(slot_);
  }
  StagingSlot* get() const noexcept { return slot_; }
  StagingSlot* release() noexcept { return std::exchange(slot_, nullptr); }

 private:
  StagingRing& ring_;
  StagingSlot* slot_;
};

// Note [What the sanitizer sees]: pageable host memory is Python's, and its addresses are reused without
// cuweave seeing the free (a NumPy array's buffer, then another's); each copy starts its history afresh.
void forget_pageable_history(const Stream& stream, const void* host, std::size_t bytes) {
  if (!sanitizer::enabled() || Capture::of(stream)) return;
  if (!backend().memory().is_pinned(host)) sanitizer::allocated(host, bytes);
}

// A chunk on its way: its slot, and the host copy into it (Note [Copies that overlap in the pool]).
struct ChunkInCopy {
  ChunkInCopy(StagingRing& ring, StagingSlot* taken, std::size_t offset, std::size_t bytes)
      : slot(ring, taken), offset(offset), bytes(bytes) {}
  SlotGuard slot;  // declared first, released last: the copy's pieces write into it until it is finished
  std::size_t index = 0;
  std::size_t offset;
  std::size_t bytes;
  HostCopyThreads::Copy copy;
};

// Two chunks in the copy threads at a time: the next chunk's pieces are queued before this chunk's DMA is,
// so the threads done with this chunk go on with the next one (on unwinding, ~Copy waits for the pieces).
// Called inside queue(), whose device step made the stream's device current.
void staged_to_device(Stream& stream, char* destination, const char* source, std::size_t bytes) {
  StagingRing& ring = StagingRing::for_device(stream.device());
  HostCopyThreads& threads = services().copy_threads();
  TunedChunks tuned(staged_copy_tuner(StagedDirection::ToDevice), ring.slot_bytes(), bytes);
  std::deque<ChunkInCopy> chunks;  // a deque keeps its elements in place, as their queued pieces need
  auto send_oldest = [&] {
    ChunkInCopy& chunk = chunks.front();
    threads.finish(chunk.copy);
    tuned.copied(chunk.index, chunk.bytes, chunk.copy.finished_at());  // not when this thread got to it
    backend().memory().copy_async(destination + chunk.offset, chunk.slot.get()->data, chunk.bytes, stream.handle());
    ring.record(chunk.slot.get(), stream);
    chunks.pop_front();
  };
  for (std::size_t offset = 0; offset < bytes; offset += ring.slot_bytes()) {
    const std::size_t n = std::min(ring.slot_bytes(), bytes - offset);
    // At most one slot held while waiting for another (StagingRing::try_acquire).
    StagingSlot* free = chunks.empty() ? nullptr : ring.try_acquire();
    if (!chunks.empty() && free == nullptr) send_oldest();
    // acquire() waits until the slot's previous DMA has read it.
    ChunkInCopy& chunk = chunks.emplace_back(ring, free != nullptr ? free : ring.acquire(), offset, n);
    chunk.index = offset / ring.slot_bytes();
    threads.start(chunk.copy, chunk.slot.get()->data, source + offset, n, /*streaming=*/true,
                  tuned.threads_for(chunk.index));
    if (chunks.size() == 2) send_oldest();
  }
  while (!chunks.empty()) send_oldest();
}

// Called inside queue(), as staged_to_device is.
void staged_to_host(Stream& stream, char* destination, const char* source, std::size_t bytes) {
  StagingRing& ring = StagingRing::for_device(stream.device());
  HostCopyThreads& threads = services().copy_threads();
  TunedChunks tuned(staged_copy_tuner(StagedDirection::ToHost), ring.slot_bytes(), bytes);
  struct InFlight {
    std::size_t offset;
    std::size_t bytes;
  };
  // Two slots at a time: the engine fills one while host threads drain the previous one.
  std::optional<SlotGuard> previous_slot;
  InFlight previous{0, 0};
  auto drain = [&](SlotGuard& slot, const InFlight& chunk) {
    ring.wait(slot.get());
    const std::size_t index = chunk.offset / ring.slot_bytes();
    threads.copy(destination + chunk.offset, slot.get()->data, chunk.bytes, /*streaming=*/false,
                 tuned.threads_for(index));
    tuned.copied(index, chunk.bytes);
  };
  for (std::size_t offset = 0; offset < bytes; offset += ring.slot_bytes()) {
    const std::size_t n = std::min(ring.slot_bytes(), bytes - offset);
    // At most one slot held while waiting for another (StagingRing::try_acquire).
    StagingSlot* free = previous_slot ? ring.try_acquire() : nullptr;
    if (previous_slot && free == nullptr) {
      drain(*previous_slot, previous);
      previous_slot.reset();
    }
    SlotGuard slot(ring, free != nullptr ? free : ring.acquire());
    backend().memory().copy_async(slot.get()->data, source + offset, n, stream.handle());
    ring.record(slot.get(), stream);
    if (previous_slot) drain(*previous_slot, previous);
    previous_slot.emplace(ring, slot.release());
    previous = InFlight{offset, n};
  }
  if (previous_slot) drain(*previous_slot, previous);
}

}  // namespace

CopyThreadTuner& staged_copy_tuner(StagedDirection direction) {
  // Leaked, as the copy threads are: staged copies may run until exit.
  static auto* to_device = new CopyThreadTuner(services().copy_threads().counts_to_try());
  static auto* to_host = new CopyThreadTuner(services().copy_threads().counts_to_try());
  return direction == StagedDirection::ToDevice ? *to_device : *to_host;
}

void copy_host_to_device(Operation& operation, Stream& stream, void* device_destination, const void* host_source,
                         std::size_t bytes, CopyBy by) {
  if (bytes == 0) return;
  forget_pageable_history(stream, host_source, bytes);
  // Captured, a copy is a graph node that reads the host memory at every replay: no staging.
  if (!wants_staging(host_source, bytes) || Capture::of(stream)) {
    operation.reads(host_source, bytes);
    stream.copy_async(operation, device_destination, host_source, bytes, by);
    return;
  }
  // Staged: the host bytes are copied to the staging ring before this returns; the stream's access is the
  // device side. What the DMAs still queued use must outlive them.
  queue(operation, stream, [&](StreamHandle) {
    staged_to_device(stream, static_cast<char*>(device_destination), static_cast<const char*>(host_source), bytes);
  });
}

void copy_host_to_device_batch(Operation& operation, Stream& stream, const std::vector<HostToDevice>& copies) {
  const bool captured = Capture::of(stream) != nullptr;
  MemoryBackend& memory = backend().memory();
  std::vector<BatchedCopy> batched;
  std::vector<const HostToDevice*> staged;
  for (const HostToDevice& copy : copies) {
    if (copy.bytes == 0) continue;
    forget_pageable_history(stream, copy.host_source, copy.bytes);
    const bool pinned = memory.is_pinned(copy.host_source);
    if (!pinned && copy.bytes >= kStagedCopyThreshold && !captured) {
      staged.push_back(&copy);
      continue;
    }
    operation.reads(copy.host_source, copy.bytes);
    batched.push_back(BatchedCopy{copy.device_destination, copy.host_source, copy.bytes, !pinned});
  }
  if (batched.empty() && staged.empty()) return;
  queue(operation, stream, [&](StreamHandle handle) {
    // Another library's capture of this stream refuses a batch too.
    const bool one_by_one = batched.size() < 2 || captured || handle == backend().streams().legacy_default_stream() ||
                            backend().capture().capture_state(handle).status != CaptureState::Status::None;
    if (one_by_one) {
      for (const BatchedCopy& copy : batched) memory.copy_async(copy.destination, copy.source, copy.bytes, handle);
    } else {
      memory.copy_batch(batched, handle);
    }
    for (const HostToDevice* copy : staged) {
      staged_to_device(stream, static_cast<char*>(copy->device_destination),
                       static_cast<const char*>(copy->host_source), copy->bytes);
    }
  });
}

void copy_device_to_host(Operation& operation, Stream& stream, void* host_destination, const void* device_source,
                         std::size_t bytes, CopyBy by) {
  if (bytes == 0) return;
  const bool captured = Capture::of(stream) != nullptr;
  const bool pinned = captured || backend().memory().is_pinned(host_destination);
  const bool staged = !pinned && bytes >= kStagedCopyThreshold;
  forget_pageable_history(stream, host_destination, bytes);
  if (!staged) {
    if (!pinned) {
      // A copy into pageable memory returns only once it is done, and that wait cannot be interrupted:
      // wait for the work queued before it first, interruptibly (Note [Interruptible waits]).
      const StreamHandle handle = stream.handle();
      StreamBackend& streams = backend().streams();
      on_device_of(stream, [&] {
        wait_interruptibly([&](const WaitSlice& slice) { return streams.synchronize_stream_for(handle, slice); });
      });
    }
    operation.writes(host_destination, bytes);
    stream.copy_async(operation, host_destination, device_source, bytes, by);
    return;
  }
  // Complete on return: the host bytes are written when this returns.
  queue(operation, stream, [&](StreamHandle) {
    staged_to_host(stream, static_cast<char*>(host_destination), static_cast<const char*>(device_source), bytes);
  });
}

}  // namespace cuweave
