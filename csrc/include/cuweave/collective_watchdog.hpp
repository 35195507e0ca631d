// The thread that watches communicators with collectives under way: their asynchronous errors and their
// deadlines (Note [Collective timeouts] in communicator.hpp).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace cuweave {

class Communicator;

class CollectiveWatchdog {
 public:
  CollectiveWatchdog() = default;
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Watches `communicator` until it has nothing unfinished; starts the thread at the first call. The thread
  // runs until the process ends, so the watchdog must live as long (services.hpp keeps it).
  void watch(const std::shared_ptr<Communicator>& communicator);
  // The watched communicators still alive.
  std::vector<std::shared_ptr<Communicator>> watched();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<const Communicator*, std::weak_ptr<Communicator>> watched_;  // LOCK: mutex_
  bool started_ = false;                                                 // LOCK: mutex_
};

}  // namespace cuweave
