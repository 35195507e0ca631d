#include "cuweave/lifetime_tracker.hpp"

#include <algorithm>
#include <iterator>
#include <vector>

#include "cuweave/capture.hpp"
#include "cuweave/event_pool.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"

namespace cuweave {

void LifetimeTracker::hold_until_complete(Stream& stream, Holds holds) {
  if (Capture::any_active()) {
    // Captured work runs at replays: what it uses lives as long as the graph (Note [Capture and lifetimes]).
    if (std::shared_ptr<Capture> capture = Capture::of(stream)) {
      capture->keep(std::move(holds));
      return;
    }
  }
  const int device = stream.device();
  EventHandle event = nullptr;
  try {
    event = stream.record_pooled_unobserved(events_);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    stranded_.insert(stranded_.end(), std::make_move_iterator(holds.begin()), std::make_move_iterator(holds.end()));
    throw;
  }
  // Note [Releases the host saw complete]
  const std::uint64_t sanitizer_point = sanitizer::enabled() ? sanitizer::held_until_complete(stream) : 0;
  const Key key{device, stream.raw_handle()};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_[key].push_back(Entry{event, device, std::move(holds), true, ++entries_made_, sanitizer_point});
  }
  collect_queue(key);  // cheap: usually one query of the oldest entry
}

void LifetimeTracker::hold_until_event(EventHandle event, int device, Holds holds) {
  const Key key{device, event};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queues_[key].push_back(Entry{event, device, std::move(holds), false, ++entries_made_});
  }
  collect_queue(key);
}

std::size_t LifetimeTracker::collect_queue(const Key& key) {
  std::vector<std::pair<std::uint64_t, Holds>> released;  // destroyed after the lock is dropped
  std::size_t count = 0;
  while (true) {
    EventHandle front;
    std::uint64_t number;
    Holds owner;  // an event not from the pool: what keeps it alive while it is queried without the lock
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = queues_.find(key);
      if (it == queues_.end() || it->second.empty()) break;
      const Entry& entry = it->second.front();
      front = entry.event;
      number = entry.number;
      if (!entry.pooled) owner = entry.holds;
    }
    if (!streams_.event_complete(front)) break;
    if (after_poll_for_tests_) after_poll_for_tests_();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = queues_.find(key);
    // Not the entry polled (Note [An entry is released by a poll of its own recording]): poll again.
    if (it == queues_.end() || it->second.empty() || it->second.front().number != number) continue;
    Entry& entry = it->second.front();
    released.emplace_back(entry.sanitizer_point, std::move(entry.holds));
    if (entry.pooled) events_.release(entry.device, entry.event);
    it->second.pop_front();
    if (it->second.empty()) queues_.erase(it);
    ++count;
  }
  // Note [Releases the host saw complete]: before the Holds go (and free what they keep).
  for (const auto& entry : released) sanitizer::held_complete(entry.first);
  return count;
}

std::size_t LifetimeTracker::collect() {
  std::vector<Key> keys;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    keys.reserve(queues_.size());
    for (const auto& queue : queues_) keys.push_back(queue.first);
  }
  std::size_t count = 0;
  for (const Key& key : keys) count += collect_queue(key);
  return count;
}

void LifetimeTracker::wait_for_holders_of(const void* object) {
  while (true) {
    collect();
    EventHandle last_holder = nullptr;
    Holds owner;  // as in collect_queue
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& queue : queues_) {
        for (const Entry& entry : queue.second) {
          const bool holds = std::any_of(entry.holds.begin(), entry.holds.end(),
                                         [object](const Hold& hold) { return hold.get() == object; });
          if (holds) {
            last_holder = entry.event;
            owner = entry.pooled ? Holds{} : entry.holds;
          }
        }
        if (last_holder) break;
      }
    }
    if (!last_holder) return;
    // The event stays valid: a pooled one goes back to the pool, not away, and `owner` keeps any other. If
    // its entry was released meanwhile, a pooled event may be recorded again: this waits for that recording
    // too, then finds the object no longer held.
    streams_.synchronize_event(last_holder);
  }
}

std::size_t LifetimeTracker::stranded_holds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stranded_.size();
}

std::size_t LifetimeTracker::pending_entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t count = 0;
  for (const auto& queue : queues_) count += queue.second.size();
  return count;
}

}  // namespace cuweave
