// Conditional nodes (Note [Conditional nodes]): how conditions are evaluated, and the bookkeeping of body
// captures: a body belongs to its root capture while open, is captured once, refuses what CUDA forbids there,
// and the simulator runs the node with CUDA's semantics.
#include "cuweave/operation.hpp"
#include "cuweave/conditional.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include <gtest/gtest.h>

#include "cuweave/arithmetic.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/condition.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/graph.hpp"
#include "cuweave/pinned_pool.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using testing::independent_stream;

template <typename T>
unsigned evaluate(T value, Comparison comparison, Scalar threshold = {}) {
  const NumericType type = std::is_same_v<T, float>          ? NumericType::Float32
                           : std::is_same_v<T, double>       ? NumericType::Float64
                           : std::is_same_v<T, std::int32_t> ? NumericType::Int32
                                                             : NumericType::Int64;
  return evaluate_condition(&value, type, comparison, threshold);
}

TEST(ConditionEvaluation, ComparisonsGiveOneOrZeroInTheElementsType) {
  EXPECT_EQ(evaluate(0.5f, Comparison::Greater, Scalar{0.25, 0}), 1u);
  EXPECT_EQ(evaluate(0.25f, Comparison::Greater, Scalar{0.25, 0}), 0u);
  EXPECT_EQ(evaluate(0.1f, Comparison::Equal, Scalar{0.1, 0}), 1u) << "the threshold is rounded to float32 first";
  EXPECT_EQ(evaluate(std::nan(""), Comparison::NotEqual, Scalar{0.0, 0}), 1u);
  EXPECT_EQ(evaluate(std::nan(""), Comparison::LessEqual, Scalar{0.0, 0}), 0u);
  EXPECT_EQ(evaluate(std::int32_t{-3}, Comparison::Less, Scalar{0, -2}), 1u);
  EXPECT_EQ(evaluate(std::int64_t{1} << 60, Comparison::GreaterEqual, Scalar{0, std::int64_t{1} << 60}), 1u);
}

TEST(ConditionEvaluation, ValuesNameASwitchCaseOrNone) {
  EXPECT_EQ(evaluate(std::int64_t{2}, Comparison::Value), 2u);
  EXPECT_EQ(evaluate(std::int32_t{-1}, Comparison::Value), kNoCase);
  EXPECT_EQ(evaluate(std::int64_t{1} << 40, Comparison::Value), kNoCase);
  EXPECT_EQ(evaluate(2.9, Comparison::Value), 2u);
  EXPECT_EQ(evaluate(-0.5, Comparison::Value), kNoCase);
  EXPECT_EQ(evaluate(std::nan(""), Comparison::Value), kNoCase);
}

TEST(ConditionEvaluation, BodyCountsFollowCuda) {
  EXPECT_TRUE(valid_body_count(ConditionalKind::While, 1));
  EXPECT_FALSE(valid_body_count(ConditionalKind::While, 2));
  EXPECT_TRUE(valid_body_count(ConditionalKind::If, 2));
  EXPECT_FALSE(valid_body_count(ConditionalKind::If, 3));
  EXPECT_TRUE(valid_body_count(ConditionalKind::Switch, 7));
  EXPECT_FALSE(valid_body_count(ConditionalKind::Switch, 0));
}

class ConditionalTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(Capture::any_active()) << "an earlier test left a capture active"; }

  // Host-visible int64 cells the simulator's built-in kernels may read and write.
  std::int64_t* cells(std::size_t count) {
    block_ = services().pinned().allocate(count * sizeof(std::int64_t));
    std::memset(block_->data(), 0, count * sizeof(std::int64_t));
    return static_cast<std::int64_t*>(block_->data());
  }
  Arithmetic add_to(std::int64_t* cell, std::int64_t value) {
    Arithmetic op;
    op.op = ArithmeticOp::AddScalar;
    op.type = NumericType::Int64;
    op.out = cell;
    op.x = cell;
    op.alpha.integer = value;
    op.count = 1;
    return op;
  }
  ConditionRule positive(const std::int64_t* cell) {
    ConditionRule rule;
    rule.element = cell;
    rule.type = NumericType::Int64;
    rule.comparison = Comparison::Greater;
    return rule;
  }

  std::shared_ptr<Stream> origin = independent_stream();
  std::shared_ptr<PinnedBlock> block_;
};

TEST_F(ConditionalTest, AWhileNodeRunsItsBodyAsLongAsTheConditionHolds) {
  std::int64_t* cell = cells(2);  // [left, rounds]
  cell[0] = 3;
  auto capture = Capture::begin(origin, CaptureMode::Global);
  const ConditionHandle condition = create_condition(*origin, 0);
  {
    Operation set("set_condition");
    origin->set_condition_async(set, condition, positive(&cell[0]));
  }
  auto loop = Conditional::add(origin, condition, ConditionalKind::While, 1);
  std::shared_ptr<Stream> body = loop->begin_body(0);
  {
    Operation add("ops.add_scalar");
    body->arithmetic_async(add, add_to(&cell[0], -1));
  }
  {
    Operation add("ops.add_scalar");
    body->arithmetic_async(add, add_to(&cell[1], 1));
  }
  {
    Operation set("set_condition");
    body->set_condition_async(set, condition, positive(&cell[0]));
  }
  loop->end_body();
  std::shared_ptr<Graph> graph = capture->end();
  EXPECT_EQ(cell[1], 0) << "captured work ran during the capture";

  graph->launch(origin);
  origin->synchronize();
  EXPECT_EQ(cell[0], 0);
  EXPECT_EQ(cell[1], 3);
  cell[0] = 2;  // the next replay starts from what the memory holds, the condition from its default
  graph->launch(origin);
  origin->synchronize();
  EXPECT_EQ(cell[1], 5);
}

