// Collectives (Note [Collectives], Note [Collective groups], Note [Simulated collectives]): the host reductions
// every backend's results are checked against, the ledger that refuses mismatched calls, the simulator's
// rendezvous of two devices' streams, timeouts and aborts (Note [Collective timeouts], Note [Collective
// failures reach the waits]) and captured collectives (Note [Collectives in graphs]).
#include "cuweave/operation.hpp"
#include "cuweave/communicator.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/collective.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event.hpp"
#include "cuweave/graph.hpp"
#include "cuweave/host_latch.hpp"
#include "cuweave/owned_stream.hpp"
#include "cuweave/stream.hpp"

namespace cuweave {
namespace {

// Queues `call` with an operation that describes no array: the tests' buffers are raw pointers.
void enqueue(Communicator& rank, const Collective& call, const std::shared_ptr<Stream>& stream) {
  Operation operation(operation_name(call.kind));
  rank.enqueue(call, operation, stream);
}

template <typename T>
T reduce_pair(T a, T b, ElementType type, ReduceOp op) {
  reduce_into(&a, &b, 1, type, op);
  return a;
}

TEST(HostReductions, IntegersWrapAsOnTheGpu) {
  EXPECT_EQ(reduce_pair<std::int8_t>(127, 1, ElementType::Int8, ReduceOp::Sum), -128);
  EXPECT_EQ(reduce_pair<std::uint8_t>(255, 2, ElementType::Uint8, ReduceOp::Sum), 1);
  EXPECT_EQ(reduce_pair<std::int64_t>(std::numeric_limits<std::int64_t>::max(), 1, ElementType::Int64, ReduceOp::Sum),
            std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(reduce_pair<std::int32_t>(-7, 3, ElementType::Int32, ReduceOp::Min), -7);
  EXPECT_EQ(reduce_pair<std::uint32_t>(7, 3, ElementType::Uint32, ReduceOp::Max), 7u);
  EXPECT_EQ(reduce_pair<std::int32_t>(-7, 3, ElementType::Int32, ReduceOp::Product), -21);
}

TEST(HostReductions, HalvesRoundOnceToNearestEven) {
  const std::uint16_t one = 0x3c00, ulp_half = 0x1000;  // 1.0 and 2^-11 (half an ulp of 1.0)
  EXPECT_EQ(reduce_pair<std::uint16_t>(one, ulp_half, ElementType::Float16, ReduceOp::Sum), one) << "a tie: to even";
  const std::uint16_t three_half_ulps = 0x1600;  // 1.5 * 2^-10
  EXPECT_EQ(reduce_pair<std::uint16_t>(one, three_half_ulps, ElementType::Float16, ReduceOp::Sum), 0x3c02)
      << "1 + 1.5 ulp rounds to 1 + 2 ulp (even)";
  EXPECT_EQ(reduce_pair<std::uint16_t>(0x7bff, 0x7bff, ElementType::Float16, ReduceOp::Sum), 0x7c00)
      << "65504 + 65504 overflows to infinity";
  EXPECT_EQ(reduce_pair<std::uint16_t>(0x0001, 0x0001, ElementType::Float16, ReduceOp::Sum), 0x0002) << "subnormals";
  EXPECT_EQ(reduce_pair<std::uint16_t>(0xc000, 0x0000, ElementType::Float16, ReduceOp::Max), 0x0000) << "max(-2, 0)";
  EXPECT_EQ(reduce_pair<std::uint16_t>(0x7e00, one, ElementType::Float16, ReduceOp::Min) & 0x7c00, 0x7c00)
      << "NaN propagates";
}

TEST(HostReductions, AveragesScaleFloatsFirstAndDivideIntegersAfter) {
  std::vector<float> floats{3.0f, 5.0f};
  scale_for_average(floats.data(), floats.size(), ElementType::Float32, 2);
  EXPECT_EQ(floats, (std::vector<float>{1.5f, 2.5f}));
  std::vector<std::int32_t> sums{-3, 7};
  finish_average(sums.data(), sums.size(), ElementType::Int32, 2);
  EXPECT_EQ(sums, (std::vector<std::int32_t>{-1, 3})) << "rounded toward zero";
}

TEST(CollectiveDescription, CountsPerRank) {
  Collective gather{CollectiveKind::AllGather, nullptr, nullptr, 10, ElementType::Float64};
  EXPECT_EQ(send_bytes(gather, 0, 4), 80u);
  EXPECT_EQ(recv_bytes(gather, 0, 4), 320u);
  Collective scatter{CollectiveKind::ReduceScatter, nullptr, nullptr, 10, ElementType::Int8};
  EXPECT_EQ(send_bytes(scatter, 1, 4), 40u);
  EXPECT_EQ(recv_bytes(scatter, 1, 4), 10u);
  Collective broadcast{CollectiveKind::Broadcast, nullptr, nullptr, 3, ElementType::Int32, ReduceOp::Sum, 1};
  EXPECT_EQ(send_bytes(broadcast, 0, 2), 0u) << "only the root sends";
  EXPECT_EQ(send_bytes(broadcast, 1, 2), 12u);
  EXPECT_EQ(describe(broadcast), "broadcast of 3 int32 from root 1");
}

TEST(CollectiveLedger, RefusesARankWhoseCallDiffersNamingBoth) {
  CollectiveLedger ledger(2);
  const Collective sum{CollectiveKind::AllReduce, nullptr, nullptr, 8, ElementType::Float32, ReduceOp::Sum};
  Collective max = sum;
  max.op = ReduceOp::Max;
  ledger.note(0, sum);
  try {
    ledger.note(1, max);
    FAIL() << "a mismatch went through";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("rank 1 calls all_reduce of 8 float32 (max) as its 1st collective, "
                                             "where rank 0 called all_reduce of 8 float32 (sum)"),
              std::string::npos)
        << error.what();
  }
  ledger.note(1, sum);  // the matching call takes the place
  ledger.note(1, max);  // rank 1 ahead: its call makes the 2nd place
  EXPECT_THROW(ledger.note(0, sum), InvalidArgument);
}

// An all-reduce of `count` floats: calls of two counts differ.
Collective sum_of(std::size_t count) {
  return Collective{CollectiveKind::AllReduce, nullptr, nullptr, count, ElementType::Float32, ReduceOp::Sum};
}

TEST(CollectiveLedger, AWithdrawnCallLeavesItsPlaceFree) {
  CollectiveLedger ledger(2);
  const Collective sum = sum_of(8), other = sum_of(4);
  ledger.note(0, sum);
  ledger.withdraw(0, sum);  // refused before it was queued
  ledger.note(1, other);    // so rank 1's different call makes the place
  ledger.note(0, other);
}

// Found by the simulator's injected faults (an NCCL call refused on a communicator of one rank): a withdrawn call
// whose place every rank had passed took back() of an empty ledger.
TEST(CollectiveLedger, ACallWithdrawnByTheOnlyRankLeavesTheLedgerWhole) {
  CollectiveLedger ledger(1);
  const Collective sum = sum_of(8), other = sum_of(4);
  ledger.note(0, sum);
  ledger.withdraw(0, sum);
  ledger.note(0, other);  // the place is free for any call
  ledger.note(0, sum);
}

TEST(CollectiveLedger, ACallWithdrawnByTheLastRankThereIsStillCheckedAgainstTheOthers) {
  CollectiveLedger ledger(2);
  const Collective sum = sum_of(8), other = sum_of(4);
  ledger.note(0, sum);
  ledger.note(1, sum);  // every rank has passed the 1st place: its entry retires
  ledger.withdraw(1, sum);
  EXPECT_THROW(ledger.note(1, other), InvalidArgument) << "rank 0 called sum in that place";
  ledger.note(1, sum);
  ledger.note(0, other);  // and both go on to the 2nd place
  ledger.note(1, other);
}

// Two simulated devices (test_main sets CUWEAVE_SIM_DEVICES=2), one rank each.
struct TwoRanks : ::testing::Test {
  std::vector<std::shared_ptr<Communicator>> ranks = Communicator::for_devices({0, 1});
  std::vector<std::shared_ptr<Stream>> streams{OwnedStream::create(0, 0, false), OwnedStream::create(1, 0, false)};

