// Releases behind a pause: when they run, and on which thread (Note [Releases behind a pause]).
#include "cuweave/paused_streams.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "gate.hpp"

namespace cuweave {
namespace {

using testing::eventually;

// A release that reports whether `asker_done` was set while it ran, and on which thread it ran. Run inside the
// call that freed it up, on the asking thread, it could never see the flag the asker sets after that call.
struct ReportingRelease {
  std::atomic<bool> asker_done{false};
  std::promise<std::thread::id> ran_on;
  std::atomic<bool> saw_asker_done{false};

  std::function<void()> release() {
    return [this] {
      saw_asker_done = eventually([this] { return asker_done.load(); });
      ran_on.set_value(std::this_thread::get_id());
    };
  }
};

TEST(PausedStreamsTest, TheLastPauseEndingRunsTheDeferredReleasesBeforeItReturns) {
  bool ran = false;
  paused_streams::add();
  paused_streams::release_when_none([&] { ran = true; });
  EXPECT_FALSE(ran);  // a pause is pending
  paused_streams::remove();
  EXPECT_TRUE(ran);
}

TEST(PausedStreamsTest, AReleaseAskedForOnAThreadThatHandsThemOffRunsOnAnotherThread) {
  ReportingRelease reporting;
  std::future<std::thread::id> ran_on = reporting.ran_on.get_future();
  std::thread::id asker_id;
  std::thread asker([&] {
    asker_id = std::this_thread::get_id();
    paused_streams::hand_releases_off_this_thread();
    paused_streams::release_when_none(reporting.release());  // no pause pending: due now
    reporting.asker_done = true;
  });
  asker.join();
  ASSERT_EQ(ran_on.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_NE(ran_on.get(), asker_id);
  EXPECT_TRUE(reporting.saw_asker_done.load());
}

TEST(PausedStreamsTest, AThreadThatHandsReleasesOffRunsNoneAsItEndsTheLastPause) {
  // The host-callback thread's case: an ordered callback's pause ends there while a release waits for it.
  ReportingRelease reporting;
  std::future<std::thread::id> ran_on = reporting.ran_on.get_future();
  paused_streams::add();
  paused_streams::release_when_none(reporting.release());
  EXPECT_EQ(ran_on.wait_for(std::chrono::seconds(0)), std::future_status::timeout);  // behind the pause
  std::thread::id ender_id;
  std::thread ender([&] {
    ender_id = std::this_thread::get_id();
    paused_streams::hand_releases_off_this_thread();
    paused_streams::remove();
    reporting.asker_done = true;
  });
  ender.join();
  ASSERT_EQ(ran_on.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  const std::thread::id ran = ran_on.get();
  EXPECT_NE(ran, ender_id);
  EXPECT_NE(ran, std::this_thread::get_id());
  EXPECT_TRUE(reporting.saw_asker_done.load());
}

TEST(PausedStreamsTest, ShutdownWaitsForAReleaseHandedOverThenRunsReleasesWhereTheyAreFreedUp) {
  std::atomic<bool> go{false};
  std::atomic<bool> ran{false};
  std::thread asker([&] {
    paused_streams::hand_releases_off_this_thread();
    paused_streams::release_when_none([&] {
      EXPECT_TRUE(eventually([&] { return go.load(); }));
      ran = true;
    });
  });
  asker.join();
  std::future<void> shutdown =
      std::async(std::launch::async, [] { paused_streams::shutdown(std::chrono::seconds(60)); });
  EXPECT_TRUE(testing::still_waiting(shutdown));  // the release handed over has not run: it waits for `go`
  go = true;
  shutdown.get();
  EXPECT_TRUE(ran.load());
  // From now on a thread that hands releases off runs them itself: no thread runs them after the exit.
  std::thread::id ran_on;
  std::thread late([&] {
    paused_streams::hand_releases_off_this_thread();
    paused_streams::release_when_none([&] { ran_on = std::this_thread::get_id(); });
    EXPECT_EQ(ran_on, std::this_thread::get_id());
  });
  late.join();
}

}  // namespace
}  // namespace cuweave
