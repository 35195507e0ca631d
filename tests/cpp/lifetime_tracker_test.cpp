// Note [Stream-ordered lifetimes]: the tracker keeps an operation's Holds until the event recorded after it
// has completed, and only then lets them go.
#include "cuweave/lifetime_tracker.hpp"

#include <future>
#include <memory>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"
#include "sim/device_access.hpp"
#include "sim/simulator.hpp"

namespace cuweave {
namespace {

using testing::Gate;
using testing::independent_stream;
using testing::still_waiting;
using testing::Watched;

class LifetimeTrackerTest : public ::testing::Test {
 protected:
  // The tracker is process-wide: each test starts with no pending entries.
  void SetUp() override {
    backend().devices().synchronize_device(0);
    tracker.collect();
    ASSERT_EQ(tracker.pending_entries(), 0u);
  }

  LifetimeTracker& tracker = services().lifetimes();
  std::shared_ptr<Stream> stream = independent_stream();
};

TEST_F(LifetimeTrackerTest, HoldsLiveUntilTheWorkQueuedBeforeThemCompleted) {
  Watched object;
  Gate gate(*stream);
  tracker.hold_until_complete(*stream, {object.hold()});
  object.let_go();

  EXPECT_EQ(tracker.pending_entries(), 1u);
  EXPECT_EQ(tracker.collect(), 0u);
  EXPECT_TRUE(object.alive());

  gate.open();
  backend().streams().synchronize_stream(stream->handle());
  EXPECT_TRUE(object.alive()) << "released before anyone asked the tracker";  // completion is polled
  EXPECT_EQ(tracker.collect(), 1u);
  EXPECT_FALSE(object.alive());
  EXPECT_EQ(tracker.pending_entries(), 0u);
}

TEST_F(LifetimeTrackerTest, EntriesOfOneStreamAreReleasedInOrder) {
  Watched first;
  Watched second;
  Event first_done(0, EventOptions{});
  {
    Gate first_gate(*stream);
    tracker.hold_until_complete(*stream, {first.hold()});
    first_done.record(*stream);
    Gate second_gate(*stream);
    tracker.hold_until_complete(*stream, {second.hold()});
    first.let_go();
    second.let_go();

    first_gate.open();
    first_done.synchronize();
    EXPECT_EQ(tracker.collect(), 1u);
    EXPECT_FALSE(first.alive());
    EXPECT_TRUE(second.alive());
  }  // the second gate opens
  stream->synchronize();
  EXPECT_FALSE(second.alive());
}

TEST_F(LifetimeTrackerTest, StreamsAreTrackedIndependently) {
  auto other = independent_stream();
  Watched on_gated;
  Watched on_other;
  Gate gate(*stream);
  tracker.hold_until_complete(*stream, {on_gated.hold()});
  tracker.hold_until_complete(*other, {on_other.hold()});
  on_gated.let_go();
  on_other.let_go();

  backend().streams().synchronize_stream(other->handle());
  tracker.collect();
  EXPECT_FALSE(on_other.alive());
  EXPECT_TRUE(on_gated.alive()) << "work on another stream completing released this stream's holds";

  gate.open();
  stream->synchronize();
  EXPECT_FALSE(on_gated.alive());
}

TEST_F(LifetimeTrackerTest, NewEntryReleasesCompletedEntriesOfItsStream) {
  Watched earlier;
  {
    Gate gate(*stream);  // so that the entry's own poll finds it pending
    tracker.hold_until_complete(*stream, {earlier.hold()});
    earlier.let_go();
  }
  backend().streams().synchronize_stream(stream->handle());
  ASSERT_TRUE(earlier.alive());

  Watched later;
  tracker.hold_until_complete(*stream, {later.hold()});  // polls this stream's oldest entry: no collect() needed
  EXPECT_FALSE(earlier.alive());
  stream->synchronize();
}

TEST_F(LifetimeTrackerTest, StreamSynchronizeReleasesWhatItsWorkHeld) {
  Watched object;
  Gate gate(*stream);
  stream->hold({object.hold()});
  object.let_go();
  gate.open();
  stream->synchronize();
  EXPECT_FALSE(object.alive());
  EXPECT_EQ(tracker.pending_entries(), 0u);
}

TEST_F(LifetimeTrackerTest, WaitForHoldersReturnsOnceTheLastHolderCompleted) {
  Watched object;
  Gate gate(*stream);
  tracker.hold_until_complete(*stream, {object.hold()});
  tracker.hold_until_complete(*stream, {object.hold()});  // a second operation using it
  object.let_go();

  auto waiter = std::async(std::launch::async, [&] { tracker.wait_for_holders_of(object.address); });
  EXPECT_TRUE(still_waiting(waiter)) << "returned while queued work still holds the object";
  EXPECT_TRUE(object.alive());

  gate.open();
  waiter.get();
  EXPECT_FALSE(object.alive());
  EXPECT_EQ(tracker.pending_entries(), 0u);
}

TEST_F(LifetimeTrackerTest, WaitForHoldersOfAnObjectNobodyHoldsReturnsAtOnce) {
  Watched held;
  Watched unheld;
  Gate gate(*stream);
  tracker.hold_until_complete(*stream, {held.hold()});
  tracker.wait_for_holders_of(unheld.address);  // would wait for the gate if it confused the two
  EXPECT_EQ(tracker.pending_entries(), 1u);
  gate.open();
  stream->synchronize();
}

// Note [An entry is released by a poll of its own recording]. One thread plays all parts, in the hook the tracker
// runs between a poll that found the front entry's event complete and the release of that entry: another poll
// releases the entry (its event goes back to the pool) and a new entry of the same stream, queued behind a
// closed gate, takes that event (the pool hands out the one given back last). The first poll's answer is about
// the old recording: it must not release the new entry.
TEST_F(LifetimeTrackerTest, AnEntryIsReleasedOnlyByAPollOfItsOwnRecording) {
  Watched first;
  Watched second;
  {
    Gate gate(*stream);  // so that the entry's own poll finds it pending
    tracker.hold_until_complete(*stream, {first.hold()});
    first.let_go();
  }
  backend().streams().synchronize_stream(stream->handle());  // complete, and still queued: nothing polled it since
  ASSERT_TRUE(first.alive());
  ASSERT_EQ(tracker.pending_entries(), 1u);

  std::unique_ptr<Gate> later_gate;
  bool in_hook = false;
  tracker.set_after_poll_for_tests([&] {
    if (in_hook || later_gate) return;
    in_hook = true;
    EXPECT_EQ(tracker.collect(), 1u);  // the other poll: releases the entry, its event back to the pool
    EXPECT_FALSE(first.alive());
    later_gate = std::make_unique<Gate>(*stream);
    tracker.hold_until_complete(*stream, {second.hold()});  // the reused event, recorded behind the gate
    second.let_go();
    in_hook = false;
  });
  const std::size_t released = tracker.collect();  // the first poll, which the hook interrupts
  tracker.set_after_poll_for_tests(nullptr);

  ASSERT_TRUE(later_gate) << "the hook did not run";
  EXPECT_EQ(released, 0u) << "the poll of the old recording released the new entry";
  EXPECT_TRUE(second.alive()) << "released while the work queued before it waits behind a closed gate";
  EXPECT_EQ(tracker.pending_entries(), 1u);
  later_gate->open();
  stream->synchronize();
  EXPECT_FALSE(second.alive());
  later_gate.reset();
}

TEST_F(LifetimeTrackerTest, HoldsAreDestroyedOutsideTheTrackersLock) {
  // A Hold may re-enter the tracker as it goes (a Python object's finalizer, a pool returning a block): under
  // the tracker's own mutex that call would deadlock, and CTest's timeout would report it.
  bool reentered = false;
  Hold reentrant(new int(0), [&](const int* value) {
    services().lifetimes().pending_entries();
    reentered = true;
    delete value;
  });
  tracker.hold_until_complete(*stream, {std::move(reentrant)});
  stream->synchronize();
  EXPECT_TRUE(reentered);
}

// Loses device 0's context for the rest of the process (ctest runs each test in a process of its own).
TEST_F(LifetimeTrackerTest, HoldsWhoseEventCannotBeRecordedAreKeptForGood) {
  Watched object;
  sim::simulator().state().access.lose_context(0, "faulted for this test");
  // The work queued before may still run, and no event will ever say it finished.
  EXPECT_THROW(tracker.hold_until_complete(*stream, {object.hold()}), ContextLost);
  object.let_go();
  EXPECT_TRUE(object.alive()) << "released although queued work may still use it";
  EXPECT_EQ(tracker.stranded_holds(), 1u);
  EXPECT_EQ(tracker.collect(), 0u);
  EXPECT_TRUE(object.alive());
}

}  // namespace
}  // namespace cuweave
