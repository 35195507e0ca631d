#include "cuweave/collective_watchdog.hpp"

#include <chrono>
#include <memory>
#include <thread>
#include <utility>

#include "cuweave/communicator.hpp"

namespace cuweave {

namespace {
// Asynchronous errors are asked for this often; deadlines wake it on time.
constexpr auto kPoll = std::chrono::milliseconds(50);

// Lets go of a communicator the watchdog locked. Were it the last owner, the communicator's NCCL destroy would run
// here, and that may wait for the device's queued work (Note [Releases behind a pause]), perhaps for a collective
// of another communicator that only this thread can time out: so the last reference goes on a thread of its own.
void let_go(std::shared_ptr<Communicator> communicator) noexcept {
  if (communicator.use_count() != 1) return;  // another owner remains (or came meanwhile: it destroys instead)
  try {
    std::thread([last = std::move(communicator)]() mutable { last.reset(); }).detach();
  } catch (...) {
    // No thread to be had: destroyed here, as before.
  }
}

bool unfinished(const std::weak_ptr<Communicator>& watched) {
  std::shared_ptr<Communicator> communicator = watched.lock();
  const bool watching = communicator && communicator->watching();
  let_go(std::move(communicator));
  return watching;
}
}  // namespace

void CollectiveWatchdog::watch(const std::shared_ptr<Communicator>& communicator) {
  std::lock_guard<std::mutex> lock(mutex_);
  watched_[communicator.get()] = communicator;
  if (!started_) {
    std::thread([this] { run(); }).detach();
    started_ = true;
  }
  changed_.notify_all();
}

std::vector<std::shared_ptr<Communicator>> CollectiveWatchdog::watched() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<Communicator>> alive;
  for (const auto& [key, communicator] : watched_) {
    if (auto kept = communicator.lock()) alive.push_back(std::move(kept));
  }
  return alive;
}

void CollectiveWatchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (watched_.empty()) {
      changed_.wait(lock);
      continue;
    }
    std::vector<std::pair<const Communicator*, std::weak_ptr<Communicator>>> round(watched_.begin(), watched_.end());
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    auto wake = now + kPoll;
    std::vector<const Communicator*> idle;
    for (const auto& [key, weak] : round) {
      std::shared_ptr<Communicator> communicator = weak.lock();
      if (!communicator || !communicator->check_progress(now, wake)) idle.push_back(key);
      let_go(std::move(communicator));
    }
    lock.lock();
    // A communicator that was idle in this round may have queued a collective since: it stays.
    for (const Communicator* key : idle) {
      auto it = watched_.find(key);
      if (it != watched_.end() && !unfinished(it->second)) watched_.erase(it);
    }
    changed_.wait_until(lock, wake);
  }
}

}  // namespace cuweave
