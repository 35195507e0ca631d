// The stream-race sanitizer's bookkeeping (Note [Stream races]): what is ordered, what is a race, and what a
// report names.
#include "cuweave/race_detector.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <utility>

namespace cuweave::sanitizer {
namespace {

Access read(std::uintptr_t begin, std::uintptr_t end) { return {begin, end, AccessKind::Read}; }
Access write(std::uintptr_t begin, std::uintptr_t end) { return {begin, end, AccessKind::Write}; }
// A stepped view's elements: runs of `width` bytes every `period` (Note [Stepped accesses]).
Access stepped(AccessKind kind, std::uintptr_t begin, std::uintptr_t end, std::uintptr_t period,
               std::uintptr_t width) {
  return {begin, end, kind, period, width};
}

struct RaceDetectorTest : ::testing::Test {
  RaceDetector detector;
  AgentId host = detector.new_agent("host thread");
  AgentId producer = detector.new_agent("stream producer");
  AgentId consumer = detector.new_agent("stream consumer");

  // An operation queued by the host thread, as the core issues them.
  std::vector<Conflict> issue(AgentId stream, const std::string& name, std::vector<Access> accesses,
                              std::uint32_t call_site = 0) {
    detector.enqueue(host, stream);
    return detector.operation(stream, OperationInfo{name, call_site}, accesses);
  }
};

TEST_F(RaceDetectorTest, AMissingWaitBetweenProducerAndConsumerIsReportedWithBothSides) {
  EXPECT_TRUE(issue(producer, "fill", {write(1000, 2000)}, 7).empty());
  const auto conflicts = issue(consumer, "sum", {read(1000, 2000)}, 9);
  ASSERT_EQ(conflicts.size(), 1u);
  const Conflict& c = conflicts.front();
  EXPECT_EQ(c.earlier.name, "fill");
  EXPECT_EQ(c.earlier.call_site, 7u);
  EXPECT_EQ(c.earlier_agent, "stream producer");
  EXPECT_EQ(c.earlier_kind, AccessKind::Write);
  EXPECT_EQ(c.later.name, "sum");
  EXPECT_EQ(c.later.call_site, 9u);
  EXPECT_EQ(c.later_agent, "stream consumer");
  EXPECT_EQ(c.later_kind, AccessKind::Read);
  EXPECT_EQ(c.begin, 1000u);
  EXPECT_EQ(c.end, 2000u);
}

TEST_F(RaceDetectorTest, EachAccessNamesItsOwnOperationWhenAStreamAlternatesOperationsAndCallSites) {
  // A stream's recent descriptions are shared by later operations that match them: three names and call sites in
  // turn must each still name their own accesses.
  issue(producer, "ops.add", {write(0, 64)}, 1);
  issue(producer, "free", {write(64, 128)}, 2);
  issue(producer, "ops.add", {write(128, 192)}, 1);
  issue(producer, "ops.add", {write(192, 256)}, 3);
  issue(producer, "copy", {write(256, 320)}, 1);
  const auto conflicts = issue(consumer, "sum", {read(0, 320)});
  ASSERT_EQ(conflicts.size(), 5u);
  const std::pair<const char*, std::uint32_t> expected[] = {{"ops.add", 1}, {"free", 2}, {"ops.add", 1},
                                                            {"ops.add", 3}, {"copy", 1}};
  for (std::size_t i = 0; i < conflicts.size(); ++i) {
    EXPECT_EQ(conflicts[i].begin, 64 * i);
    EXPECT_EQ(conflicts[i].earlier.name, expected[i].first);
    EXPECT_EQ(conflicts[i].earlier.call_site, expected[i].second);
  }
}

TEST_F(RaceDetectorTest, ABlockAllocatedAgainWithItsSizeForgetsItsReadsAndWrites) {
  issue(producer, "fill", {write(0, 64)});
  issue(consumer, "sum", {read(0, 64)});  // unordered: reported, and kept as history
  detector.forget(0, 64);
  EXPECT_TRUE(issue(producer, "fill", {write(0, 64)}).empty()) << "neither the read nor the write is history now";
  EXPECT_TRUE(issue(consumer, "sum", {read(0, 32)}).size() == 1u) << "the new write is";
  EXPECT_EQ(detector.shadow_ranges(), 2u);
}

TEST_F(RaceDetectorTest, AnEventWaitOrdersTheConsumerAfterTheProducer) {
  issue(producer, "fill", {write(0, 64)});
  const VectorClock recorded = detector.snapshot(producer);  // producer.record()
  detector.join(consumer, recorded);                         // consumer.wait(event)
  EXPECT_TRUE(issue(consumer, "sum", {read(0, 64)}).empty());
}

TEST_F(RaceDetectorTest, AWaitRecordedBeforeTheWriteDoesNotOrderIt) {
  const VectorClock too_early = detector.snapshot(producer);
  issue(producer, "fill", {write(0, 64)});
  detector.join(consumer, too_early);
  EXPECT_EQ(issue(consumer, "sum", {read(0, 64)}).size(), 1u);
}

TEST_F(RaceDetectorTest, AHostSynchronizeOrdersWhatTheHostQueuesLater) {
  issue(producer, "fill", {write(0, 64)});
  detector.join(host, producer);  // producer.synchronize()
  EXPECT_TRUE(issue(consumer, "sum", {read(0, 64)}).empty());
}

TEST_F(RaceDetectorTest, AStreamLearnsEveryChangeOfTheHostsClockBetweenItsOperations) {
  // The consumer's operations in a loop follow no new host work, and its joins of the host's clock are skipped
  // (Note [Operations that follow no new host work]); each way the host's clock changes must still reach it.
  issue(consumer, "sum", {read(4096, 4160)});
  issue(consumer, "sum", {read(4096, 4160)});
  issue(producer, "fill", {write(0, 64)});
  detector.join(host, producer);  // producer.synchronize()
  EXPECT_TRUE(issue(consumer, "sum", {read(0, 64)}).empty()) << "a synchronize of another stream";

  issue(producer, "fill", {write(64, 128)});
  detector.join(host, detector.snapshot(producer));  // an event's synchronize
  EXPECT_TRUE(issue(consumer, "sum", {read(64, 128)}).empty()) << "an event's synchronize";

  EXPECT_TRUE(detector.operation(host, OperationInfo{"host write", 0}, {write(128, 192)}).empty());
  EXPECT_TRUE(issue(consumer, "sum", {read(128, 192)}).empty()) << "the host's own operation";

  issue(producer, "fill", {write(192, 256)});
  EXPECT_EQ(issue(consumer, "sum", {read(192, 256)}).size(), 1u) << "no synchronize: still a race";
}

TEST_F(RaceDetectorTest, OrderingIsTransitive) {
  const AgentId third = detector.new_agent("stream third");
  issue(producer, "fill", {write(0, 64)});
  detector.join(consumer, detector.snapshot(producer));
  issue(consumer, "scale", {read(0, 64), write(64, 128)});
  detector.join(third, detector.snapshot(consumer));
  EXPECT_TRUE(issue(third, "copy", {write(0, 64), read(64, 128)}).empty());
}

TEST_F(RaceDetectorTest, ProgramOrderOnOneStreamNeedsNoWait) {
  issue(producer, "fill", {write(0, 64)});
  issue(producer, "scale", {read(0, 64), write(0, 64)});
  EXPECT_TRUE(issue(producer, "sum", {read(0, 64)}).empty());
}

TEST_F(RaceDetectorTest, ReadsOnTwoStreamsDoNotConflict) {
  issue(producer, "fill", {write(0, 64)});
  detector.join(host, producer);
  EXPECT_TRUE(issue(producer, "sum", {read(0, 64)}).empty());
  EXPECT_TRUE(issue(consumer, "sum", {read(0, 64)}).empty());
}

TEST_F(RaceDetectorTest, AWriteAfterAnUnorderedReadIsReported) {
  detector.operation(host, {"host fill", 0}, {write(0, 64)});
  issue(producer, "copy to host", {read(0, 64)});
  const auto conflicts = issue(consumer, "fill", {write(0, 64)});
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].earlier_kind, AccessKind::Read);
  EXPECT_EQ(conflicts[0].earlier.name, "copy to host");
  EXPECT_EQ(conflicts[0].later_kind, AccessKind::Write);
}

