// A cache of timing-free events for cuweave's own bookkeeping (lifetime tracking, stream-on-stream
// waits), so that those cost a record, not a create + destroy.
#pragma once

#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuweave/backend.hpp"

namespace cuweave {

class EventPool {
 public:
  // A pool of `streams`' events (a test's fake, or the backend's: Note [Backend facets]).
  explicit EventPool(StreamBackend& streams) : streams_(streams) {}
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  EventHandle acquire(int device);
  // The event may be re-recorded at once: waits already queued on it keep the state they captured.
  void release(int device, EventHandle event) noexcept;

 private:
  StreamBackend& streams_;
  std::mutex mutex_;
  std::unordered_map<int, std::vector<EventHandle>> free_;  // LOCK: mutex_
};

}  // namespace cuweave
