// Note [Copy threads chosen as transfers run]: segments go round the candidate thread counts until each has
// a few samples, then use the fastest (fewer threads unless more are clearly faster), trying a neighbour
// every so often; segments shared with another transfer are not samples.
#include "cuweave/copy_thread_tuner.hpp"

#include <map>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace cuweave {
namespace {

constexpr std::size_t kBytes = std::size_t{48} << 20;

// Runs `segments` measured segments of one transfer, each at the rate `rate_of` gives its thread count;
// returns how many segments each count was used for.
template <typename RateOf>
std::map<std::size_t, int> run_segments(CopyThreadTuner& tuner, int segments, RateOf rate_of) {
  std::map<std::size_t, int> used;
  CopyThreadTuner::Transfer transfer(tuner);
  for (int i = 0; i < segments; ++i) {
    const CopyThreadTuner::Segment segment = transfer.begin_segment(/*measurable=*/true);
    ++used[segment.threads];
    transfer.end_segment(segment, kBytes, static_cast<double>(kBytes) / rate_of(segment.threads));
  }
  return used;
}

double gb(double value) { return value * 1e9; }

TEST(CopyThreadTunerTest, TriesEveryCandidateBeforeChoosing) {
  CopyThreadTuner tuner({16, 4, 8, 12});
  EXPECT_FALSE(tuner.settled());
  EXPECT_EQ(tuner.chosen(), 16u) << "before any measurement the most threads";
  const auto used = run_segments(tuner, 4 * CopyThreadTuner::kSamplesToChoose - 1, [](std::size_t) { return gb(1); });
  EXPECT_FALSE(tuner.settled()) << "one candidate is a sample short";
  for (std::size_t threads : {4u, 8u, 12u, 16u}) EXPECT_GE(used.at(threads), 2) << threads;
  run_segments(tuner, 1, [](std::size_t) { return gb(1); });
  EXPECT_TRUE(tuner.settled());
  for (const CopyThreadTuner::Candidate& c : tuner.candidates()) {
    EXPECT_EQ(c.samples, CopyThreadTuner::kSamplesToChoose) << c.threads;
    EXPECT_DOUBLE_EQ(c.median_bytes_per_second, gb(1));
  }
}

TEST(CopyThreadTunerTest, ChoosesTheFastestCountAndThenUsesIt) {
  CopyThreadTuner tuner({4, 8, 12, 16});
  const std::map<std::size_t, double> rates{{4, gb(12)}, {8, gb(33)}, {12, gb(30)}, {16, gb(23)}};
  auto rate_of = [&](std::size_t threads) { return rates.at(threads); };
  run_segments(tuner, 4 * CopyThreadTuner::kSamplesToChoose, rate_of);
  ASSERT_TRUE(tuner.settled());
  EXPECT_EQ(tuner.chosen(), 8u);
  const auto used = run_segments(tuner, 10 * CopyThreadTuner::kRetryEvery, rate_of);
  EXPECT_EQ(used.at(8), 10 * static_cast<int>(CopyThreadTuner::kRetryEvery - 1))
      << "one segment in kRetryEvery tries a neighbour";
  EXPECT_EQ(used.at(4) + used.at(12), 10) << "the neighbours below and above, in turn";
  EXPECT_EQ(used.at(4), 5);
  EXPECT_EQ(used.count(16), 0u) << "only neighbours of the choice are tried again";
  EXPECT_EQ(tuner.chosen(), 8u);
}

TEST(CopyThreadTunerTest, PrefersFewerThreadsWhereMoreAreNotClearlyFaster) {
  CopyThreadTuner tuner({4, 8, 12, 16});
  // Where the link sets the pace, every count copies as fast: 8 is within 2% of 16 and 12, 4 is not.
  const std::map<std::size_t, double> rates{{4, gb(40)}, {8, gb(53)}, {12, gb(53.5)}, {16, gb(54)}};
  run_segments(tuner, 4 * CopyThreadTuner::kSamplesToChoose, [&](std::size_t t) { return rates.at(t); });
  EXPECT_EQ(tuner.chosen(), 8u);
}

TEST(CopyThreadTunerTest, FollowsAHostWhoseLoadChanges) {
  CopyThreadTuner tuner({4, 8, 12, 16});
  std::map<std::size_t, double> rates{{4, gb(12)}, {8, gb(30)}, {12, gb(40)}, {16, gb(45)}};
  auto rate_of = [&](std::size_t threads) { return rates.at(threads); };
  run_segments(tuner, 4 * CopyThreadTuner::kSamplesToChoose, rate_of);
  ASSERT_EQ(tuner.chosen(), 16u);
  // Others take cores: 16 threads now take turns with them, 8 do not (H100 lease: 23 vs 33 GB/s).
  rates = {{4, gb(12)}, {8, gb(33)}, {12, gb(28)}, {16, gb(23)}};
  run_segments(tuner, 8 * CopyThreadTuner::kRetryEvery, rate_of);
  EXPECT_EQ(tuner.chosen(), 8u) << "16's median fell below 12's, whose new samples led on to 8";
  const auto candidates = tuner.candidates();
  EXPECT_DOUBLE_EQ(candidates[1].median_bytes_per_second, gb(33));
}

TEST(CopyThreadTunerTest, UnmeasuredSegmentsUseTheChoiceAndAreNotSamples) {
  CopyThreadTuner tuner({4, 8});
  CopyThreadTuner::Transfer transfer(tuner);
  for (int i = 0; i < 10; ++i) {
    const CopyThreadTuner::Segment segment = transfer.begin_segment(/*measurable=*/false);
    EXPECT_EQ(segment.threads, 8u);
    EXPECT_FALSE(segment.measured);
    transfer.end_segment(segment, kBytes, 0.001);
  }
  for (const CopyThreadTuner::Candidate& c : tuner.candidates()) EXPECT_EQ(c.samples, 0u);
}

TEST(CopyThreadTunerTest, SegmentsSharedWithAnotherTransferAreNotSamples) {
  CopyThreadTuner tuner({4, 8});
  {
    CopyThreadTuner::Transfer first(tuner);
    CopyThreadTuner::Transfer second(tuner);
    const CopyThreadTuner::Segment segment = first.begin_segment(/*measurable=*/true);
    EXPECT_FALSE(segment.measured) << "another transfer is running";
    first.end_segment(segment, kBytes, 0.001);
  }
  {
    CopyThreadTuner::Transfer first(tuner);
    const CopyThreadTuner::Segment segment = first.begin_segment(/*measurable=*/true);
    EXPECT_TRUE(segment.measured);
    { CopyThreadTuner::Transfer beside(tuner); }  // began and ended during the segment
    first.end_segment(segment, kBytes, 0.001);
  }
  for (const CopyThreadTuner::Candidate& c : tuner.candidates()) EXPECT_EQ(c.samples, 0u);
  run_segments(tuner, 1, [](std::size_t) { return gb(1); });
  std::size_t samples = 0;
  for (const CopyThreadTuner::Candidate& c : tuner.candidates()) samples += c.samples;
  EXPECT_EQ(samples, 1u) << "a transfer alone is measured";
}

TEST(CopyThreadTunerTest, KeepsOnlyRecentSamples) {
  CopyThreadTuner tuner({16});
  EXPECT_TRUE(tuner.settled()) << "one count: nothing to choose";
  run_segments(tuner, 3, [](std::size_t) { return gb(10); });
  run_segments(tuner, CopyThreadTuner::kSamplesKept, [](std::size_t) { return gb(20); });
  const auto candidates = tuner.candidates();
  ASSERT_EQ(candidates.size(), 1u);
  EXPECT_EQ(candidates[0].samples, CopyThreadTuner::kSamplesKept);
  EXPECT_DOUBLE_EQ(candidates[0].median_bytes_per_second, gb(20));
}

TEST(CopyThreadTunerTest, CandidatesAreSortedWithoutRepeatsOrZero) {
  CopyThreadTuner tuner({8, 0, 4, 8, 2});
  std::vector<std::size_t> counts;
  for (const CopyThreadTuner::Candidate& c : tuner.candidates()) counts.push_back(c.threads);
  EXPECT_EQ(counts, (std::vector<std::size_t>{2, 4, 8}));
  EXPECT_THROW(CopyThreadTuner({0}), std::invalid_argument);
}

}  // namespace
}  // namespace cuweave
