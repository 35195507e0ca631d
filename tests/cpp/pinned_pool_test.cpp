// Note [Pinned pool reuse]: blocks are cached by size class, and a block a queued copy still uses returns to
// the cache only once that copy's event has completed.
#include "cuweave/pinned_pool.hpp"

#include <cstddef>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/event_pool.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using testing::Gate;
using testing::independent_stream;

constexpr std::size_t kKiB = std::size_t{1} << 10;
constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(PinnedPoolSizeClassTest, SmallRequestsShareTheSmallestClass) {
  EXPECT_EQ(PinnedPool::size_class(0), 512u);
  EXPECT_EQ(PinnedPool::size_class(1), 512u);
  EXPECT_EQ(PinnedPool::size_class(512), 512u);
}

TEST(PinnedPoolSizeClassTest, UpToOneMiBClassesArePowersOfTwo) {
  EXPECT_EQ(PinnedPool::size_class(513), 1 * kKiB);
  EXPECT_EQ(PinnedPool::size_class(1 * kKiB), 1 * kKiB);
  EXPECT_EQ(PinnedPool::size_class(1 * kKiB + 1), 2 * kKiB);
  EXPECT_EQ(PinnedPool::size_class(600 * kKiB), 1 * kMiB);
  EXPECT_EQ(PinnedPool::size_class(1 * kMiB), 1 * kMiB);
}

TEST(PinnedPoolSizeClassTest, AboveOneMiBEachPowerOfTwoHasFourClasses) {
  EXPECT_EQ(PinnedPool::size_class(1 * kMiB + 1), 1 * kMiB + 256 * kKiB);
  EXPECT_EQ(PinnedPool::size_class(3 * kMiB), 3 * kMiB);
  EXPECT_EQ(PinnedPool::size_class(4 * kMiB + 1), 5 * kMiB);
  EXPECT_EQ(PinnedPool::size_class(7 * kMiB + 1), 8 * kMiB);
}

TEST(PinnedPoolSizeClassTest, AboveOneMiBAClassWastesUnderAQuarterOfTheRequest) {
  std::size_t previous = 0;
  for (std::size_t bytes = 1 * kMiB + 1; bytes < 64 * kMiB; bytes += 12345) {
    const std::size_t capacity = PinnedPool::size_class(bytes);
    ASSERT_GE(capacity, bytes);
    ASSERT_LT((capacity - bytes) * 4, bytes) << "request of " << bytes << " bytes";
    ASSERT_GE(capacity, previous) << "a larger request got a smaller class";
    previous = capacity;
  }
}

// Each test has a pool of its own, over a tracker and events of its own (Note [One owner for the core's
// services]): it starts with an empty cache and nothing pending, whatever the process's pool holds.
class PinnedPoolTest : public ::testing::Test {
 protected:
  void TearDown() override {
    backend().devices().synchronize_device(0);
    lifetimes.collect();
    pool.empty_cache();
  }

  EventPool events{backend().streams()};
  LifetimeTracker lifetimes{backend().streams(), events};
  PinnedPool pool{backend().memory(), lifetimes};
};

TEST_F(PinnedPoolTest, APoolOfItsOwnKeepsItsBlocksApartFromTheProcesss) {
  auto block = pool.allocate(64 * kKiB);
  void* const memory = block->data();
  const PinnedPoolStats process_before = services().pinned().stats();
  block.reset();  // back to this pool's cache, not the process's
  EXPECT_EQ(pool.stats().cached_blocks, 1u);
  EXPECT_EQ(services().pinned().stats().cached_blocks, process_before.cached_blocks);
  auto again = pool.allocate(64 * kKiB);
  EXPECT_EQ(again->data(), memory);
}

TEST_F(PinnedPoolTest, ReturnedBlockServesTheNextRequestOfItsSizeClass) {
  const PinnedPoolStats before = pool.stats();
  auto first = pool.allocate(3000);
  EXPECT_EQ(first->size(), 3000u);
  EXPECT_EQ(first->capacity(), 4 * kKiB);
  EXPECT_TRUE(backend().memory().is_pinned(first->data()));
  void* const memory = first->data();
  first.reset();

  auto second = pool.allocate(4000);  // another size, the same 4 KiB class
  EXPECT_EQ(second->data(), memory);
  EXPECT_EQ(second->size(), 4000u);
  const PinnedPoolStats after = pool.stats();
  EXPECT_EQ(after.misses, before.misses + 1);
  EXPECT_EQ(after.hits, before.hits + 1);
}

