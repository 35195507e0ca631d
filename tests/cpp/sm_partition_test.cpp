// SmPartition: CUDA's split rules as the simulator keeps them (4 SMs, at least 2 a partition, in steps of 2), and
// a partition kept alive until the work of its streams has completed.
#include "cuweave/owned_stream.hpp"
#include "cuweave/services.hpp"
#include "cuweave/sm_partition.hpp"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/errors.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using testing::Gate;

TEST(SmPartitionTest, ASplitGivesTheRoundedGroupsAndTheRest) {
  const SmResources resources = SmPartition::resources(0);
  EXPECT_EQ(resources.sm_count, 4u);
  EXPECT_EQ(resources.min_partition_sms, 2u);
  EXPECT_EQ(resources.alignment, 2u);
  auto parts = SmPartition::split(0, 1, 1);  // one SM asked for: CUDA rounds it up to 2
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0]->sms(), 2u);
  EXPECT_FALSE(parts[0]->is_rest());
  EXPECT_EQ(parts[1]->sms(), 2u);
  EXPECT_TRUE(parts[1]->is_rest());
  EXPECT_EQ(SmPartition::split(0, 3, 1).size(), 1u);  // 3 rounds up to all 4: no rest
  EXPECT_EQ(SmPartition::split(0, 2, 2).size(), 2u);
}

TEST(SmPartitionTest, SplitsTheDeviceCannotHoldAreRefused) {
  EXPECT_THROW(SmPartition::split(0, 5, 1), InvalidArgument);
  EXPECT_THROW(SmPartition::split(0, 0, 1), InvalidArgument);
  EXPECT_THROW(SmPartition::split(0, 2, 3), InvalidArgument);
  EXPECT_THROW(SmPartition::split(0, 2, 0), InvalidArgument);
}

TEST(SmPartitionTest, APartitionOutlivesItsStreamUntilTheStreamsWorkHasCompleted) {
  services().lifetimes().collect();
  const std::size_t before = SmPartition::alive();
  auto parts = SmPartition::split(0, 2, 1);
  std::shared_ptr<Stream> stream = OwnedStream::create_on(parts[0], 0, "reserved");
  EXPECT_EQ(stream->partition(), parts[0]);
  EXPECT_FALSE(stream->blocking());
  {
    Gate gate(*stream);
    parts.clear();
    EXPECT_EQ(SmPartition::alive(), before + 1);  // the stream's
    stream.reset();
    services().lifetimes().collect();
    EXPECT_EQ(SmPartition::alive(), before + 1);  // the destroyed stream's work waits behind the gate
  }
  backend().devices().synchronize_device(0);
  services().lifetimes().collect();
  EXPECT_EQ(SmPartition::alive(), before);
}

}  // namespace
}  // namespace cuweave
