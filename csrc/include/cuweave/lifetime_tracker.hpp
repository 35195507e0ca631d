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
//
// When the event cannot be recorded (the context is lost: every call fails), the operation is queued already and
// may still run, or be running, yet no event will ever say it finished. Its Holds are then kept for the rest of
// the process, never released: memory freed under a copy engine's transfer is another allocation's bytes, or the
// heap's own bookkeeping, overwritten.
//
// Note [An entry is released by a poll of its own recording]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A poll reads the front entry under the mutex, queries its event without it (a driver call), and takes the
// mutex again to release the entry. Meanwhile another thread may have released that entry already, given its
// event back to the EventPool, and taken the same event (the pool hands out the one given back last) for a new
// entry of the same stream, recorded after newer work. When that new entry reaches the front, its event is the
// one the first poll found complete, but its recording is a later one, perhaps still pending: released by the
// stale answer, its Holds would go while the device still uses them (a pinned block freed or a registration
// ended under a copy engine's transfer). So each entry has a number of its own, and a poll releases only the
// entry it queried. An event that is not the pool's (hold_until_event: a closed stream's last event) goes
// with its owner, which the entry's Holds keep: once another thread released the entry, the owner could
// destroy the event under the query, so the poll keeps a copy of those Holds while it queries.
//
// Note [Releases the host saw complete]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A release here may free memory at once, or let Python free it later, queued on the memory's own stream: a
// graph's temporaries, let go with the graph right after a replay on another stream. The poll found the replay
// complete before, which orders every later free after it, but the stream-race sanitizer sees neither the
// tracker's event nor its poll (cuweave's bookkeeping, not the program's orderings) and would report a use after
// free. So under the sanitizer each entry names the point of its stream it waits for, and once a poll finds it
// complete every later free follows that point. The program's other work does not: the poll orders nothing the
// user wrote, and a race in it is still reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/hold.hpp"

namespace cuweave {

class EventPool;
class Stream;

class LifetimeTracker {
 public:
  // Queries `streams`' events, and records its own from `events`, which it gives them back to.
  LifetimeTracker(StreamBackend& streams, EventPool& events) : streams_(streams), events_(events) {}
  LifetimeTracker(const LifetimeTracker&) = delete;
  LifetimeTracker& operator=(const LifetimeTracker&) = delete;

  // Keeps `holds` alive until all work queued on `stream` so far has completed; for good when no event can be
  // recorded to say so (the error is rethrown).
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
  // Holds kept for good, their work's completion unknowable (no event could be recorded after it).
  std::size_t stranded_holds() const;

  // Tests only: runs after a poll found an entry's event complete and before it takes the mutex to release
  // the entry, where other threads may act (Note [An entry is released by a poll of its own recording]). Set
  // while no other thread uses the tracker; empty outside tests.
  void set_after_poll_for_tests(std::function<void()> hook) { after_poll_for_tests_ = std::move(hook); }

 private:
  struct Entry {
    EventHandle event;
    int device;
    Holds holds;
    bool pooled = true;  // the event came from the EventPool and goes back there
    std::uint64_t number = 0;  // this entry's own, never reused (its event may be)
    std::uint64_t sanitizer_point = 0;  // Note [Releases the host saw complete]; 0 outside the sanitizer
  };
  using Key = std::pair<int, StreamHandle>;

  std::size_t collect_queue(const Key& key);

  StreamBackend& streams_;
  EventPool& events_;
  mutable std::mutex mutex_;
  std::map<Key, std::deque<Entry>> queues_;  // LOCK: mutex_
  std::uint64_t entries_made_ = 0;           // LOCK: mutex_
  Holds stranded_;                           // LOCK: mutex_; never released
  std::function<void()> after_poll_for_tests_;
};

}  // namespace cuweave
