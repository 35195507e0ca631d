// The simulator's state is an object: each SimState has its own conditions and its own communicators being
// joined, so two simulators in one process (as these tests make) share nothing through them.
#include <memory>
#include <string>
#include <variant>

#include <gtest/gtest.h>

#include "sim/sim_facets.hpp"

namespace cuweave::sim {
namespace {

TEST(SimStateTest, EachConditionBookMakesItsOwnHandlesWithTheirDefaults) {
  ConditionBook one;
  ConditionBook other;
  const ConditionHandle a = one.make(3);
  const ConditionHandle b = one.make(0);
  EXPECT_NE(a, b);
  EXPECT_EQ(one.default_of(a), 3u);
  EXPECT_EQ(one.default_of(b), 0u);
  EXPECT_EQ(other.default_of(a), 0u);  // another book never made it
  EXPECT_EQ(other.make(7), a);         // its first handle, with its own default
  EXPECT_EQ(other.default_of(a), 7u);
  EXPECT_EQ(one.default_of(a), 3u);
}

TEST(SimStateTest, ACapturedConditionalNodeCarriesItsConditionsDefault) {
  SimState state;
  SimStream* stream = state.scheduler.create_stream(0, 0, false);
  state.captures.begin(stream, CaptureMode::ThreadLocal);
  const ConditionHandle condition = state.captures.create_condition(stream, 5);
  state.captures.add_conditional(stream, condition, ConditionalKind::If, 1);
  std::unique_ptr<Graph> graph = state.captures.end(stream);
  ASSERT_EQ(graph->nodes().size(), 1u);
  const auto* conditional = std::get_if<ConditionalGraphNode>(&graph->nodes()[0]->params);
  ASSERT_NE(conditional, nullptr);
  EXPECT_EQ(conditional->condition, condition);
  EXPECT_EQ(conditional->default_value, 5u);
}

TEST(SimStateTest, RanksJoinACommunicatorThroughTheRegistryThatMadeItsId) {
  CommunicatorRegistry registry;
  CommunicatorRegistry another;
  const std::string id = registry.make_id();
  EXPECT_EQ(another.make_id(), id);  // the same text: each registry counts its own ids
  CommunicatorHandle first = registry.join(id, 2, 0, 0);
  CommunicatorHandle elsewhere = another.join(id, 2, 1, 1);  // another simulator's communicator of that id
  EXPECT_FALSE(communicator_ready(first));
  EXPECT_FALSE(communicator_ready(elsewhere));
  CommunicatorHandle second = registry.join(id, 2, 1, 1);
  EXPECT_TRUE(communicator_ready(first));
  EXPECT_TRUE(communicator_ready(second));
  EXPECT_FALSE(communicator_ready(elsewhere));
  for (CommunicatorHandle made : {first, second, elsewhere}) destroy_communicator(made);
}

}  // namespace
}  // namespace cuweave::sim
