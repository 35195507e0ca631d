// The count of pending host pauses (Note [Enqueueing behind a paused stream] in paused_streams.hpp).
#include "cuweave/paused_streams.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace cuweave::paused_streams {
namespace {
std::atomic<int> pending{0};
thread_local bool hands_off = false;

struct Deferred {
  std::mutex mutex;
  std::deque<std::function<void()>> releases;  // LOCK: mutex; in the order asked
  std::condition_variable wake;                // the releaser's
  std::condition_variable idle;                // shutdown()'s
  bool releaser_asked = false;                 // LOCK: mutex
  bool releaser_started = false;               // LOCK: mutex
  bool releaser_busy = false;                  // LOCK: mutex
  bool stopping = false;                       // LOCK: mutex
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

[[noreturn]] void run_releaser() {
  Deferred& d = deferred();
  while (true) {
    {
      std::unique_lock<std::mutex> lock(d.mutex);
      if (!d.releaser_asked) {
        d.releaser_busy = false;
        d.idle.notify_all();
      }
      d.wake.wait(lock, [&] { return d.releaser_asked; });
      d.releaser_asked = false;
      d.releaser_busy = true;
    }
    run_deferred();
  }
}

// Starts the releaser thread once (detached, as the host-callback thread is: shutdown() lets a release under
// way end first, for a while). False where no thread can be started. LOCK: d.mutex.
bool releaser_started_locked(Deferred& d) noexcept {
  if (!d.releaser_started) {
    try {
      std::thread(run_releaser).detach();
      d.releaser_started = true;
    } catch (...) {
      return false;
    }
  }
  return true;
}

// What run_deferred() does, on the releaser thread; here once shutdown() began (no callback runs any more), or
// where no thread can be started: as before the releaser existed.
void run_deferred_on_releaser() noexcept {
  Deferred& d = deferred();
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    if (!d.stopping && releaser_started_locked(d)) {
      d.releaser_asked = true;
      d.releaser_busy = true;  // until it has looked: shutdown() waits for what was handed over
      d.wake.notify_one();
      return;
    }
  }
  run_deferred();
}

void run_deferred_where_due() noexcept {
  if (hands_off) {
    run_deferred_on_releaser();
  } else {
    run_deferred();
  }
}
}  // namespace

void add() noexcept { pending.fetch_add(1, std::memory_order_acq_rel); }

void remove() noexcept {
  if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) run_deferred_where_due();
}

bool any() noexcept { return pending.load(std::memory_order_relaxed) > 0; }

void release_when_none(std::function<void()> release) noexcept {
  if (!any() && !hands_off) {
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
  run_deferred_where_due();  // the last pause may have ended between the check and the push
}

void start_releaser() noexcept {
  Deferred& d = deferred();
  std::lock_guard<std::mutex> lock(d.mutex);
  releaser_started_locked(d);
}

void hand_releases_off_this_thread() noexcept { hands_off = true; }

void shutdown(std::chrono::milliseconds grace) noexcept {
  Deferred& d = deferred();
  std::unique_lock<std::mutex> lock(d.mutex);
  d.stopping = true;
  d.idle.wait_for(lock, grace, [&] { return !d.releaser_busy; });
}

}  // namespace cuweave::paused_streams