TEST_F(PinnedPoolTest, OtherSizeClassesDoNotShareBlocks) {
  auto small = pool.allocate(4 * kKiB);
  void* const small_memory = small->data();
  small.reset();

  auto large = pool.allocate(8 * kKiB);
  EXPECT_NE(large->data(), small_memory);
  const PinnedPoolStats stats = pool.stats();
  EXPECT_EQ(stats.cached_blocks, 1u);  // the 4 KiB block waits for a request of its class
  EXPECT_EQ(stats.cached_bytes, 4 * kKiB);
}

TEST_F(PinnedPoolTest, LiveBlocksAreNeverHandedOutTwice) {
  constexpr int kBlocks = 8;
  std::vector<std::shared_ptr<PinnedBlock>> blocks;
  std::set<void*> memory;
  for (int i = 0; i < kBlocks; ++i) {
    blocks.push_back(pool.allocate(16 * kKiB));
    memory.insert(blocks.back()->data());
  }
  EXPECT_EQ(memory.size(), static_cast<std::size_t>(kBlocks));

  blocks.clear();
  const PinnedPoolStats returned = pool.stats();
  std::set<void*> again;
  for (int i = 0; i < kBlocks; ++i) {
    blocks.push_back(pool.allocate(16 * kKiB));
    again.insert(blocks.back()->data());
  }
  EXPECT_EQ(again, memory);  // the same blocks, each once
  EXPECT_EQ(pool.stats().misses, returned.misses);
}

TEST_F(PinnedPoolTest, TryAllocateCachedNeverAsksTheBackend) {
  const PinnedPoolStats before = pool.stats();
  EXPECT_EQ(pool.try_allocate_cached(32 * kKiB), nullptr);
  const PinnedPoolStats empty = pool.stats();
  EXPECT_EQ(empty.misses, before.misses);
  EXPECT_EQ(empty.in_use_blocks, before.in_use_blocks);

  auto block = pool.allocate(32 * kKiB);
  void* const memory = block->data();
  block.reset();
  auto cached = pool.try_allocate_cached(30 * kKiB);
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(cached->data(), memory);
}

TEST_F(PinnedPoolTest, StatsCountCapacityInUseAndCached) {
  const PinnedPoolStats before = pool.stats();
  auto a = pool.allocate(3000);       // 4 KiB class
  auto b = pool.allocate(5 * kKiB);  // 8 KiB class
  PinnedPoolStats stats = pool.stats();
  EXPECT_EQ(stats.in_use_bytes, before.in_use_bytes + 12 * kKiB);
  EXPECT_EQ(stats.in_use_blocks, before.in_use_blocks + 2);
  EXPECT_GE(stats.peak_in_use_bytes, stats.in_use_bytes);

  a.reset();
  stats = pool.stats();
  EXPECT_EQ(stats.in_use_bytes, before.in_use_bytes + 8 * kKiB);
  EXPECT_EQ(stats.cached_bytes, 4 * kKiB);
  EXPECT_EQ(stats.cached_blocks, 1u);
  EXPECT_GE(stats.peak_in_use_bytes, before.in_use_bytes + 12 * kKiB);  // the peak stays
}

TEST_F(PinnedPoolTest, EmptyCacheFreesCachedBlocksAndKeepsLiveOnes) {
  auto live = pool.allocate(64 * kKiB);
  auto returned = pool.allocate(64 * kKiB);
  void* const returned_memory = returned->data();
  returned.reset();

  EXPECT_EQ(pool.empty_cache(), 64 * kKiB);
  EXPECT_FALSE(backend().memory().is_pinned(returned_memory));  // given back to the backend
  EXPECT_TRUE(backend().memory().is_pinned(live->data()));
  EXPECT_EQ(pool.stats().cached_bytes, 0u);

  const PinnedPoolStats before = pool.stats();
  auto fresh = pool.allocate(64 * kKiB);
  EXPECT_EQ(pool.stats().misses, before.misses + 1);
  EXPECT_NE(fresh->data(), live->data());
}