// Exactly one conflict, over [begin, end).
void expect_one_over(const std::vector<Conflict>& conflicts, std::uintptr_t begin, std::uintptr_t end) {
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].begin, begin);
  EXPECT_EQ(conflicts[0].end, end);
}

TEST_F(RaceDetectorTest, OnlyTheOverlappingBytesAreReported) {
  issue(producer, "fill", {write(100, 200)});
  expect_one_over(issue(consumer, "fill", {write(150, 400)}), 150, 200);
}

TEST_F(RaceDetectorTest, DisjointRangesNeverConflict) {
  issue(producer, "fill", {write(0, 100)});
  EXPECT_TRUE(issue(consumer, "fill", {write(100, 200)}).empty());
}

TEST_F(RaceDetectorTest, OneEarlierOperationOverAdjacentRangesIsOneReport) {
  issue(producer, "two halves", {write(0, 50), write(50, 100)});
  expect_one_over(issue(consumer, "fill", {write(0, 100)}), 0, 100);
}

TEST_F(RaceDetectorTest, AHostAccessAfterAQueuedCopyIsARaceUntilTheHostWaits) {
  issue(producer, "copy host to device", {read(0, 64)});
  // The host writes the buffer the copy may still be reading.
  const auto conflicts = detector.operation(host, {"host write", 0}, {write(0, 64)});
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].earlier_agent, "stream producer");
  EXPECT_EQ(conflicts[0].later_agent, "host thread");
  detector.join(host, producer);
  EXPECT_TRUE(detector.operation(host, {"host write", 0}, {write(0, 64)}).empty());
}

