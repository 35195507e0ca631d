// The simulator's injected faults (Note [Injected faults]): a seed replays the same faults, a rate is kept on
// average, only the chosen kinds strike, and each kind fails as CUDA, NCCL or CUPTI would.
#include "sim/fault_plan.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/errors.hpp"

namespace cuweave::sim {
namespace {

std::vector<bool> draws(FaultPlan& plan, FaultKind kind, int count) {
  std::vector<bool> struck;
  for (int i = 0; i < count; ++i) struck.push_back(plan.strikes(kind, "cudaLaunchKernel"));
  return struck;
}

TEST(FaultPlanTest, OffByDefaultAndWhenStopped) {
  FaultPlan plan;
  EXPECT_FALSE(plan.strikes(FaultKind::Allocation, "cudaMalloc"));
  plan.configure(7, 1.0);
  EXPECT_TRUE(plan.strikes(FaultKind::Allocation, "cudaMalloc"));
  plan.configure(std::nullopt, 1.0);
  EXPECT_FALSE(plan.strikes(FaultKind::Allocation, "cudaMalloc"));
  EXPECT_TRUE(plan.injected().empty());
}

TEST(FaultPlanTest, ASeedReplaysTheSameFaultsAndAnotherSeedOthers) {
  FaultPlan plan;
  plan.configure(11, 0.2);
  const std::vector<bool> first = draws(plan, FaultKind::Launch, 400);
  plan.configure(11, 0.2);
  EXPECT_EQ(draws(plan, FaultKind::Launch, 400), first);
  plan.configure(12, 0.2);
  EXPECT_NE(draws(plan, FaultKind::Launch, 400), first);
}

TEST(FaultPlanTest, TheRateIsKeptOnAverage) {
  FaultPlan plan;
  plan.configure(3, 0.1);
  int struck = 0;
  for (bool hit : draws(plan, FaultKind::StickyFault, 20000)) struck += hit ? 1 : 0;
  EXPECT_GT(struck, 1700);
  EXPECT_LT(struck, 2300);
}

TEST(FaultPlanTest, OnlyTheChosenKindsStrikeAndEachStrikeIsLogged) {
  FaultPlan plan;
  plan.configure(5, 1.0, {"collective"});
  EXPECT_FALSE(plan.strikes(FaultKind::Allocation, "cudaMalloc"));
  EXPECT_TRUE(plan.strikes(FaultKind::Collective, "ncclAllReduce"));
  const auto injected = plan.injected();
  ASSERT_EQ(injected.size(), 1u);
  EXPECT_EQ(injected[0].first, "collective");
  EXPECT_EQ(injected[0].second, "ncclAllReduce");
  EXPECT_THROW(plan.configure(5, 1.0, {"out_of_memory"}), InvalidArgument);
}

TEST(FaultPlanTest, EachKindFailsAsItsLibraryWould) {
  const std::vector<std::pair<FaultKind, std::string>> expected = {
      {FaultKind::Allocation, "cudaErrorMemoryAllocation"},
      {FaultKind::Launch, "cudaErrorLaunchOutOfResources"},
      {FaultKind::Collective, "ncclUnhandledCudaError"},
      {FaultKind::ToolAttach, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"},
  };
  for (const auto& [kind, name] : expected) {
    try {
      FaultPlan::fail(kind, "theCall");
      FAIL() << "no throw for " << fault_kind_name(kind);
    } catch (const BackendError& error) {
      EXPECT_EQ(std::string(error.name()), name);
      EXPECT_EQ(std::string(error.call()), "theCall");
      EXPECT_NE(std::string(error.what()).find("injected fault"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace cuweave::sim
