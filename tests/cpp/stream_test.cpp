// Stream: where each comes from, who may close it, use after close, ordering one stream after another, idle queries, the event a
// closing stream records, and adoptions that close with their owner.
#include "cuweave/stream.hpp"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/adopted_stream.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/default_stream.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/owned_stream.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream_pool.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using testing::eventually;
using testing::Gate;
using testing::independent_stream;

// Sets `flag` once the stream's work queued before it has run.
void raise_after_work(Stream& stream, std::atomic<bool>& flag) {
  backend().streams().launch_host_function(
      stream.handle(), [](void* data) { static_cast<std::atomic<bool>*>(data)->store(true); }, &flag);
}

class StreamTest : public ::testing::Test {
 protected:
  void TearDown() override { backend().devices().synchronize_device(0); }
};

TEST_F(StreamTest, OnlyStreamsCuweaveMadeAreClosedByTheirUser) {
  EXPECT_THROW(DefaultStream::legacy(0)->close(), InvalidArgument);
  EXPECT_THROW(DefaultStream::per_thread(0)->close(), InvalidArgument);
  auto stream = independent_stream();
  stream->close();
  EXPECT_TRUE(stream->closed());
  stream->close();  // again: nothing to do
  EXPECT_THROW(stream->handle(), InvalidArgument);
}

TEST_F(StreamTest, EachStreamSaysWhoMadeItsCudaStream) {
  struct Expected {
    std::shared_ptr<Stream> stream;
    const char* origin;
    Stream::Default default_stream;
    bool made_by_cuweave, adopted, lent_by_pool;
  };
  auto owned = OwnedStream::create(0, 0, false);
  auto pool = StreamPool::create(1, 0, 0, false);
  const Expected expected[] = {
      {owned, "owned", Stream::Default::None, true, false, false},
      {pool->next(), "pooled", Stream::Default::None, true, false, true},
      {DefaultStream::legacy(0), "legacy_default", Stream::Default::Legacy, false, false, false},
      {DefaultStream::per_thread(0), "per_thread_default", Stream::Default::PerThread, false, false, false},
      {AdoptedStream::adopt(owned->handle(), nullptr), "external", Stream::Default::None, false, true, false},
  };
  for (const Expected& e : expected) {
    const Stream& stream = *e.stream;
    EXPECT_EQ(std::string(stream.origin()), e.origin);
    EXPECT_EQ(stream.default_stream(), e.default_stream) << e.origin;
    EXPECT_EQ(stream.is_legacy_default(), e.default_stream == Stream::Default::Legacy) << e.origin;
    EXPECT_EQ(stream.made_by_cuweave(), e.made_by_cuweave) << e.origin;
    EXPECT_EQ(stream.adopted(), e.adopted) << e.origin;
    EXPECT_EQ(stream.lent_by_pool(), e.lent_by_pool) << e.origin;
    EXPECT_EQ(stream.closable(), e.made_by_cuweave && !e.lent_by_pool) << e.origin;
    EXPECT_EQ(std::string(stream.describe().origin), e.origin);
  }
}

TEST_F(StreamTest, EachDevicesLegacyStreamIsAQueueOfItsOwnThoughTheirHandlesAreEqual) {
  auto legacy0 = DefaultStream::legacy(0);
  auto legacy1 = DefaultStream::legacy(1);
  ASSERT_EQ(legacy0->raw_handle(), legacy1->raw_handle());
  EXPECT_FALSE(legacy0->same_queue(*legacy1));
  EXPECT_TRUE(legacy0->same_queue(*DefaultStream::legacy(0)));
  // A wait for the other device's legacy stream is queued, not skipped as a wait for itself.
  EXPECT_EQ(legacy1->wait_for({legacy0}), 1U);
  EXPECT_EQ(legacy1->wait_for({legacy1}), 0U);
  backend().devices().synchronize_device(1);
}

TEST_F(StreamTest, APriorityOutsideTheDevicesRangeIsRefused) {
  EXPECT_THROW(OwnedStream::create(0, 1, false), InvalidArgument);  // the simulator's range is -5 .. 0
  EXPECT_THROW(OwnedStream::create(0, -6, false), InvalidArgument);
  EXPECT_EQ(OwnedStream::create(0, -5, false)->priority(), -5);
}

