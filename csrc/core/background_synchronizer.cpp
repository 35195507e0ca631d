#include "cuweave/background_synchronizer.hpp"

#include <algorithm>
#include <iterator>
#include <thread>
#include <utility>

namespace cuweave {

BackgroundSynchronizer::BackgroundSynchronizer(std::function<int()> synchronize, std::function<void(int)> raise)
    : synchronize_(std::move(synchronize)), raise_(std::move(raise)) {}

bool BackgroundSynchronizer::wait(const WaitSlice& slice) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto answered = [&] { return finished_any_ && finished_began_ >= slice.began; };
  if (!answered()) {
    if (!(running_ && running_began_ >= slice.began)) {
      want_ = true;
      start_locked();
      changed_.notify_all();
    }
    if (!changed_.wait_until(lock, slice.until, answered)) return false;
  }
  if (finished_error_ != 0) raise_(finished_error_);
  return true;
}

void BackgroundSynchronizer::after_next_synchronization(std::function<void()> action) {
  std::lock_guard<std::mutex> lock(mutex_);
  deferred_.push_back(Deferred{Clock::now(), std::move(action)});
}

std::uint64_t BackgroundSynchronizer::begun() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return begun_;
}

void BackgroundSynchronizer::start_locked() {
  if (started_) return;
  std::thread([this] { run(); }).detach();
  started_ = true;
}

void BackgroundSynchronizer::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [this] { return want_; });
    want_ = false;
    const Clock::time_point began = Clock::now();
    running_ = true;
    running_began_ = began;
    ++begun_;
    lock.unlock();
    const int error = synchronize_();
    lock.lock();
    running_ = false;
    finished_began_ = began;
    finished_any_ = true;
    finished_error_ = error;
    changed_.notify_all();
    // Actions asked for before this call began: the work queued before them has completed.
    std::vector<Deferred> due;
    auto first_not_due = std::stable_partition(deferred_.begin(), deferred_.end(),
                                               [began](const Deferred& d) { return d.asked < began; });
    due.assign(std::make_move_iterator(deferred_.begin()), std::make_move_iterator(first_not_due));
    deferred_.erase(deferred_.begin(), first_not_due);
    if (!due.empty()) {
      lock.unlock();
      for (Deferred& d : due) d.action();
      lock.lock();
    }
  }
}

}  // namespace cuweave
