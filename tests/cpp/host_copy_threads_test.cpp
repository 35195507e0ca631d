// HostCopyThreads splits large host copies across a pool; a copy may be limited to fewer of its threads
// (Note [Copy threads chosen as transfers run]).
#include "cuweave/host_copy_threads.hpp"
#include "cuweave/services.hpp"

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace cuweave {
namespace {

std::vector<unsigned char> pattern(std::size_t bytes) {
  std::vector<unsigned char> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>(i * 131 + i / 4093);
  return data;
}

TEST(HostCopyThreadsTest, CountsToTryRiseToThePoolsSize) {
  HostCopyThreads& pool = services().copy_threads();
  const std::vector<std::size_t> counts = pool.counts_to_try();
  ASSERT_FALSE(counts.empty());
  EXPECT_LE(counts.size(), 4u);
  EXPECT_EQ(counts.back(), pool.threads());
  EXPECT_GE(counts.front(), 1u);
  for (std::size_t i = 1; i < counts.size(); ++i) EXPECT_LT(counts[i - 1], counts[i]);
}

TEST(HostCopyThreadsTest, CopiesEveryByteWhateverTheThreadLimit) {
  HostCopyThreads& pool = services().copy_threads();
  const std::size_t bytes = (std::size_t{9} << 20) + 12345;  // pieces of unequal size, a ragged end
  const std::vector<unsigned char> source = pattern(bytes);
  for (std::size_t threads : {0ul, 1ul, 2ul, 3ul, pool.threads(), pool.threads() + 5}) {
    for (bool streaming : {false, true}) {
      std::vector<unsigned char> destination(bytes, 0);
      pool.copy(destination.data(), source.data(), bytes, streaming, threads);
      EXPECT_EQ(std::memcmp(destination.data(), source.data(), bytes), 0) << threads << " threads";
    }
  }
}

TEST(HostCopyThreadsTest, ACopyLimitedToOneThreadIsCopiedByItsCallerAlone) {
  HostCopyThreads& pool = services().copy_threads();
  const std::size_t bytes = std::size_t{8} << 20;
  const std::vector<unsigned char> source = pattern(bytes);
  std::vector<unsigned char> destination(bytes, 0);
  HostCopyThreads::Copy copy;
  pool.start(copy, destination.data(), source.data(), bytes, /*streaming=*/false, /*threads=*/1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // ample time for a worker to copy it
  EXPECT_EQ(std::accumulate(destination.begin(), destination.end(), 0ul), 0ul) << "a worker took the piece";
  pool.finish(copy);
  EXPECT_EQ(std::memcmp(destination.data(), source.data(), bytes), 0);
}

TEST(HostCopyThreadsTest, LimitedAndUnlimitedCopiesInThePoolAtOnceBothFinish) {
  HostCopyThreads& pool = services().copy_threads();
  const std::size_t bytes = std::size_t{16} << 20;
  const std::vector<unsigned char> source = pattern(bytes);
  std::vector<unsigned char> narrow(bytes, 0);
  std::vector<unsigned char> wide(bytes, 0);
  HostCopyThreads::Copy first;
  HostCopyThreads::Copy second;
  pool.start(first, narrow.data(), source.data(), bytes, /*streaming=*/true, /*threads=*/2);
  pool.start(second, wide.data(), source.data(), bytes, /*streaming=*/true);
  pool.finish(second);
  pool.finish(first);
  EXPECT_EQ(std::memcmp(narrow.data(), source.data(), bytes), 0);
  EXPECT_EQ(std::memcmp(wide.data(), source.data(), bytes), 0);
}

// A staged transfer times a chunk's copy by when its last piece was done (TunedChunks), not by when the transfer's
// thread came back to finish it, perhaps after waiting for a slot.
TEST(HostCopyThreadsTest, ACopyKnowsWhenItsLastPieceWasDoneNotWhenItWasFinished) {
  HostCopyThreads& pool = services().copy_threads();
  if (pool.threads() < 2) GTEST_SKIP() << "one thread: the caller copies every piece inside finish()";
  const std::size_t bytes = std::size_t{8} << 20;
  const std::vector<unsigned char> source = pattern(bytes);
  std::vector<unsigned char> destination(bytes, 0);
  HostCopyThreads::Copy copy;
  const auto started = std::chrono::steady_clock::now();
  pool.start(copy, destination.data(), source.data(), bytes, /*streaming=*/false, /*threads=*/2);
  // Copied by the worker alone: this thread only watches it finish.
  const auto deadline = started + std::chrono::seconds(30);
  while (!copy.done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the worker never copied the pieces";
    std::this_thread::yield();
  }
  EXPECT_EQ(std::memcmp(destination.data(), source.data(), bytes), 0);
  // A time stamped by finish() itself, as the tuner once took, would come after this.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto finishing = std::chrono::steady_clock::now();
  pool.finish(copy);
  EXPECT_GE(copy.finished_at(), started);
  EXPECT_LT(copy.finished_at(), finishing);
}

}  // namespace
}  // namespace cuweave