TEST_F(PinnedPoolTest, OneOffResultSizeStaysInOrdinaryMemory) {
  // Note [Pinned results for recurring sizes]. A size class of this test's own: the pool remembers the classes
  // asked for as long as the process lives, so only the process's first run of this test sees a first request.
  static bool ran_before = false;
  if (std::exchange(ran_before, true)) GTEST_SKIP() << "needs a fresh process (CTest gives each test its own)";
  constexpr std::size_t kBytes = 5 * kMiB + 17;
  const PinnedPoolStats before = pool.stats();
  EXPECT_EQ(pool.allocate_result(kBytes), nullptr);
  EXPECT_EQ(pool.stats().misses, before.misses);

  auto second = pool.allocate_result(kBytes);
  ASSERT_NE(second, nullptr);  // the class recurs: worth a block that later requests reuse
  void* const memory = second->data();
  second.reset();
  auto third = pool.allocate_result(kBytes);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->data(), memory);
}

TEST_F(PinnedPoolTest, CachedBlockServesEvenTheFirstResultOfItsClass) {
  constexpr std::size_t kBytes = 6 * kMiB + 17;  // a class no other test asks allocate_result for
  auto block = pool.allocate(kBytes);
  void* const memory = block->data();
  block.reset();

  auto result = pool.allocate_result(kBytes);
  ASSERT_NE(result, nullptr);  // costs nothing: no reason to leave it in ordinary memory
  EXPECT_EQ(result->data(), memory);
}

TEST_F(PinnedPoolTest, ResultsHeldTogetherStayWithinTheResultsLimit) {
  constexpr std::size_t kBytes = 7 * kMiB + 17;  // a class of this test's own: 8 MiB blocks
  const std::size_t limit = pool.results_limit();
  pool.set_results_limit(pool.stats().results_in_use_bytes + 2 * PinnedPool::size_class(kBytes));
  auto warm = pool.allocate(kBytes);  // two blocks cached below: the first results of the class are pinned too
  auto warm_too = pool.allocate(kBytes);
  warm.reset();
  warm_too.reset();
  auto first = pool.allocate_result(kBytes);
  auto second = pool.allocate_result(kBytes);
  auto third = pool.allocate_result(kBytes);
  EXPECT_NE(first, nullptr);
  EXPECT_NE(second, nullptr);
  EXPECT_EQ(third, nullptr);  // past the limit: the result stays in ordinary memory
  const std::size_t held = pool.stats().results_in_use_bytes;
  first.reset();
  EXPECT_EQ(pool.stats().results_in_use_bytes, held - PinnedPool::size_class(kBytes));  // counted as it goes
  auto again = pool.allocate_result(kBytes);
  EXPECT_NE(again, nullptr);
  pool.set_results_limit(limit);
}

TEST_F(PinnedPoolTest, BlockHeldByQueuedWorkIsReusedOnlyAfterItsEventCompleted) {
  const std::size_t in_use_before = pool.stats().in_use_blocks;
  auto stream = independent_stream();
  Gate gate(*stream);
  auto block = pool.allocate(128 * kKiB);
  void* const held_memory = block->data();
  lifetimes.hold_until_complete(*stream, {block});  // as a copy queued behind the gate would
  block.reset();

  EXPECT_EQ(pool.try_allocate_cached(128 * kKiB), nullptr);
  auto other = pool.allocate(128 * kKiB);
  EXPECT_NE(other->data(), held_memory) << "the pool handed out a block that queued work still uses";
  EXPECT_EQ(pool.stats().in_use_blocks, in_use_before + 2);  // the held block still counts as in use

  gate.open();
  stream->synchronize();  // waits for the work
  lifetimes.collect();    // releases what it held
  other.reset();
  std::set<void*> cached;
  std::vector<std::shared_ptr<PinnedBlock>> again{pool.allocate(128 * kKiB), pool.allocate(128 * kKiB)};
  for (const auto& b : again) cached.insert(b->data());
  EXPECT_EQ(cached.count(held_memory), 1u);
}

TEST_F(PinnedPoolTest, PoolMissCollectsCompletedWorkBeforeAskingTheBackend) {
  auto stream = independent_stream();
  Gate gate(*stream);
  auto block = pool.allocate(256 * kKiB);
  void* const held_memory = block->data();
  lifetimes.hold_until_complete(*stream, {block});
  block.reset();
  gate.open();
  // The work has completed, but nobody has polled the tracker.
  backend().streams().synchronize_stream(stream->handle());
  ASSERT_EQ(pool.try_allocate_cached(256 * kKiB), nullptr);

  const PinnedPoolStats before = pool.stats();
  auto again = pool.allocate(256 * kKiB);
  EXPECT_EQ(again->data(), held_memory);
  EXPECT_EQ(pool.stats().misses, before.misses);
  EXPECT_EQ(pool.stats().hits, before.hits + 1);
}

}  // namespace
}  // namespace cuweave
