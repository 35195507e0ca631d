// The simulator's capture rules (Note [Simulated capture and graphs]), tested directly on its CaptureBook: what
// CUDA refuses during a capture is refused with CUDA's error and invalidates the capture, which end() then
// reports; what CUDA allows stays allowed. Each rule was seen on a GPU first.
#include "sim/capture_book.hpp"

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "cuweave/errors.hpp"
#include "sim/device_access.hpp"
#include "sim/scheduler.hpp"

namespace cuweave::sim {
namespace {

// Each test has a scheduler and a capture book of its own: the process's simulator is left alone.
class SimCaptureBookTest : public ::testing::Test {
 protected:
  DeviceAccess access;
  Scheduler scheduler{access};
  ConditionBook conditions;
  CaptureBook captures{scheduler, conditions};
  SimStream* blocking = scheduler.create_stream(0, 0, true);
  SimStream* non_blocking = scheduler.create_stream(0, 0, false);
  SimStream* legacy = scheduler.legacy_stream(0);

  void TearDown() override {
    for (SimStream* stream : {blocking, non_blocking}) {
      if (captures.state(stream).status != CaptureState::Status::None) {
        try {
          captures.end(stream);
        } catch (const BackendError&) {
          // an invalidated capture reports itself as it ends
        }
      }
      scheduler.destroy_stream(stream);
    }
  }

