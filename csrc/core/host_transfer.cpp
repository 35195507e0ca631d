#include "cuweave/host_transfer.hpp"

#include <algorithm>
#include <deque>
#include <optional>

#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/default_stream_scope.hpp"
#include "cuweave/host_copy_threads.hpp"
#include "cuweave/interruptible_wait.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/staging_ring.hpp"
#include "cuweave/stream.hpp"

namespace cuweave {

namespace {

bool wants_staging(const void* host, std::size_t bytes) {
  return bytes >= kStagedCopyThreshold && !backend().is_pinned(host);
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
// Staged copies reach the device through the staging ring, so the stream's access is reported here.
void tell_sanitizer(Stream& stream, const void* host, const void* device, std::size_t bytes, bool to_device,
                    bool staged) {
  if (!sanitizer::enabled() || Capture::of(stream)) return;
  if (!backend().is_pinned(host)) sanitizer::allocated(host, bytes);
  if (staged) {
    sanitizer::operation(stream, "copy",
                         {to_device ? sanitizer::writes(device, bytes) : sanitizer::reads(device, bytes)});
  }
}

// A chunk on its way: its slot, and the host copy into it (Note [Copies that overlap in the pool]).
struct ChunkInCopy {
  ChunkInCopy(StagingRing& ring, StagingSlot* taken, std::size_t offset, std::size_t bytes)
      : slot(ring, taken), offset(offset), bytes(bytes) {}
  SlotGuard slot;  // declared first, released last: the copy's pieces write into it until it is finished
  std::size_t offset;
  std::size_t bytes;
  HostCopyThreads::Copy copy;
};

// Two chunks in the copy threads at a time: the next chunk's pieces are queued before this chunk's DMA is,
// so the threads done with this chunk go on with the next one (on unwinding, ~Copy waits for the pieces).
void staged_to_device(Stream& stream, char* destination, const char* source, std::size_t bytes) {
  StagingRing& ring = StagingRing::for_device(stream.device());
  HostCopyThreads& threads = HostCopyThreads::instance();
  std::deque<ChunkInCopy> chunks;  // a deque keeps its elements in place, as their queued pieces need
  auto send_oldest = [&] {
    ChunkInCopy& chunk = chunks.front();
    threads.finish(chunk.copy);
    backend().copy_async(destination + chunk.offset, chunk.slot.get()->data, chunk.bytes, stream.handle());
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
    threads.start(chunk.copy, chunk.slot.get()->data, source + offset, n, /*streaming=*/true);
    if (chunks.size() == 2) send_oldest();
  }
  while (!chunks.empty()) send_oldest();
}

void staged_to_host(Stream& stream, char* destination, const char* source, std::size_t bytes) {
  StagingRing& ring = StagingRing::for_device(stream.device());
  HostCopyThreads& threads = HostCopyThreads::instance();
  struct InFlight {
    std::size_t offset;
    std::size_t bytes;
  };
  // Two slots at a time: the engine fills one while host threads drain the previous one.
  std::optional<SlotGuard> previous_slot;
  InFlight previous{0, 0};
  auto drain = [&](SlotGuard& slot, const InFlight& chunk) {
    ring.wait(slot.get());
    threads.copy(destination + chunk.offset, slot.get()->data, chunk.bytes, /*streaming=*/false);
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
    backend().copy_async(slot.get()->data, source + offset, n, stream.handle());
    ring.record(slot.get(), stream);
    if (previous_slot) drain(*previous_slot, previous);
    previous_slot.emplace(ring, slot.release());
    previous = InFlight{offset, n};
  }
  if (previous_slot) drain(*previous_slot, previous);
}

}  // namespace

void copy_host_to_device(Stream& stream, void* device_destination, const void* host_source, std::size_t bytes,
                         Holds holds, CopyBy by) {
  if (bytes == 0) return;
  // Captured, a copy is a graph node that reads the host memory at every replay: no staging.
  if (!wants_staging(host_source, bytes) || Capture::of(stream)) {
    tell_sanitizer(stream, host_source, device_destination, bytes, true, false);
    stream.copy_async(device_destination, host_source, bytes, std::move(holds), by);
    return;
  }
  tell_sanitizer(stream, host_source, device_destination, bytes, true, true);
  staged_to_device(stream, static_cast<char*>(device_destination), static_cast<const char*>(host_source), bytes);
  // The host data is staged; what the DMAs still queued use must outlive them.
  stream.hold(std::move(holds));
}

void copy_device_to_host(Stream& stream, void* host_destination, const void* device_source, std::size_t bytes,
                         Holds holds, CopyBy by) {
  if (bytes == 0) return;
  if (Capture::of(stream)) {
    stream.copy_async(host_destination, device_source, bytes, std::move(holds), by);
    return;
  }
  const bool pinned = backend().is_pinned(host_destination);
  const bool staged = !pinned && bytes >= kStagedCopyThreshold;
  tell_sanitizer(stream, host_destination, device_source, bytes, false, staged);
  if (!staged) {
    if (!pinned) {
      // A copy into pageable memory returns only once it is done, and that wait cannot be interrupted:
      // wait for the work queued before it first, interruptibly (Note [Interruptible waits]).
      const StreamHandle handle = stream.handle();
      const DefaultStreamScope on_device(stream);
      wait_interruptibly([&](const WaitSlice& slice) { return backend().synchronize_stream_for(handle, slice); });
    }
    stream.copy_async(host_destination, device_source, bytes, std::move(holds), by);
    return;
  }
  staged_to_host(stream, static_cast<char*>(host_destination), static_cast<const char*>(device_source), bytes);
  // Complete on return: nothing is left to keep alive.
}

}  // namespace cuweave
