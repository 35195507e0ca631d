// TunedChunks (Note [Copy threads chosen as transfers run]): a segment's sample is the rate of its chunks' host
// copies, whether the chunks overlap in the copy threads or the transfer waited for a slot between them.
#include "cuweave/tuned_chunks.hpp"

#include <chrono>
#include <cstddef>
#include <vector>

#include <gtest/gtest.h>

namespace cuweave {
namespace {

using Clock = TunedChunks::Clock;
using std::chrono::milliseconds;
constexpr std::size_t kChunk = std::size_t{16} << 20;  // 4 chunks a segment

struct Chunk {
  milliseconds start;
  milliseconds end;
};

// The one sample a transfer of `chunks` (one segment) gives a tuner of one candidate, in bytes per second.
double sample_of(const std::vector<Chunk>& chunks) {
  CopyThreadTuner tuner({4});
  {
    TunedChunks tuned(tuner, kChunk, chunks.size() * kChunk);
    const Clock::time_point zero = Clock::now();
    // Reported as the transfer does: chunk k+1 starts before chunk k is reported when the two overlap.
    for (std::size_t k = 0; k < chunks.size(); ++k) {
      tuned.threads_for(k, zero + chunks[k].start);
      if (k > 0) tuned.copied(k - 1, kChunk, zero + chunks[k - 1].end);
    }
    tuned.copied(chunks.size() - 1, kChunk, zero + chunks.back().end);
  }
  EXPECT_EQ(tuner.candidates().at(0).samples, 1u);
  return tuner.candidates().at(0).median_bytes_per_second;
}

TEST(TunedChunksTest, OverlappingChunksCountTheTimeBetweenTheirEnds) {
  // Each chunk 15 ms in the threads, the next one starting 5 ms before it ends: 10 ms a chunk.
  const double rate = sample_of({{milliseconds(0), milliseconds(15)},
                                 {milliseconds(10), milliseconds(25)},
                                 {milliseconds(20), milliseconds(35)},
                                 {milliseconds(30), milliseconds(45)}});
  EXPECT_NEAR(rate, 3.0 * kChunk / 0.030, 1.0);  // the first chunk's bytes and time are left out
}

TEST(TunedChunksTest, TimeWaitingForASlotIsNotCounted) {
  // The third chunk waits a second for its slot (its DMA queued behind other work on the stream).
  const double rate = sample_of({{milliseconds(0), milliseconds(10)},
                                 {milliseconds(10), milliseconds(20)},
                                 {milliseconds(1020), milliseconds(1030)},
                                 {milliseconds(1030), milliseconds(1040)}});
  EXPECT_NEAR(rate, 3.0 * kChunk / 0.030, 1.0);
}

}  // namespace
}  // namespace cuweave