TEST_F(RaceDetectorTest, AFreeOrderedAfterItsUsesIsCleanAndAnyUseAfterItIsReported) {
  issue(producer, "fill", {write(0, 64)});
  EXPECT_TRUE(issue(producer, "free", {{0, 64, AccessKind::Free}}).empty());
  const auto conflicts = issue(producer, "sum", {read(0, 64)});  // ordered after the free, still a use after it
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].earlier_kind, AccessKind::Free);
}

TEST_F(RaceDetectorTest, AFreeWhileAnotherStreamStillUsesTheMemoryIsReported) {
  issue(consumer, "sum", {read(0, 64)});
  const auto conflicts = issue(producer, "free", {{0, 64, AccessKind::Free}});
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].earlier.name, "sum");
  EXPECT_EQ(conflicts[0].later_kind, AccessKind::Free);
}

TEST_F(RaceDetectorTest, AFreeKeptBehindOtherWorkIsOrderedAfterEitherClockItFollowsWithoutItsStreamLearningIt) {
  const AgentId third = detector.new_agent("stream third");
  issue(consumer, "sum", {read(0, 64)});
  issue(third, "scale", {read(64, 128), write(512, 576)});
  const VectorClock consumer_done = detector.snapshot(consumer);
  const VectorClock third_done = detector.snapshot(third);
  detector.enqueue(host, producer);
  EXPECT_TRUE(detector.operation(producer, {"free", 0}, {{0, 128, AccessKind::Free}},
                                 OrderedAfter{&consumer_done, &third_done})
                  .empty());
  // Followed by one of the two only: the other's read is reported.
  issue(consumer, "sum", {read(256, 320)});
  issue(third, "scale", {read(320, 384)});
  const VectorClock consumer_later = detector.snapshot(consumer);
  detector.enqueue(host, producer);
  const auto conflicts =
      detector.operation(producer, {"free", 0}, {{256, 384, AccessKind::Free}}, OrderedAfter{&consumer_later});
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].earlier_agent, "stream third");
  // The producer did not learn either clock: its read of what the third stream wrote before its clock is unordered.
  EXPECT_EQ(issue(producer, "copy", {read(512, 576)}).size(), 1u);
}

