// Releases behind a pause: when they run, and on which thread (Note [Releases behind a pause]).
#include "cuweave/paused_streams.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "cuweave/device_array.hpp"
#include "cuweave/graph.hpp"
#include "cuweave/host_callbacks.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
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

TEST(PausedStreamsTest, AReleaseThatWaitsForTheDeviceHoldsUpNoHostCallbackAfterThePauseThatDeferredIt) {
  // End to end on the host-callback thread: an ordered callback's pause keeps a graph executable's release
  // deferred. Its destroy waits for the device's queued work, as cudaGraphExecDestroy does, and a gate keeps
  // such work queued: the callback launched after the pause ends must run all the same.
  HostCallbacks& callbacks = services().host_callbacks();
  auto ordered_stream = testing::independent_stream();
  auto gated_stream = testing::independent_stream();
  auto other_stream = testing::independent_stream();
  std::atomic<bool> let_ordered_return{false};
  callbacks.launch(
      ordered_stream, [&] { EXPECT_TRUE(eventually([&] { return let_ordered_return.load(); })); }, "ordered",
      /*ordered=*/true);
  {
    // A memset node: a host node's run would queue behind the ordered callback on the one callback thread.
    auto bytes = DeviceArray::allocate({64}, DType::from_typestr("|u1"), other_stream);
    auto graph = Graph::create(0);
    graph->add_memset({}, bytes->data(), 7, 64, {bytes->memory_hold()});
    graph->launch(other_stream);
  }
  // The replay has completed and the tracker lets go of the executable: its release is asked for here.
  other_stream->synchronize();
  ASSERT_TRUE(paused_streams::any());
  std::atomic<bool> released{false};
  paused_streams::release_when_none([&] { released = true; });  // runs after the executable's, in order
  std::atomic<bool> next_ran{false};
  {
    testing::Gate gate(*gated_stream);
    let_ordered_return = true;  // the pause ends on the callback thread: the deferred releases are due
    callbacks.launch(other_stream, [&] { next_ran = true; });
    EXPECT_TRUE(eventually([&] { return next_ran.load(); }));
    EXPECT_FALSE(released.load());  // the executable's destroy still waits for the gated stream
  }  // the gate opens
  EXPECT_TRUE(eventually([&] { return released.load(); }));
  ordered_stream->synchronize();
  callbacks.wait_for_all();
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
