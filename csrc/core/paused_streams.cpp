// The count of pending host pauses (Note [Enqueueing behind a paused stream] in paused_streams.hpp).
#include "cuweave/paused_streams.hpp"

#include <atomic>
#include <deque>
#include <mutex>
#include <utility>

namespace cuweave::paused_streams {
namespace {
std::atomic<int> pending{0};

struct Deferred {
  std::mutex mutex;
  std::deque<std::function<void()>> releases;  // LOCK: mutex; in the order asked
};

Deferred& deferred() {
  static auto* d = new Deferred;  // leaked: releases may be asked for during static destruction
  return *d;
}

// Runs the deferred releases while no pause is pending; a pause begun meanwhile keeps the rest deferred
// until it ends.
void run_deferred() noexcept {
  Deferred& d = deferred();
  while (true) {
    std::function<void()> release;
    {
      std::lock_guard<std::mutex> lock(d.mutex);
      if (d.releases.empty() || any()) return;
      release = std::move(d.releases.front());
      d.releases.pop_front();
    }
    release();
  }
}
}  // namespace

void add() noexcept { pending.fetch_add(1, std::memory_order_acq_rel); }

void remove() noexcept {
  if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) run_deferred();
}

bool any() noexcept { return pending.load(std::memory_order_relaxed) > 0; }

void release_when_none(std::function<void()> release) noexcept {
  if (!any()) {
    release();
    return;
  }
  Deferred& d = deferred();
  try {
    std::lock_guard<std::mutex> lock(d.mutex);
    d.releases.push_back(std::move(release));
  } catch (...) {
    release();  // out of memory: release now, as before pauses existed
    return;
  }
  run_deferred();  // the last pause may have ended between the check and the push
}

}  // namespace cuweave::paused_streams