TEST_F(RaceDetectorTest, ANewAllocationForgetsTheRangesHistory) {
  issue(producer, "fill", {write(0, 64)});
  issue(producer, "free", {{0, 64, AccessKind::Free}});
  detector.forget(0, 64);
  EXPECT_TRUE(issue(consumer, "fill", {write(0, 64)}).empty());
  EXPECT_EQ(detector.shadow_ranges(), 1u);
}

TEST_F(RaceDetectorTest, ARaceIsReportedOnceThenTheHistoryMovesOn) {
  issue(producer, "fill", {write(0, 64)});
  EXPECT_EQ(issue(consumer, "fill", {write(0, 64)}).size(), 1u);
  EXPECT_TRUE(issue(consumer, "scale", {read(0, 64), write(0, 64)}).empty());
}

// Note [Reused blocks]
std::shared_ptr<const Reuse> handed_out_again(VectorClock released_after = {}) {
  auto reuse = std::make_shared<Reuse>();
  reuse->released_after = std::move(released_after);
  reuse->freed = OperationInfo{"free", 11};
  reuse->handed_out = OperationInfo{"allocation", 12};
  reuse->allocating_agent = "stream producer";
  return reuse;
}

TEST_F(RaceDetectorTest, ABlockHandedOutAgainKeepsItsHistoryAndNamesTheReuse) {
  issue(producer, "copy", {write(0, 64)});
  detector.join(consumer, detector.snapshot(producer));
  issue(consumer, "forward", {read(0, 64)});
  detector.reused(0, 64, handed_out_again());
  const auto conflicts = issue(producer, "next copy", {write(0, 64)});
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].earlier.name, "forward");
  ASSERT_NE(conflicts[0].reuse, nullptr);
  EXPECT_EQ(conflicts[0].reuse->freed.call_site, 11u);
  EXPECT_EQ(conflicts[0].reuse->handed_out.call_site, 12u);
}

TEST_F(RaceDetectorTest, WhatTheAllocatorWaitedForAtTheFreeOrdersTheReuse) {
  issue(producer, "copy", {write(0, 64)});
  detector.join(consumer, detector.snapshot(producer));
  issue(consumer, "forward", {read(0, 64)});
  detector.reused(0, 64, handed_out_again(detector.snapshot(consumer)));  // record_stream(consumer)
  EXPECT_TRUE(issue(producer, "next copy", {write(0, 64)}).empty());
}

TEST_F(RaceDetectorTest, AReuseMarkOrdersOnlyTheBlocksPreviousHolder) {
  issue(producer, "copy", {write(0, 64)});
  detector.join(consumer, detector.snapshot(producer));
  issue(consumer, "forward", {read(0, 64)});
  detector.reused(0, 64, handed_out_again(detector.snapshot(consumer)));
  issue(producer, "next copy", {write(0, 64)});  // replaces the old history, and the mark with it
  EXPECT_EQ(issue(consumer, "next forward", {read(0, 64)}).size(), 1u) << "no wait orders it after the copy";
}

TEST_F(RaceDetectorTest, AReuseOfPartOfABlockChecksOnlyThoseBytes) {
  issue(producer, "copy", {write(0, 128)});
  detector.join(consumer, detector.snapshot(producer));
  issue(consumer, "forward", {read(0, 128)});
  detector.reused(64, 128, handed_out_again());
  EXPECT_TRUE(issue(producer, "write outside the reused bytes", {write(200, 300)}).empty());
  const auto conflicts = issue(producer, "next copy", {write(0, 128)});
  ASSERT_EQ(conflicts.size(), 2u);  // the old bytes race plainly, the reused ones as a reuse
  EXPECT_EQ(conflicts[0].reuse, nullptr);
  EXPECT_NE(conflicts[1].reuse, nullptr);
  EXPECT_EQ(conflicts[1].begin, 64u);
}

