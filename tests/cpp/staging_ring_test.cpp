// Note [Staging ring reuse]: a slot is handed out only once the copy recorded on it has completed, so a fast
// producer waits for the copies (backpressure) and the ring never grows. test_main.cpp sizes the ring: two
// slots of 1 MiB.
#include "cuweave/operation.hpp"
#include "cuweave/staging_ring.hpp"

#include <atomic>
#include <cstring>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/host_transfer.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"
#include "sim/device_access.hpp"
#include "sim/simulator.hpp"

namespace cuweave {
namespace {

using testing::eventually;
using testing::Gate;
using testing::independent_stream;
using testing::still_waiting;

constexpr std::size_t kSlots = 2;

class StagingRingTest : public ::testing::Test {
 protected:
  // The ring is process-wide: earlier tests' recorded copies complete before this one starts.
  void SetUp() override { backend().devices().synchronize_device(0); }

  std::size_t waits() const { return ring.stats().waits; }

  StagingRing& ring = StagingRing::for_device(0);
  std::shared_ptr<Stream> stream = independent_stream();
};

TEST_F(StagingRingTest, RingHasTheConfiguredNumberOfPinnedSlots) {
  const StagingRingStats stats = ring.stats();
  EXPECT_EQ(stats.slots, kSlots);
  EXPECT_EQ(stats.slot_bytes, std::size_t{1} << 20);
  EXPECT_EQ(ring.slot_bytes(), stats.slot_bytes);

  StagingSlot* first = ring.acquire();
  StagingSlot* second = ring.acquire();
  EXPECT_NE(first, second);
  EXPECT_NE(first->data, second->data);
  for (StagingSlot* slot : {first, second}) {
    EXPECT_EQ(slot->bytes, ring.slot_bytes());
    EXPECT_TRUE(backend().memory().is_pinned(slot->data));
  }
  ring.release(first);
  ring.release(second);
}

TEST_F(StagingRingTest, AcquireWithEverySlotTakenWaitsForARelease) {
  StagingSlot* first = ring.acquire();
  StagingSlot* second = ring.acquire();
  const std::size_t before = waits();

  auto waiter = std::async(std::launch::async, [this] { return ring.acquire(); });
  EXPECT_TRUE(eventually([&] { return waits() == before + 1; }));
  EXPECT_TRUE(still_waiting(waiter)) << "a third slot was handed out while both were taken";

  ring.release(second);
  EXPECT_EQ(waiter.get(), second);
  ring.release(first);
  ring.release(second);
}

TEST_F(StagingRingTest, TryAcquireWithEverySlotTakenReturnsNullAtOnce) {
  StagingSlot* first = ring.acquire();
  StagingSlot* second = ring.acquire();
  const std::size_t before = waits();
  EXPECT_EQ(ring.try_acquire(), nullptr);
  EXPECT_EQ(waits(), before) << "a try that found no free slot was counted as a wait";
  ring.release(second);
  EXPECT_EQ(ring.try_acquire(), second);
  ring.release(first);
  ring.release(second);
}

TEST_F(StagingRingTest, ReleaseDoesNotWaitForTheRecordedCopy) {
  Gate gate(*stream);
  StagingSlot* slot = ring.acquire();
  ring.record(slot, *stream);
  ring.release(slot);  // returns while the copy is still queued behind the gate
  EXPECT_FALSE(backend().streams().event_complete(slot->last_use));
  gate.open();
  stream->synchronize();
}

TEST_F(StagingRingTest, ReleasedSlotIsHandedOutOnlyAfterItsRecordedCopyCompleted) {
  Gate gate(*stream);
  StagingSlot* in_flight = ring.acquire();
  StagingSlot* taken = ring.acquire();  // so that the next acquire can only get `in_flight`
  ring.record(in_flight, *stream);
  ring.release(in_flight);
  const std::size_t before = waits();

  auto waiter = std::async(std::launch::async, [this] { return ring.acquire(); });
  EXPECT_TRUE(eventually([&] { return waits() == before + 1; }));  // counted just before it waits for the copy
  EXPECT_TRUE(still_waiting(waiter)) << "a slot was handed out while its copy was still queued";
  EXPECT_FALSE(backend().streams().event_complete(in_flight->last_use));

  gate.open();
  StagingSlot* slot = waiter.get();
  EXPECT_EQ(slot, in_flight);
  EXPECT_TRUE(backend().streams().event_complete(slot->last_use));
  ring.release(slot);
  ring.release(taken);
}

// Loses device 0's context for the rest of the process (ctest runs each test in a process of its own).
TEST_F(StagingRingTest, ASlotWhoseRecordingFailedIsNeverHandedOutAsFree) {
  StagingSlot* failed = ring.acquire();
  StagingSlot* taken = ring.acquire();  // so that the next acquire can only get `failed`
  sim::simulator().state().access.lose_context(0, "faulted for this test");
  EXPECT_THROW(ring.record(failed, *stream), ContextLost);
  ring.release(failed);
  // A transfer queued from `failed` before its recording failed may still read it: the ring asks its event,
  // which fails as every call now does, and the slot stays free for no one to refill.
  EXPECT_THROW(ring.acquire(), ContextLost);
  EXPECT_THROW(ring.try_acquire(), ContextLost);
  ring.release(taken);
}

TEST_F(StagingRingTest, SlotWhoseCopyCompletedIsHandedOutWithoutWaiting) {
  StagingSlot* slot = ring.acquire();
  ring.record(slot, *stream);
  ring.release(slot);
  stream->synchronize();
  const StagingRingStats before = ring.stats();

  StagingSlot* first = ring.acquire();
  StagingSlot* second = ring.acquire();
  const StagingRingStats after = ring.stats();
  EXPECT_EQ(after.waits, before.waits);
  EXPECT_EQ(after.acquisitions, before.acquisitions + 2);
  ring.release(first);
  ring.release(second);
}

TEST_F(StagingRingTest, WaitReturnsOnceTheSlotsRecordedCopyCompleted) {
  Gate gate(*stream);
  StagingSlot* slot = ring.acquire();
  ring.record(slot, *stream);

  auto waiter = std::async(std::launch::async, [&] { ring.wait(slot); });
  EXPECT_TRUE(still_waiting(waiter));
  gate.open();
  waiter.get();
  EXPECT_TRUE(backend().streams().event_complete(slot->last_use));
  ring.release(slot);
}

TEST_F(StagingRingTest, FastProducerIsHeldBackUntilTheCopiesReadTheirSlots) {
  // A producer stages four chunks through the two slots while the copies wait behind a gate: it gets two chunks
  // ahead, then waits. Had it reused a slot early, a later chunk would overwrite one whose copy had not run.
  constexpr int kChunks = 4;
  constexpr std::size_t kChunk = 64 << 10;
  auto* device = static_cast<unsigned char*>(backend().memory().allocate_device(kChunks * kChunk, 0, stream->handle()));
  std::atomic<int> staged{0};
  const std::size_t before = waits();
  std::future<void> producer;
  {
    Gate gate(*stream);
    producer = std::async(std::launch::async, [&] {
      for (int chunk = 0; chunk < kChunks; ++chunk) {
        StagingSlot* slot = ring.acquire();
        std::memset(slot->data, chunk + 1, kChunk);
        Operation copy("copy");
        stream->copy_async(copy, device + chunk * kChunk, slot->data, kChunk);
        ring.record(slot, *stream);
        ring.release(slot);
        staged.fetch_add(1);
      }
    });
    EXPECT_TRUE(eventually([&] { return staged.load() == static_cast<int>(kSlots) && waits() > before; }));
    EXPECT_TRUE(still_waiting(producer));
    EXPECT_EQ(staged.load(), static_cast<int>(kSlots)) << "the producer got ahead of the copies by more than the ring";
  }  // the gate opens
  producer.get();
  EXPECT_EQ(staged.load(), kChunks);
  EXPECT_EQ(ring.stats().slots, kSlots);

  std::vector<unsigned char> copied(kChunks * kChunk);
  Operation copy("copy");
  stream->copy_async(copy, copied.data(), device, copied.size());  // into pageable memory: returns once done
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    EXPECT_EQ(copied[chunk * kChunk], chunk + 1) << "chunk " << chunk << " was overwritten in its slot";
    EXPECT_EQ(copied[(chunk + 1) * kChunk - 1], chunk + 1) << "chunk " << chunk;
  }
  backend().memory().free_device(device, stream->handle());
}

TEST_F(StagingRingTest, ThreadsSharingTheRingNeverHoldTheSameSlot) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::mutex mutex;
  std::set<StagingSlot*> held;  // LOCK: mutex
  std::atomic<int> shared{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        StagingSlot* slot = ring.acquire();
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (!held.insert(slot).second) shared.fetch_add(1);
        }
        {
          std::lock_guard<std::mutex> lock(mutex);
          held.erase(slot);
        }
        ring.release(slot);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(shared.load(), 0);
  EXPECT_EQ(ring.stats().slots, kSlots);
}

// A staged copy holds two slots at a time (one filled or drained by host threads, one moved by the engine).
// Had it waited for its second slot while holding its first, four threads sharing two slots could each hold
// one and wait for ever; they take a second slot only if one is free (StagingRing::try_acquire).
TEST_F(StagingRingTest, StagedCopiesOnMoreThreadsThanSlotsAllFinishWithTheirBytes) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 5;
  constexpr std::size_t kBytes = (std::size_t{3} << 20) + 4096;  // four chunks of the 1 MiB slots
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::shared_ptr<Stream> own = independent_stream();
      std::vector<unsigned char> in(kBytes), out(kBytes);
      void* device = backend().memory().allocate_device(kBytes, 0, own->handle());
      for (int round = 0; round < kRounds; ++round) {
        for (std::size_t i = 0; i < kBytes; ++i) in[i] = static_cast<unsigned char>(i * 31 + t * 7 + round);
        Operation upload("copy");
        copy_host_to_device(upload, *own, device, in.data(), kBytes);
        Operation download("copy");
        copy_device_to_host(download, *own, out.data(), device, kBytes);
        if (out != in) wrong.fetch_add(1);
      }
      backend().memory().free_device(device, own->handle());
      own->synchronize();
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace cuweave