  float* upload(int rank, const std::vector<float>& values) {
    auto* device = static_cast<float*>(backend().memory().allocate_device(values.size() * sizeof(float), rank,
                                                                 streams[rank]->handle()));
    Operation copy("copy");
    streams[rank]->copy_async(copy, device, values.data(), values.size() * sizeof(float));
    return device;
  }
  std::vector<float> download(int rank, const float* device, std::size_t count) {
    std::vector<float> host(count);
    Operation copy("copy");
    streams[rank]->copy_async(copy, host.data(), device, count * sizeof(float));
    streams[rank]->synchronize();
    return host;
  }
};

TEST_F(TwoRanks, AnAllReduceInPlaceSumsBothRanks) {
  float* a = upload(0, {1, 2, 3});
  float* b = upload(1, {10, 20, 30});
  const Collective call{CollectiveKind::AllReduce, nullptr, nullptr, 3, ElementType::Float32, ReduceOp::Sum};
  {
    CollectiveGroup group;  // one thread drives both ranks
    Collective mine = call;
    mine.send = mine.recv = a;
    enqueue(*ranks[0], mine, streams[0]);
    mine.send = mine.recv = b;
    enqueue(*ranks[1], mine, streams[1]);
  }
  EXPECT_EQ(download(0, a, 3), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(download(1, b, 3), (std::vector<float>{11, 22, 33}));
}

TEST_F(TwoRanks, SendsAndReceivesInOneGroupDoNotWaitOnEachOther) {
  float* a = upload(0, {1, 2});
  float* b = upload(1, {3, 4});
  float* into_a = upload(0, {0, 0});
  float* into_b = upload(1, {0, 0});
  {
    CollectiveGroup group;
    enqueue(*ranks[0], {CollectiveKind::Send, a, nullptr, 2, ElementType::Float32, ReduceOp::Sum, 1}, streams[0]);
    enqueue(*ranks[0], {CollectiveKind::Recv, nullptr, into_a, 2, ElementType::Float32, ReduceOp::Sum, 1}, streams[0]);
    enqueue(*ranks[1], {CollectiveKind::Send, b, nullptr, 2, ElementType::Float32, ReduceOp::Sum, 0}, streams[1]);
    enqueue(*ranks[1], {CollectiveKind::Recv, nullptr, into_b, 2, ElementType::Float32, ReduceOp::Sum, 0}, streams[1]);
  }
  EXPECT_EQ(download(0, into_a, 2), (std::vector<float>{3, 4}));
  EXPECT_EQ(download(1, into_b, 2), (std::vector<float>{1, 2}));
}

TEST_F(TwoRanks, AStreamOfAnotherDeviceIsRefused) {
  float* a = upload(0, {1});
  Collective call{CollectiveKind::AllReduce, a, a, 1, ElementType::Float32};
  EXPECT_THROW(enqueue(*ranks[0], call, streams[1]), InvalidArgument);
  call.kind = CollectiveKind::Send;
  call.root = 0;
  EXPECT_THROW(enqueue(*ranks[0], call, streams[0]), InvalidArgument) << "a send to itself";
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point began) { return std::chrono::duration<double>(Clock::now() - began).count(); }

// The error `wait` throws, or a failed test.
template <typename Wait>
BackendError thrown_by(Wait&& wait) {
  try {
    wait();
  } catch (const BackendError& error) {
    return error;
  }
  ADD_FAILURE() << "nothing was thrown";
  return BackendError("", 0, "", "", __FILE__, __LINE__);
}

const Collective kSumOfOne{CollectiveKind::AllReduce, nullptr, nullptr, 1, ElementType::Float32, ReduceOp::Sum};

TEST_F(TwoRanks, ALoneRanksCollectiveTimesOutAndOnlyTheWaitsAfterItReportIt) {
  float* a = upload(0, {1});
  Collective call = kSumOfOne;
  call.send = call.recv = a;
  auto hasty = Communicator::for_devices({0, 1}, std::chrono::milliseconds(300));
  Event before(0, {});
  before.record(*streams[0]);
  const Clock::time_point began = Clock::now();
  enqueue(*hasty[0], call, streams[0]);  // rank 1 never calls it
  Event after(0, {});
  after.record(*streams[0]);
  const BackendError error = thrown_by([&] { after.synchronize(); });
  EXPECT_EQ(error.name(), "ncclTimeout");
  EXPECT_EQ(error.call(), "ncclAllReduce");
  EXPECT_NE(std::string(error.what()).find("all_reduce of 1 float32 (sum) on rank 0 of 2 (device 0) was not done "
                                           "within 0.3 s of being queued"),
            std::string::npos)
      << error.what();
  EXPECT_GE(seconds_since(began), 0.3);
  EXPECT_LT(seconds_since(began), 2.0);
  before.synchronize();      // recorded before the collective: nothing to report
  streams[0]->synchronize();  // reported once, by the wait for `after`
  ASSERT_NE(hasty[0]->failure(), nullptr);
  EXPECT_EQ(hasty[1]->failure(), nullptr);
  EXPECT_THROW(enqueue(*hasty[0], call, streams[0]), BackendError) << "later collectives are refused";
}

TEST_F(TwoRanks, AnAbortedRankFailsTheRankWaitingForItAtOnce) {
  float* a = upload(0, {1});
  Collective call = kSumOfOne;
  call.send = call.recv = a;
  auto patient = Communicator::for_devices({0, 1}, std::chrono::seconds(60));
  const Clock::time_point began = Clock::now();
  enqueue(*patient[0], call, streams[0]);
  patient[1]->abort("the test");
  const BackendError error = thrown_by([&] { streams[0]->synchronize(); });
  EXPECT_EQ(error.name(), "ncclRemoteError") << error.what();
  EXPECT_LT(seconds_since(began), 10.0) << "it waited for its timeout";
  EXPECT_NE(std::string(patient[1]->failure()->what()).find("the communicator was aborted (the test)"),
            std::string::npos);
}

// Note [Releases behind a pause]: a communicator's destroy waits for its device's queued work (NCCL's does, and
// the simulator's). Its last references dropped on another thread while a stream is paused, that thread goes on at
// once, and another communicator's collective is queued meanwhile.
TEST_F(TwoRanks, ACommunicatorDroppedBehindAPauseHoldsBackNoThreadAndNoCollective) {
  float* a = upload(0, {1, 2});
  float* b = upload(1, {10, 20});
  auto dropped = Communicator::for_devices({0, 1});
  HostLatch latch;
  latch.pause(streams[0]);  // device 0 now has work it cannot finish before the release
  auto dropping = std::async(std::launch::async, [&dropped] { dropped.clear(); });
  const bool returned = dropping.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!returned) latch.release();  // lets the destroy finish: the test fails instead of hanging
  ASSERT_TRUE(returned) << "dropping a communicator waited for the paused stream";
  const Collective call{CollectiveKind::AllReduce, nullptr, nullptr, 2, ElementType::Float32, ReduceOp::Sum};
  {
    CollectiveGroup group;
    Collective mine = call;
    mine.send = mine.recv = a;
    enqueue(*ranks[0], mine, streams[0]);
    mine.send = mine.recv = b;
    enqueue(*ranks[1], mine, streams[1]);
  }
  EXPECT_FALSE(streams[0]->idle());
  latch.release();  // and the deferred destroys run, on this thread
  EXPECT_EQ(download(0, a, 2), (std::vector<float>{11, 22}));
  EXPECT_EQ(download(1, b, 2), (std::vector<float>{11, 22}));
}

TEST(Communicators, JoiningWithoutTheOtherRanksTimesOut) {
  const Clock::time_point began = Clock::now();
  const BackendError error =
      thrown_by([] { Communicator::join(Communicator::new_id(), 2, 0, 0, std::chrono::milliseconds(200)); });
  EXPECT_EQ(error.name(), "ncclTimeout");
  EXPECT_EQ(error.call(), "ncclCommInitRankConfig");
  EXPECT_GE(seconds_since(began), 0.2);
}

TEST_F(TwoRanks, CapturedCollectivesMeetAtEveryReplay) {
  float* a = upload(0, {1, 2});
  float* b = upload(1, {10, 20});
  std::vector<std::shared_ptr<Graph>> graphs;
  {
    std::vector<std::shared_ptr<Capture>> captures{Capture::begin(streams[0], CaptureMode::Relaxed),
                                                   Capture::begin(streams[1], CaptureMode::Relaxed)};
    CollectiveGroup group;
    Collective call{CollectiveKind::AllReduce, a, a, 2, ElementType::Float32, ReduceOp::Sum};
    enqueue(*ranks[0], call, streams[0]);
    call.send = call.recv = b;
    enqueue(*ranks[1], call, streams[1]);
    group.end();
    for (auto& capture : captures) graphs.push_back(capture->end());
  }
  EXPECT_EQ(download(0, a, 2), (std::vector<float>{1, 2})) << "nothing ran during the capture";
  for (int replay = 0; replay < 3; ++replay) {
    graphs[0]->launch(streams[0]);
    graphs[1]->launch(streams[1]);
  }
  // Each replay sums both ranks' values: 11, 22 once, 22, 44 twice, 44, 88 three times.
  EXPECT_EQ(download(0, a, 2), (std::vector<float>{44, 88}));
  EXPECT_EQ(download(1, b, 2), (std::vector<float>{44, 88}));
}

}  // namespace
}  // namespace cuweave