// Note [Agents that are gone]
TEST_F(RaceDetectorTest, AGoneAgentStaysWhileAHistoryHoldsItsAccess) {
  issue(producer, "fill", {write(0, 64)});
  EXPECT_TRUE(detector.drop_gone({producer}, {}).empty());
  const auto conflicts = issue(consumer, "sum", {read(0, 64)});
  ASSERT_EQ(conflicts.size(), 1u) << "the race with the gone stream's fill is still found";
  EXPECT_EQ(conflicts[0].earlier_agent, "stream producer");
}

TEST_F(RaceDetectorTest, AGoneAgentLeavesEveryClockOnceNoHistoryHoldsIt) {
  issue(producer, "fill", {write(0, 64)});
  detector.join(host, producer);  // producer.synchronize()
  issue(consumer, "overwrite", {write(0, 64)});  // ordered after the fill: the history is the consumer's now
  ASSERT_EQ(detector.snapshot(consumer).get(producer), 1u);
  EXPECT_EQ(detector.drop_gone({producer}, {}), std::vector<AgentId>{producer});
  EXPECT_EQ(detector.snapshot(consumer).get(producer), 0u);
  EXPECT_EQ(detector.snapshot(host).get(producer), 0u);
  EXPECT_EQ(detector.agents(), 2u);
  EXPECT_EQ(detector.largest_clock(), 1u);  // the consumer's own entry (the host made no operation)
  EXPECT_TRUE(issue(consumer, "read", {read(0, 64)}).empty());
}

TEST_F(RaceDetectorTest, AGoneAgentWhoseHistoryIsAFreeIsDroppedAndAUseAfterItStillNamesIt) {
  issue(producer, "fill", {write(0, 64)});
  issue(producer, "free", {{0, 64, AccessKind::Free}});
  EXPECT_EQ(detector.drop_gone({producer}, {}), std::vector<AgentId>{producer});
  const auto conflicts = issue(consumer, "read", {read(0, 64)});
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].earlier_kind, AccessKind::Free);
  EXPECT_EQ(conflicts[0].earlier_agent, "stream producer");
}

TEST_F(RaceDetectorTest, AGoneAgentInUseElsewhereStays) {
  EXPECT_TRUE(detector.drop_gone({producer}, {producer}).empty());
  EXPECT_EQ(detector.agents(), 3u);
}

TEST_F(RaceDetectorTest, ASnapshotNamingADroppedAgentJoinsWithoutIt) {
  issue(producer, "fill", {write(0, 64)});
  VectorClock recorded = detector.snapshot(producer);  // an event recorded on the producer, kept by the caller
  issue(consumer, "overwrite", {write(0, 64)});  // races (reported), and replaces the history
  detector.drop_gone({producer}, {});
  detector.join(consumer, recorded);
  EXPECT_EQ(detector.snapshot(consumer).get(producer), 0u);
  detector.prune(recorded);
  EXPECT_EQ(recorded.get(producer), 0u);
}

// A clock with these (agent, clock) entries.
VectorClock clock_of(std::initializer_list<std::pair<AgentId, std::uint64_t>> entries) {
  VectorClock clock;
  for (const auto& [agent, value] : entries) clock.set(agent, value);
  return clock;
}

TEST(VectorClockTest, JoinTakesTheLaterOfEachEntry) {
  VectorClock a = clock_of({{1, 5}, {3, 1}});
  a.join(clock_of({{1, 2}, {2, 7}, {3, 4}}));
  EXPECT_EQ(a.get(1), 5u);
  EXPECT_EQ(a.get(2), 7u);
  EXPECT_EQ(a.get(3), 4u);
  EXPECT_EQ(a.get(4), 0u);
  EXPECT_EQ(a.size(), 3u);
}

TEST(VectorClockTest, JoinOfAnOlderClockChangesNothingAndANewerEntryIsLearned) {
  VectorClock a = clock_of({{1, 5}, {4, 3}});
  EXPECT_FALSE(a.join(clock_of({{1, 2}, {4, 3}})));
  EXPECT_EQ(a.get(1), 5u);
  EXPECT_EQ(a.get(4), 3u);
  EXPECT_EQ(a.size(), 2u);
  EXPECT_TRUE(a.join(clock_of({{1, 1}, {4, 9}})));  // the last entry is new, after one that teaches nothing
  EXPECT_EQ(a.get(4), 9u);
  a.join(clock_of({{7, 1}}));  // an agent past every entry
  EXPECT_EQ(a.get(7), 1u);
  EXPECT_EQ(a.size(), 3u);
}

