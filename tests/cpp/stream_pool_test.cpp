// StreamPool: round-robin streams, and leases that make one exclusive until released.
#include "cuweave/stream_pool.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/errors.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using testing::still_waiting;

constexpr std::chrono::duration<double> kNoWait{0};

TEST(StreamPoolTest, PoolNeedsAtLeastOneStream) {
  EXPECT_THROW(StreamPool::create(0, 0, 0, true), InvalidArgument);
}

TEST(StreamPoolTest, PriorityOutsideTheDevicesRangeIsRefused) {
  EXPECT_THROW(StreamPool::create(2, 0, 1, true), InvalidArgument);  // the simulator's range is -5 .. 0
}

TEST(StreamPoolTest, StreamsArePooledAndNamedByIndex) {
  auto pool = StreamPool::create(3, 0, -2, false, "workers");
  EXPECT_EQ(pool->size(), 3u);
  EXPECT_EQ(pool->device(), 0);
  EXPECT_EQ(pool->priority(), -2);
  for (std::size_t i = 0; i < pool->size(); ++i) {
    std::shared_ptr<Stream> stream = pool->next();
    EXPECT_TRUE(stream->lent_by_pool());
    EXPECT_EQ(stream->priority(), -2);
    EXPECT_FALSE(stream->blocking());
    EXPECT_EQ(stream->name(), "workers[" + std::to_string(i) + "]");
  }
}

TEST(StreamPoolTest, PooledStreamCannotBeClosedByItsUser) {
  auto pool = StreamPool::create(1, 0, 0, true);
  EXPECT_THROW(pool->next()->close(), InvalidArgument);
}

TEST(StreamPoolTest, NextCyclesThroughDistinctStreams) {
  auto pool = StreamPool::create(3, 0, 0, true);
  std::vector<std::shared_ptr<Stream>> first_round{pool->next(), pool->next(), pool->next()};
  EXPECT_EQ(std::set<std::shared_ptr<Stream>>(first_round.begin(), first_round.end()).size(), 3u);
  for (const auto& stream : first_round) EXPECT_EQ(pool->next(), stream);  // the same order again
}

TEST(StreamPoolTest, ReservedStreamIsSkippedByNextUntilReleased) {
  auto pool = StreamPool::create(3, 0, 0, true);
  StreamLease lease = pool->reserve(kNoWait);
  EXPECT_EQ(pool->reserved_count(), 1u);
  for (int i = 0; i < 6; ++i) EXPECT_NE(pool->next(), lease.stream());

  const std::shared_ptr<Stream> released = lease.stream();
  lease.release();
  EXPECT_EQ(pool->reserved_count(), 0u);
  bool handed_out = false;
  for (int i = 0; i < 3; ++i) handed_out = handed_out || pool->next() == released;
  EXPECT_TRUE(handed_out);
}

TEST(StreamPoolTest, NextWithEveryStreamReservedIsRefused) {
  auto pool = StreamPool::create(1, 0, 0, true);
  StreamLease lease = pool->reserve(kNoWait);
  EXPECT_THROW(pool->next(), std::runtime_error);
}

TEST(StreamPoolTest, ReserveWithEveryStreamReservedTimesOut) {
  auto pool = StreamPool::create(2, 0, 0, true);
  StreamLease first = pool->reserve(kNoWait);
  StreamLease second = pool->reserve(kNoWait);
  EXPECT_NE(first.stream(), second.stream());
  EXPECT_THROW(pool->reserve(kNoWait), Timeout);
  EXPECT_EQ(pool->reserved_count(), 2u);
}

TEST(StreamPoolTest, LeaseIsReleasedOnceAndOnDestruction) {
  auto pool = StreamPool::create(1, 0, 0, true);
  {
    StreamLease lease = pool->reserve(kNoWait);
    EXPECT_TRUE(lease.active());
    lease.release();
    EXPECT_FALSE(lease.active());
    StreamLease other = pool->reserve(kNoWait);
    lease.release();  // a second release must not free `other`
    EXPECT_EQ(pool->reserved_count(), 1u);
    EXPECT_THROW(pool->reserve(kNoWait), Timeout);
  }
  EXPECT_EQ(pool->reserved_count(), 0u);
}

TEST(StreamPoolTest, MovedLeaseKeepsTheReservation) {
  auto pool = StreamPool::create(2, 0, 0, true);
  StreamLease lease = pool->reserve(kNoWait);
  const std::shared_ptr<Stream> stream = lease.stream();
  StreamLease moved = std::move(lease);
  EXPECT_FALSE(lease.active());  // NOLINT(bugprone-use-after-move): moved-from state is the point
  lease.release();               // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(pool->reserved_count(), 1u);
  EXPECT_TRUE(moved.active());
  EXPECT_EQ(moved.stream(), stream);
}

TEST(StreamPoolTest, AssigningOverALeaseReleasesItsOldStream) {
  auto pool = StreamPool::create(2, 0, 0, true);
  StreamLease first = pool->reserve(kNoWait);
  StreamLease second = pool->reserve(kNoWait);
  const std::shared_ptr<Stream> first_stream = first.stream();
  first = std::move(second);
  EXPECT_EQ(pool->reserved_count(), 1u);
  StreamLease again = pool->reserve(kNoWait);
  EXPECT_EQ(again.stream(), first_stream);
}

TEST(StreamPoolTest, LeaseKeepsItsPoolAlive) {
  auto pool = StreamPool::create(1, 0, 0, true);
  std::weak_ptr<StreamPool> watch = pool;
  StreamLease lease = pool->reserve(kNoWait);
  pool.reset();
  EXPECT_FALSE(watch.expired());
  lease.release();
  EXPECT_TRUE(watch.expired());
}

TEST(StreamPoolTest, BlockedReserveGetsTheStreamThatIsReleased) {
  auto pool = StreamPool::create(1, 0, 0, true);
  StreamLease held = pool->reserve(kNoWait);
  const std::shared_ptr<Stream> stream = held.stream();
  auto waiter = std::async(std::launch::async, [&] { return pool->reserve(std::nullopt); });
  EXPECT_TRUE(still_waiting(waiter)) << "reserved a stream that was already reserved";

  held.release();
  StreamLease got = waiter.get();
  EXPECT_EQ(got.stream(), stream);
  EXPECT_EQ(pool->reserved_count(), 1u);
}

TEST(StreamPoolTest, MoreThreadsThanStreamsNeverShareALease) {
  constexpr int kThreads = 6;
  constexpr int kRounds = 200;
  auto pool = StreamPool::create(2, 0, 0, true);
  std::mutex mutex;
  std::set<Stream*> leased;  // LOCK: mutex
  std::atomic<int> shared{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        StreamLease lease = pool->reserve(std::nullopt);
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (!leased.insert(lease.stream().get()).second) shared.fetch_add(1);
        }
        {
          std::lock_guard<std::mutex> lock(mutex);
          leased.erase(lease.stream().get());
        }
      }  // the lease goes back here
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(shared.load(), 0);
  EXPECT_EQ(pool->reserved_count(), 0u);
}

}  // namespace
}  // namespace cuweave