TEST_F(ConditionalTest, ABodyBelongsToItsRootCaptureWhileOpen) {
  std::int64_t* cell = cells(1);
  auto capture = Capture::begin(origin, CaptureMode::Global);
  const ConditionHandle condition = create_condition(*origin, 1);
  auto branch = Conditional::add(origin, condition, ConditionalKind::If, 2);
  EXPECT_EQ(branch->body_count(), 2u);
  std::shared_ptr<Stream> then_stream = branch->begin_body(0);
  EXPECT_EQ(Capture::of(*then_stream), capture) << "work in the body is the root's for lifetimes";
  EXPECT_THROW(branch->begin_body(1), InvalidArgument) << "one body at a time";
  EXPECT_THROW(capture->end(), InvalidArgument) << "the root cannot end under an open body";
  EXPECT_FALSE(capture->ended());
  {
    Operation add("ops.add_scalar");
    then_stream->arithmetic_async(add, add_to(cell, 1));
  }
  branch->end_body();
  EXPECT_EQ(Capture::of(*then_stream), nullptr);
  EXPECT_THROW(branch->begin_body(0), InvalidArgument) << "each body is captured once";
  EXPECT_THROW(branch->begin_body(2), InvalidArgument) << "there is no body 2";
  std::shared_ptr<Graph> graph = capture->end();  // body 1 stays empty: the else branch does nothing

  graph->launch(origin);  // default 1: the then branch
  origin->synchronize();
  EXPECT_EQ(cell[0], 1);
}

TEST_F(ConditionalTest, WorkOnTheCapturingStreamWhileABodyIsOpenIsRefused) {
  std::int64_t* cell = cells(1);
  auto capture = Capture::begin(origin, CaptureMode::Global);
  auto branch = Conditional::add(origin, create_condition(*origin, 1), ConditionalKind::If, 1);
  std::shared_ptr<Stream> body = branch->begin_body(0);
  {  // lands after the node, not in the body
    Operation add("ops.add_scalar");
    origin->arithmetic_async(add, add_to(cell, 1));
  }
  EXPECT_THROW(branch->end_body(), InvalidArgument);
  EXPECT_EQ(Capture::of(*body), nullptr) << "the body's capture ended anyway";
  capture->abandon();
  EXPECT_FALSE(Capture::any_active());
}

TEST_F(ConditionalTest, WhatCudaForbidsInABodyIsRefusedThereOnly) {
  auto capture = Capture::begin(origin, CaptureMode::Global);
  auto branch = Conditional::add(origin, create_condition(*origin, 0), ConditionalKind::If, 1);
  EXPECT_NO_THROW(capture->refuse_in_body(*origin, "cudaLaunchHostFunc", "a host callback"));
  std::shared_ptr<Stream> body = branch->begin_body(0);
  try {
    capture->refuse_in_body(*body, "cudaLaunchHostFunc", "a host callback");
    ADD_FAILURE() << "a host callback was allowed in a body";
  } catch (const BackendError& error) {
    EXPECT_EQ(error.name(), "cudaErrorStreamCaptureUnsupported");
  }
  branch->abandon_body();
  capture->abandon();
}

TEST_F(ConditionalTest, ConditionsAndNodesNeedACapture) {
  EXPECT_THROW(create_condition(*origin, 0), InvalidArgument);
  EXPECT_THROW(Conditional::add(origin, 1, ConditionalKind::While, 1), InvalidArgument);
  auto capture = Capture::begin(origin, CaptureMode::Global);
  EXPECT_THROW(Conditional::add(origin, create_condition(*origin, 0), ConditionalKind::While, 2), InvalidArgument);
  capture->abandon();
}

TEST_F(ConditionalTest, BodiesBuiltNodeByNodeRunOnlyWithTheirGraph) {
  std::int64_t* cell = cells(1);
  std::shared_ptr<Graph> graph = Graph::create(0);
  const ConditionHandle condition = graph->create_condition(2);
  auto [node, bodies] = graph->add_conditional({}, condition, ConditionalKind::Switch, 3);
  ASSERT_EQ(bodies.size(), 3u);
  EXPECT_TRUE(bodies[2]->is_body());
  EXPECT_FALSE(graph->is_body());
  bodies[2]->add_memset({}, cell, 0x11, sizeof(std::int64_t), {});
  bodies[0]->add_memset({}, cell, 0x22, sizeof(std::int64_t), {});
  EXPECT_THROW(bodies[2]->launch(origin), InvalidArgument);
  EXPECT_THROW(bodies[2]->refresh(), InvalidArgument);

  graph->launch(origin);  // the default, 2, picks case 2
  origin->synchronize();
  EXPECT_EQ(static_cast<std::uint64_t>(cell[0]), 0x1111111111111111u);
  EXPECT_NE(node, nullptr);
}

}  // namespace
}  // namespace cuweave