TEST(VectorClockTest, AdvanceStepsTheAgentsOwnEntryAndAddsAMissingOne) {
  VectorClock a = clock_of({{1, 5}, {3, 1}});
  EXPECT_EQ(a.advance(3), 2u);
  EXPECT_EQ(a.advance(2), 1u);  // between two entries: kept in order
  EXPECT_EQ(a.advance(0), 1u);  // before every entry
  EXPECT_EQ(a.advance(2), 2u);
  EXPECT_EQ(a.get(1), 5u);
  EXPECT_EQ(a.get(2), 2u);
  EXPECT_EQ(a.get(3), 2u);
  EXPECT_EQ(a.size(), 4u);
  a.join(clock_of({{0, 1}, {1, 6}, {2, 2}, {3, 2}}));  // the order join reads entries in is kept
  EXPECT_EQ(a.get(0), 1u);
  EXPECT_EQ(a.get(1), 6u);
  EXPECT_EQ(a.size(), 4u);
}

TEST(VectorClockTest, DropRemovesTheMarkedAgentsOnly) {
  VectorClock a = clock_of({{1, 5}, {3, 1}, {9, 2}});  // 9: beyond the marks, kept
  a.drop({false, true, false, false});
  EXPECT_EQ(a.get(1), 0u);
  EXPECT_EQ(a.get(3), 1u);
  EXPECT_EQ(a.get(9), 2u);
  EXPECT_EQ(a.size(), 2u);
}

// 4096 float32 elements: x[::2] and x[1::2] as the sanitizer sees them.
constexpr std::uintptr_t kBase = 1 << 20, kEnd = kBase + 4096 * 4;
Access evens(AccessKind kind) { return stepped(kind, kBase, kEnd, 8, 4); }
Access odds(AccessKind kind) { return stepped(kind, kBase + 4, kEnd, 8, 4); }

TEST_F(RaceDetectorTest, EvenAndOddElementsWrittenOnTwoUnorderedStreamsAreNoRace) {
  EXPECT_TRUE(issue(producer, "copy", {evens(AccessKind::Write)}).empty());
  EXPECT_TRUE(issue(consumer, "copy", {odds(AccessKind::Write)}).empty());
}

TEST_F(RaceDetectorTest, TheSameElementsWrittenOnTwoUnorderedStreamsAreARaceOnTheirFirstSharedRun) {
  issue(producer, "copy", {evens(AccessKind::Write)}, 3);
  const auto conflicts = issue(consumer, "fill", {stepped(AccessKind::Write, kBase + 64, kEnd, 16, 4)}, 4);
  ASSERT_EQ(conflicts.size(), 1u);  // x[16::4] lies inside x[::2]
  EXPECT_EQ(conflicts[0].earlier.call_site, 3u);
  EXPECT_EQ(conflicts[0].begin, kBase + 64);
  EXPECT_EQ(conflicts[0].end, kBase + 68);
}

TEST_F(RaceDetectorTest, AContiguousReadOverSteppedWritesIsCheckedAgainstEachAndOrderedByAWait) {
  issue(producer, "copy", {evens(AccessKind::Write)}, 1);
  detector.join(consumer, detector.snapshot(producer));  // the consumer waits for the evens only
  AgentId other = detector.new_agent("stream other");
  issue(other, "copy", {odds(AccessKind::Write)}, 2);
  const auto conflicts = issue(consumer, "sum", {read(kBase, kBase + 16)}, 5);
  ASSERT_EQ(conflicts.size(), 1u);  // the odds' writer alone is unordered
  EXPECT_EQ(conflicts[0].earlier.call_site, 2u);
  EXPECT_EQ(conflicts[0].earlier_agent, "stream other");
  EXPECT_EQ(conflicts[0].begin, kBase + 4);
  EXPECT_EQ(conflicts[0].end, kBase + 8);
}

