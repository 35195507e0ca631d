// Note [Stream-ordered lifetimes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Python may drop its last reference to a device array, a pinned block or a callable while work queued
// on a stream still reads or writes it. Every stream-ordered operation therefore hands the tracker the
// Holds of what it touches; the tracker records an event on the stream right after the operation and
// keeps the Holds until that event has completed. Freeing is then ordinary reference counting: the
// last Hold to go returns the memory, and by then no queued work uses it.
//
// Events on one stream complete in order, so each stream's entries form a FIFO and collect() only ever
// looks at the front. Completion is polled (a cheap query), never waited for with a device-wide
// synchronize: on every new entry for that stream, when a pool misses, and after synchronizations.
// Holds are destroyed outside the tracker's mutex, because a Hold may re-enter Python or a pool.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <utility>

#include "cuweave/backend.hpp"
#include "cuweave/hold.hpp"

namespace cuweave {

class Stream;

class LifetimeTracker {
 public:
  static LifetimeTracker& instance();

  // Keeps `holds` alive until all work queued on `stream` so far has completed.
  void hold_until_complete(Stream& stream, Holds holds);
  // Keeps `holds` alive until `event` (recorded, not the tracker's) has completed; `holds` must keep the
  // event's owner alive. For work queued on a closed stream (Stream::closing_event), where no event can be
  // recorded any more.
  void hold_until_event(EventHandle event, int device, Holds holds);
  // Releases the Holds of every completed entry; returns how many entries completed.
  std::size_t collect();
  // Blocks until no pending entry holds `object` (compared by address). Callers release the GIL.
  void wait_for_holders_of(const void* object);
  std::size_t pending_entries() const;

 private:
  struct Entry {
    EventHandle event;
    int device;
    Holds holds;
    bool pooled = true;  // the event came from the EventPool and goes back there
  };
  using Key = std::pair<int, StreamHandle>;

  std::size_t collect_queue(const Key& key);

  mutable std::mutex mutex_;
  std::map<Key, std::deque<Entry>> queues_;  // LOCK: mutex_
};

}  // namespace cuweave