  // The error name `call` throws, or "" when it throws nothing.
  template <typename Call>
  static std::string refusal(Call&& call) {
    try {
      call();
    } catch (const BackendError& error) {
      return error.name();
    }
    return "";
  }
};

TEST_F(SimCaptureBookTest, StreamOrderedMemoryOnTheLegacyStreamBesideABlockingCaptureIsRefusedAndInvalidatesIt) {
  captures.begin(blocking, CaptureMode::Global);
  EXPECT_EQ(refusal([&] { captures.check_stream_ordered_memory(legacy, "cudaMallocFromPoolAsync"); }),
            "cudaErrorStreamCaptureImplicit");
  EXPECT_EQ(captures.state(blocking).status, CaptureState::Status::Invalidated);
  EXPECT_EQ(refusal([&] { captures.end(blocking); }), "cudaErrorStreamCaptureInvalidated");
  EXPECT_EQ(captures.state(blocking).status, CaptureState::Status::None);
}

TEST_F(SimCaptureBookTest, StreamOrderedMemoryIsAllowedBesideANonBlockingCaptureAndOnOtherStreams) {
  captures.begin(non_blocking, CaptureMode::Global);
  EXPECT_EQ(refusal([&] { captures.check_stream_ordered_memory(legacy, "cudaMallocFromPoolAsync"); }), "");
  captures.begin(blocking, CaptureMode::Relaxed);
  EXPECT_EQ(refusal([&] { captures.check_stream_ordered_memory(non_blocking, "cudaFreeAsync"); }), "");
  EXPECT_EQ(refusal([&] { captures.end(blocking); }), "");
  EXPECT_EQ(refusal([&] { captures.end(non_blocking); }), "");
}

TEST_F(SimCaptureBookTest, ABatchOfCopiesOnACapturingStreamIsRefusedAndTheCaptureGoesOn) {
  EXPECT_EQ(refusal([&] { captures.check_batched_copies(non_blocking, "cudaMemcpyBatchAsync"); }), "");
  captures.begin(non_blocking, CaptureMode::Global);
  EXPECT_EQ(refusal([&] { captures.check_batched_copies(non_blocking, "cudaMemcpyBatchAsync"); }),
            "cudaErrorStreamCaptureUnsupported");
  EXPECT_EQ(captures.state(non_blocking).status, CaptureState::Status::Active);
  EXPECT_EQ(refusal([&] { captures.check_batched_copies(blocking, "cudaMemcpyBatchAsync"); }), "");  // not capturing
  EXPECT_EQ(refusal([&] { captures.end(non_blocking); }), "");
}

TEST_F(SimCaptureBookTest, QueryingOrDescribingACapturingStreamIsRefusedAndInvalidatesTheCapture) {
  captures.begin(non_blocking, CaptureMode::Relaxed);
  const std::uint64_t id = captures.state(non_blocking).id;
  EXPECT_NE(id, 0u);
  EXPECT_EQ(captures.state(non_blocking).status, CaptureState::Status::Active);
  EXPECT_NE(refusal([&] { captures.check_stream_query(non_blocking, "cudaStreamQuery"); }), "");
  EXPECT_EQ(captures.state(non_blocking).status, CaptureState::Status::Invalidated);
  EXPECT_EQ(refusal([&] { captures.end(non_blocking); }), "cudaErrorStreamCaptureInvalidated");

  captures.begin(non_blocking, CaptureMode::Relaxed);
  EXPECT_NE(captures.state(non_blocking).id, id);  // a new capture sequence
  EXPECT_NE(refusal([&] { captures.check_stream_described(non_blocking, "cudaStreamGetDevice"); }), "");
  EXPECT_EQ(captures.state(non_blocking).status, CaptureState::Status::Invalidated);
}

TEST_F(SimCaptureBookTest, AWaitForOtherWorkIsRefusedByAGlobalCaptureAndAllowedBesideARelaxedOne) {
  captures.begin(non_blocking, CaptureMode::Relaxed);
  EXPECT_EQ(refusal([&] { captures.check_stream_synchronize(blocking, "cudaStreamSynchronize"); }), "");
  EXPECT_EQ(refusal([&] { captures.end(non_blocking); }), "");

  captures.begin(non_blocking, CaptureMode::Global);
  EXPECT_EQ(refusal([&] { captures.check_stream_synchronize(blocking, "cudaStreamSynchronize"); }),
            "cudaErrorStreamCaptureUnsupported");
  EXPECT_EQ(captures.state(non_blocking).status, CaptureState::Status::Invalidated);
}

// Note [Footprints of captures] counts each graph on its own: the capture's, and a conditional node's body, which
// the node owns. A stream that is not capturing, or whose capture was invalidated, has none.
TEST_F(SimCaptureBookTest, NodesCountsTheGraphAStreamCapturesIntoAndEachConditionalBodyOnItsOwn) {
  EXPECT_FALSE(captures.nodes(non_blocking).has_value());
  const auto add_empty = [&](SimStream* stream) {
    captures.capture_or_run(stream, "cudaLaunchKernel", [] { return chain(EmptyNode{}); }, [] {});
  };
  captures.begin(non_blocking, CaptureMode::ThreadLocal);
  const std::optional<CapturedNodes> empty = captures.nodes(non_blocking);
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->count, 0u);
  add_empty(non_blocking);
  add_empty(non_blocking);
  EXPECT_EQ(captures.nodes(non_blocking)->count, 2u);

  const ConditionHandle condition = captures.create_condition(non_blocking, 1);
  const ConditionalNode conditional = captures.add_conditional(non_blocking, condition, ConditionalKind::If, 1);
  EXPECT_EQ(captures.nodes(non_blocking)->count, 3u);
  SimStream* body = scheduler.create_stream(0, 0, false);
  captures.begin_into(body, conditional.bodies[0], CaptureMode::ThreadLocal);
  const std::optional<CapturedNodes> in_body = captures.nodes(body);
  ASSERT_TRUE(in_body.has_value());
  EXPECT_NE(in_body->graph, captures.nodes(non_blocking)->graph);
  EXPECT_EQ(in_body->count, 0u);
  add_empty(body);
  EXPECT_EQ(captures.nodes(body)->count, 1u);
  EXPECT_EQ(captures.nodes(non_blocking)->count, 3u);  // the body's nodes are not the capture's graph's
  captures.end_into(body);
  EXPECT_FALSE(captures.nodes(body).has_value());
  scheduler.destroy_stream(body);

  EXPECT_NE(refusal([&] { captures.check_stream_query(non_blocking, "cudaStreamQuery"); }), "");  // invalidates
  EXPECT_FALSE(captures.nodes(non_blocking).has_value());
}

}  // namespace
}  // namespace cuweave::sim
