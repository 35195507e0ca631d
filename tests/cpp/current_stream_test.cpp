// The current stream: a per-thread stack that `with stream:` pushes and pops; empty, it means the legacy default
// stream of the current device.
#include "cuweave/current_stream.hpp"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/default_stream.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using testing::independent_stream;

class CurrentStreamTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(current_stream::depth(), 0u); }
  // A failed expectation must not leave entries behind for the next test on this thread.
  void TearDown() override {
    while (current_stream::depth() > 0) current_stream::pop(current_stream::get().get());
  }

  std::shared_ptr<Stream> a = independent_stream();
  std::shared_ptr<Stream> b = independent_stream();
  std::shared_ptr<Stream> c = independent_stream();
};

TEST_F(CurrentStreamTest, EmptyStackMeansTheLegacyDefaultStream) {
  const std::shared_ptr<Stream> current = current_stream::get();
  EXPECT_EQ(current, DefaultStream::legacy(0));
  EXPECT_TRUE(current->is_legacy_default());
}

TEST_F(CurrentStreamTest, EmptyStackFollowsTheCurrentDevice) {
  backend().devices().set_current_device(1);
  const std::shared_ptr<Stream> current = current_stream::get();
  backend().devices().set_current_device(0);
  EXPECT_EQ(current, DefaultStream::legacy(1));
  EXPECT_EQ(current->device(), 1);
}

// is() answers what comparing get() with the stream would, without get()'s reference: the weave asks it per operation.
TEST_F(CurrentStreamTest, IsAnswersAsComparingWithGetDoes) {
  const std::shared_ptr<Stream> legacy0 = DefaultStream::legacy(0);
  const std::shared_ptr<Stream> legacy1 = DefaultStream::legacy(1);
  const std::shared_ptr<Stream> per_thread0 = DefaultStream::per_thread(0);
  const std::vector<std::shared_ptr<Stream>> streams{legacy0, legacy1, per_thread0, a, b};
  auto agrees_with_get = [&](const char* where) {
    const std::shared_ptr<Stream> current = current_stream::get();
    for (const std::shared_ptr<Stream>& stream : streams) {
      EXPECT_EQ(current_stream::is(*stream), current == stream) << where << ", stream on device " << stream->device();
    }
  };
  agrees_with_get("nothing entered, device 0 current");
  EXPECT_TRUE(current_stream::is(*legacy0));
  backend().devices().set_current_device(1);
  agrees_with_get("nothing entered, device 1 current");
  EXPECT_TRUE(current_stream::is(*legacy1));
  backend().devices().set_current_device(0);
  current_stream::push(a);
  agrees_with_get("a entered");
  EXPECT_TRUE(current_stream::is(*a));
  current_stream::push(legacy1);
  agrees_with_get("device 1's legacy default stream entered while device 0 is current");
  EXPECT_TRUE(current_stream::is(*legacy1));
  EXPECT_FALSE(current_stream::is(*legacy0));
  current_stream::pop(legacy1.get());
  current_stream::pop(a.get());
  agrees_with_get("both left");
}

TEST_F(CurrentStreamTest, PushMakesAStreamCurrentAndPopRestoresThePreviousOne) {
  current_stream::push(a);
  EXPECT_EQ(current_stream::get(), a);
  current_stream::push(b);
  EXPECT_EQ(current_stream::get(), b);
  EXPECT_EQ(current_stream::depth(), 2u);

  EXPECT_TRUE(current_stream::pop(b.get()));
  EXPECT_EQ(current_stream::get(), a);
  EXPECT_TRUE(current_stream::pop(a.get()));
  EXPECT_EQ(current_stream::get(), DefaultStream::legacy(0));
  EXPECT_EQ(current_stream::depth(), 0u);
}

TEST_F(CurrentStreamTest, IsNamesTheInnermostEntryOnly) {
  current_stream::push(a);
  current_stream::push(b);
  EXPECT_TRUE(current_stream::is(*b));
  EXPECT_FALSE(current_stream::is(*a));
  EXPECT_FALSE(current_stream::is(*DefaultStream::legacy(0)));
  EXPECT_TRUE(current_stream::pop(b.get()));
  EXPECT_TRUE(current_stream::is(*a));
  EXPECT_FALSE(current_stream::is(*b));
}

TEST_F(CurrentStreamTest, PoppingAStreamThatIsNotOnTheStackChangesNothing) {
  current_stream::push(a);
  EXPECT_FALSE(current_stream::pop(b.get()));
  EXPECT_EQ(current_stream::depth(), 1u);
  EXPECT_EQ(current_stream::get(), a);
}

TEST_F(CurrentStreamTest, PopRemovesTheInnermostEntryOfThatStream) {
  current_stream::push(a);
  current_stream::push(b);
  current_stream::push(a);  // re-entered: `with a: with b: with a:`

  EXPECT_TRUE(current_stream::pop(a.get()));
  EXPECT_EQ(current_stream::get(), b);
  EXPECT_TRUE(current_stream::pop(b.get()));
  EXPECT_EQ(current_stream::get(), a);  // the outer entry stayed
  EXPECT_EQ(current_stream::depth(), 1u);
}

TEST_F(CurrentStreamTest, PoppingOutOfOrderLeavesTheOtherEntriesInPlace) {
  // Scopes that end out of order (a generator suspended inside `with`): the others keep their order.
  current_stream::push(a);
  current_stream::push(b);
  current_stream::push(c);

  EXPECT_TRUE(current_stream::pop(b.get()));
  EXPECT_EQ(current_stream::get(), c);
  EXPECT_TRUE(current_stream::pop(c.get()));
  EXPECT_EQ(current_stream::get(), a);
}

TEST_F(CurrentStreamTest, TheStackKeepsItsStreamsAlive) {
  auto stream = independent_stream();
  const Stream* const raw = stream.get();
  std::weak_ptr<Stream> watch = stream;
  current_stream::push(std::move(stream));
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(current_stream::get().get(), raw);

  EXPECT_TRUE(current_stream::pop(raw));
  EXPECT_TRUE(watch.expired());
}

TEST_F(CurrentStreamTest, EachThreadHasItsOwnStack) {
  current_stream::push(a);
  std::shared_ptr<Stream> other_thread_saw;
  std::size_t other_thread_depth = 0;
  std::shared_ptr<Stream> other_thread_top;
  std::thread other([&] {
    other_thread_saw = current_stream::get();
    current_stream::push(b);
    other_thread_top = current_stream::get();
    other_thread_depth = current_stream::depth();
    current_stream::pop(b.get());
  });
  other.join();

  EXPECT_EQ(other_thread_saw, DefaultStream::legacy(0)) << "another thread's entry leaked into this one";
  EXPECT_EQ(other_thread_top, b);
  EXPECT_EQ(other_thread_depth, 1u);
  EXPECT_EQ(current_stream::get(), a);
  EXPECT_EQ(current_stream::depth(), 1u);
}

TEST_F(CurrentStreamTest, ThreadsPushingAtOnceOnlyEverSeeTheirOwnStreams) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 1000;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto mine = independent_stream();
      for (int round = 0; round < kRounds; ++round) {
        current_stream::push(mine);
        if (current_stream::get() != mine || current_stream::depth() != 1) mismatches.fetch_add(1);
        current_stream::pop(mine.get());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace cuweave
