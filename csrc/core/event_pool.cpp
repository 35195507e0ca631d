#include "cuweave/event_pool.hpp"

namespace cuweave {

EventHandle EventPool::acquire(int device) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& free = free_[device];
    if (!free.empty()) {
      EventHandle event = free.back();
      free.pop_back();
      return event;
    }
  }
  return streams_.create_event(device, kEventDefault);
}

void EventPool::release(int device, EventHandle event) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[device].push_back(event);
  } catch (...) {
    streams_.destroy_event(event);
  }
}

}  // namespace cuweave