TEST_F(StreamTest, AWaitOrdersLaterWorkAfterTheOtherStreamsWorkSoFar) {
  auto first = independent_stream();
  auto second = independent_stream();
  std::atomic<bool> ran{false};
  {
    Gate gate(*first);
    second->wait(*first);
    raise_after_work(*second, ran);
    EXPECT_FALSE(second->idle());
    EXPECT_FALSE(ran.load());  // behind the gate on the other stream
  }
  second->synchronize();
  EXPECT_TRUE(ran.load());
  EXPECT_TRUE(second->idle());
}

TEST_F(StreamTest, WorkQueuedAfterAWaitOnlyWaitsForWhatCameBefore) {
  auto first = independent_stream();
  auto second = independent_stream();
  std::atomic<bool> ran{false};
  second->wait(*first);  // nothing queued on `first` yet
  Gate gate(*first);
  raise_after_work(*second, ran);
  EXPECT_TRUE(eventually([&] { return ran.load(); }));
}

TEST_F(StreamTest, AClosedStreamsEventCompletesWithTheWorkQueuedBeforeItClosed) {
  auto stream = independent_stream();
  {
    Gate gate(*stream);
    stream->close();
    ASSERT_NE(stream->closing_event(), nullptr);
    EXPECT_FALSE(stream->closed_work_complete());
  }
  EXPECT_TRUE(eventually([&] { return stream->closed_work_complete(); }));
}

TEST_F(StreamTest, AnAdoptionClosesWithTheStreamCuweaveMade) {
  auto stream = independent_stream();
  auto adoption = AdoptedStream::adopt(stream->handle(), nullptr);
  EXPECT_TRUE(adoption->adopted());
  EXPECT_EQ(adoption->raw_handle(), stream->raw_handle());
  EXPECT_THROW(adoption->close(), InvalidArgument);  // not the adopter's to destroy
  stream->close();
  EXPECT_TRUE(adoption->closed());
  try {
    adoption->handle();
    ADD_FAILURE() << "an adoption of a closed stream gave its handle";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("adopted a stream that cuweave has since closed"), std::string::npos)
        << error.what();
  }
}

TEST_F(StreamTest, AnAdoptionOfAStreamCuweaveMadeClosesWhenThatStreamGoesUnclosed) {
  auto adoption = AdoptedStream::adopt(independent_stream()->handle(), nullptr);  // the stream goes right away
  EXPECT_TRUE(adoption->closed());
  ASSERT_NE(adoption->closing_event(), nullptr);
  EXPECT_TRUE(eventually([&] { return adoption->closed_work_complete(); }));
}

TEST_F(StreamTest, LiveStreamsAreDescribedUntilTheyClose) {
  auto stream = OwnedStream::create(0, -2, false, "named");
  auto described = [&] {
    for (const Stream::Description& d : Stream::live()) {
      if (d.handle == stream->raw_handle() && d.name == "named") return true;
    }
    return false;
  };
  EXPECT_TRUE(described());
  stream->close();
  EXPECT_FALSE(described());
}

}  // namespace
}  // namespace cuweave

namespace cuweave {
namespace {

// The sanitizer orders what waits for a closed stream's closing event after the stream's work, as CUDA does.
class ClosedStreamSanitizerTest : public ::testing::Test {
 protected:
  void SetUp() override { sanitizer::enable(sanitizer::Mode::Raise); }
  void TearDown() override {
    sanitizer::disable();
    backend().devices().synchronize_device(0);
  }
  char bytes[64] = {};
  std::vector<sanitizer::Access> writes{sanitizer::writes(bytes, sizeof(bytes))};
};

TEST_F(ClosedStreamSanitizerTest, WorkThatWaitsForTheClosingEventFollowsTheClosedStreamsWork) {
  auto closing = testing::independent_stream();
  auto later = testing::independent_stream();
  sanitizer::operation(*closing, "write before closing", writes);
  closing->close();
  later->wait(closing->closing_event());
  EXPECT_NO_THROW(sanitizer::operation(*later, "write after its wait", writes));
}

TEST_F(ClosedStreamSanitizerTest, WorkThatDoesNotWaitForItRaces) {
  auto closing = testing::independent_stream();
  auto later = testing::independent_stream();
  sanitizer::operation(*closing, "write before closing", writes);
  closing->close();
  EXPECT_THROW(sanitizer::operation(*later, "write without a wait", writes), sanitizer::RaceFound);
}

}  // namespace
}  // namespace cuweave
