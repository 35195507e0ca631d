#include "cuweave/collective_watchdog.hpp"

#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "cuweave/communicator.hpp"
#include "cuweave/paused_streams.hpp"

namespace cuweave {

namespace {
// Asynchronous errors are asked for this often; deadlines wake it on time.
constexpr auto kPoll = std::chrono::milliseconds(50);
}  // namespace

void CollectiveWatchdog::watch(const std::shared_ptr<Communicator>& communicator) {
  std::lock_guard<std::mutex> lock(mutex_);
  watched_[communicator.get()] = communicator;
  if (!started_) {
    paused_streams::start_releaser();
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
  // A communicator whose last reference dies here (the watchdog locked it) has its NCCL destroy run on the
  // releaser: that destroy may wait for the device's queued work, perhaps a collective of another communicator
  // that only this thread can time out (Note [Releases behind a pause]).
  paused_streams::hand_releases_off_this_thread();
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
    }
    std::vector<std::shared_ptr<Communicator>> asked;  // let go with the lock free: a last reference destroys
    lock.lock();
    // A communicator that was idle in this round may have queued a collective since: it stays.
    for (const Communicator* key : idle) {
      auto it = watched_.find(key);
      if (it == watched_.end()) continue;
      std::shared_ptr<Communicator> communicator = it->second.lock();
      if (!communicator || !communicator->watching()) watched_.erase(it);
      if (communicator) asked.push_back(std::move(communicator));
    }
    if (!asked.empty()) {
      lock.unlock();
      asked.clear();
      lock.lock();
    }
    changed_.wait_until(lock, wake);
  }
}

}  // namespace cuweave
