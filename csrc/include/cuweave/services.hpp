// The core's services over one backend: the events it pools for its own bookkeeping, what keeps memory alive
// until queued work completes, the pinned host memory it caches, the thread that runs host callbacks, the
// threads that copy host memory, and the thread that watches communicators.
//
// Note [One owner for the core's services]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each service is made over the backend facets and the other services it uses, handed to it, so a test builds
// one over a fake facet or a fresh pool (tests/cpp/event_pool_fake_streams_test.cpp), and the order in which they
// depend on each other is written once, here: the lifetime tracker gives its events back to the event pool, and
// the pinned pool collects completed lifetimes before it allocates. The process has one Services, over the
// backend it chose, made at first use and never destroyed: Holds and pinned blocks may be given back during
// interpreter exit, and the callback, copy and watchdog threads may outlive static destruction. The copy threads
// start when first asked for, so that a program that never splits a host copy never starts them.
#pragma once

#include <memory>
#include <mutex>

#include "cuweave/backend.hpp"
#include "cuweave/collective_watchdog.hpp"
#include "cuweave/event_pool.hpp"
#include "cuweave/host_callbacks.hpp"
#include "cuweave/host_copy_threads.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/pinned_pool.hpp"

namespace cuweave {

class Services {
 public:
  explicit Services(Backend& backend);
  Services(const Services&) = delete;
  Services& operator=(const Services&) = delete;

  EventPool& events() noexcept { return events_; }
  LifetimeTracker& lifetimes() noexcept { return lifetimes_; }
  PinnedPool& pinned() noexcept { return pinned_; }
  HostCallbacks& host_callbacks() noexcept { return host_callbacks_; }
  HostCopyThreads& copy_threads();
  CollectiveWatchdog& collective_watchdog() noexcept { return collective_watchdog_; }

 private:
  EventPool events_;
  LifetimeTracker lifetimes_;
  PinnedPool pinned_;
  HostCallbacks host_callbacks_;
  CollectiveWatchdog collective_watchdog_;
  std::once_flag copy_threads_made_;
  std::unique_ptr<HostCopyThreads> copy_threads_;
};

// The process's services, over backend() (Note [One owner for the core's services]).
Services& services();

}  // namespace cuweave