TEST_F(RaceDetectorTest, ASteppedAccessIsCheckedAgainstContiguousHistoryWhereItSharesBytes) {
  issue(producer, "fill", {write(kBase, kBase + 4)}, 1);  // element 0 only
  EXPECT_TRUE(issue(consumer, "copy", {odds(AccessKind::Write)}).empty());
  const auto conflicts = issue(consumer, "copy", {evens(AccessKind::Read)}, 2);
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].earlier.call_site, 1u);
  EXPECT_EQ(conflicts[0].later_kind, AccessKind::Read);
}

TEST_F(RaceDetectorTest, AWriteOfTheSameElementsOrAContiguousWriteOverThemReplacesSteppedHistory) {
  for (int i = 0; i < 100; ++i) issue(producer, "copy", {evens(AccessKind::Write)});
  EXPECT_EQ(detector.shadow_ranges(), 1u);  // one stepped access kept, not a hundred
  issue(producer, "fill", {write(kBase, kEnd)});
  EXPECT_EQ(detector.shadow_ranges(), 1u);  // the range alone
  detector.join(consumer, detector.snapshot(producer));
  EXPECT_TRUE(issue(consumer, "sum", {evens(AccessKind::Read)}).empty());
}

TEST_F(RaceDetectorTest, AWriteAfterAnUnorderedSteppedReadIsARaceUnlessTheReuseMarkOrdersIt) {
  issue(producer, "copy", {write(kBase, kEnd)});
  detector.join(consumer, detector.snapshot(producer));
  issue(consumer, "forward", {evens(AccessKind::Read)}, 7);
  EXPECT_TRUE(issue(producer, "write the odds", {odds(AccessKind::Write)}).empty()) << "no byte shared";
  detector.reused(kBase, kEnd, handed_out_again());
  auto conflicts = issue(producer, "next copy", {write(kBase, kBase + 64)});
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].earlier.call_site, 7u);
  EXPECT_EQ(conflicts[0].earlier_kind, AccessKind::Read);
  EXPECT_NE(conflicts[0].reuse, nullptr);
  EXPECT_EQ(conflicts[0].begin, kBase);
  EXPECT_EQ(conflicts[0].end, kBase + 4);

  issue(consumer, "forward again", {evens(AccessKind::Read)});
  detector.reused(kBase, kEnd, handed_out_again(detector.snapshot(consumer)));  // record_stream(consumer)
  EXPECT_TRUE(issue(producer, "copy after the wait", {write(kBase + 64, kEnd)}).empty());
}

TEST_F(RaceDetectorTest, AnAgentWhoseSteppedAccessIsKeptIsNotDropped) {
  AgentId other = detector.new_agent("stream other");
  issue(other, "copy", {evens(AccessKind::Write)});
  EXPECT_TRUE(detector.drop_gone({other}, {}).empty()) << "its access is still compared against";
  issue(other, "fill", {write(kBase, kEnd)});
  EXPECT_TRUE(detector.drop_gone({other}, {}).empty()) << "the fill is history too";
  detector.forget(kBase, kEnd);
  EXPECT_EQ(detector.drop_gone({other}, {}), std::vector<AgentId>{other});
}

TEST_F(RaceDetectorTest, ANewAllocationForgetsSteppedHistoryAndAFreeIsReportedToAnySteppedAccessAfterIt) {
  issue(producer, "copy", {evens(AccessKind::Write)});
  detector.forget(kBase, kEnd);
  EXPECT_EQ(detector.shadow_ranges(), 0u);
  EXPECT_TRUE(issue(consumer, "copy", {evens(AccessKind::Write)}).empty());
  issue(consumer, "free", {stepped(AccessKind::Free, kBase, kEnd, 8, 4)});
  EXPECT_EQ(issue(consumer, "copy", {evens(AccessKind::Read)}).size(), 1u);  // ordered, but after the free
}

}  // namespace
}  // namespace cuweave::sanitizer
