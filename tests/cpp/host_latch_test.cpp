// HostLatch: paused streams run their later work only after the release (Note [Host latches]).
#include "cuweave/host_latch.hpp"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/paused_streams.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using testing::independent_stream;

// Queues a host function on `stream` that counts its run in `runs`.
void count_on(Stream& stream, std::atomic<int>& runs) {
  backend().streams().launch_host_function(
      stream.handle(), [](void* runs) { static_cast<std::atomic<int>*>(runs)->fetch_add(1); }, &runs);
}

TEST(HostLatchTest, PausedWorkRunsOnlyAfterTheRelease) {
  std::shared_ptr<Stream> stream = independent_stream();
  std::atomic<int> runs{0};
  HostLatch latch;
  latch.pause(stream);
  count_on(*stream, runs);
  // Nothing but the latch can let the function run, however long this thread looks.
  for (int i = 0; i < 1000; ++i) std::this_thread::yield();
  EXPECT_FALSE(stream->idle());
  EXPECT_EQ(runs.load(), 0);
  latch.release();
  stream->synchronize();
  EXPECT_EQ(runs.load(), 1);
  EXPECT_TRUE(latch.released());
  EXPECT_EQ(latch.pauses(), 1);
}

TEST(HostLatchTest, OneLatchPausesSeveralStreamsAndLeavesOthersAlone) {
  std::shared_ptr<Stream> a = independent_stream();
  std::shared_ptr<Stream> b = independent_stream();
  std::shared_ptr<Stream> free_stream = independent_stream();
  std::atomic<int> paused_runs{0};
  std::atomic<int> free_runs{0};
  HostLatch latch;
  latch.pause(a);
  latch.pause(b);
  count_on(*a, paused_runs);
  count_on(*b, paused_runs);
  count_on(*free_stream, free_runs);
  free_stream->synchronize();  // not paused: completes while the others wait
  EXPECT_EQ(free_runs.load(), 1);
  EXPECT_EQ(paused_runs.load(), 0);
  latch.release();
  a->synchronize();
  b->synchronize();
  EXPECT_EQ(paused_runs.load(), 2);
}

TEST(HostLatchTest, AReleasedLatchPausesNothing) {
  std::shared_ptr<Stream> stream = independent_stream();
  std::atomic<int> runs{0};
  HostLatch latch;
  latch.release();
  latch.release();  // idempotent
  latch.pause(stream);
  count_on(*stream, runs);
  stream->synchronize();
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(latch.pauses(), 0);
}

TEST(HostLatchTest, ALatchDestroyedUnreleasedLetsItsStreamsGo) {
  std::shared_ptr<Stream> stream = independent_stream();
  std::atomic<int> runs{0};
  {
    HostLatch latch;
    latch.pause(stream);
    count_on(*stream, runs);
    EXPECT_EQ(runs.load(), 0);
  }
  stream->synchronize();
  EXPECT_EQ(runs.load(), 1);
}

TEST(HostLatchTest, APausedStreamLivesUntilTheRelease) {
  std::atomic<int> runs{0};
  HostLatch latch;
  std::weak_ptr<Stream> watch;
  {
    std::shared_ptr<Stream> stream = independent_stream();
    watch = stream;
    latch.pause(stream);
    count_on(*stream, runs);
  }
  EXPECT_FALSE(watch.expired()) << "the latch must keep the stream it pauses";
  std::shared_ptr<Stream> stream = watch.lock();
  stream.reset();
  latch.release();
  EXPECT_TRUE(watch.expired()) << "the release lets the stream go";
  backend().devices().synchronize_device(0);
  EXPECT_EQ(runs.load(), 1);
}

TEST(HostLatchTest, PausesRacingWithTheReleaseNeverWaitForever) {
  // A pause reads the flag's value when it queues its wait; were that read not ordered with the release, a
  // pause could wait for a second raise that never comes. Each round races four pausing threads with a release.
  for (int round = 0; round < 50; ++round) {
    std::vector<std::shared_ptr<Stream>> streams;
    for (int i = 0; i < 4; ++i) streams.push_back(independent_stream());
    auto latch = std::make_shared<HostLatch>();
    std::vector<std::thread> pausing;
    for (auto& stream : streams) pausing.emplace_back([&latch, stream] { latch->pause(stream); });
    latch->release();
    for (auto& thread : pausing) thread.join();
    for (auto& stream : streams) stream->synchronize();  // ctest's timeout turns a stuck pause into a failure
  }
}

// Note [Releases behind a pause]: a release that may wait for the device runs at once with no pause
// pending, and waits for the last pause's end otherwise, in the order asked.
TEST(HostLatchTest, ReleasesAskedForWhilePausedRunWhenTheLastPauseEnds) {
  std::vector<int> order;
  paused_streams::release_when_none([&order] { order.push_back(0); });
  EXPECT_EQ(order, std::vector<int>{0});

  std::shared_ptr<Stream> first = independent_stream();
  std::shared_ptr<Stream> second = independent_stream();
  HostLatch outer;
  HostLatch inner;
  outer.pause(first);
  inner.pause(second);
  paused_streams::release_when_none([&order] { order.push_back(1); });
  paused_streams::release_when_none([&order] { order.push_back(2); });
  inner.release();
  EXPECT_EQ(order, std::vector<int>{0}) << "ran while a pause was still pending";
  outer.release();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  first->synchronize();
  second->synchronize();
}

}  // namespace
}  // namespace cuweave
