// EventPool: timing-free events for cuweave's own bookkeeping (lifetime tracking, stream-on-stream waits), reused
// instead of created and destroyed. A released event may be recorded again at once: a wait already queued on it
// keeps waiting for the recording it saw.
#include "cuweave/event_pool.hpp"

#include <memory>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/event.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using testing::Gate;
using testing::independent_stream;

TEST(EventPoolTest, ReleasedEventIsHandedOutAgain) {
  EventPool& pool = services().events();
  EventHandle event = pool.acquire(0);
  pool.release(0, event);
  EventHandle again = pool.acquire(0);
  EXPECT_EQ(again, event);
  pool.release(0, again);
}

TEST(EventPoolTest, EachDeviceHasItsOwnEvents) {
  EventPool& pool = services().events();
  EventHandle on_device_1 = pool.acquire(1);
  pool.release(1, on_device_1);
  EventHandle on_device_0 = pool.acquire(0);
  EXPECT_NE(on_device_0, on_device_1) << "an event of device 1 was handed out for device 0";
  EXPECT_EQ(pool.acquire(1), on_device_1);
  pool.release(0, on_device_0);
  pool.release(1, on_device_1);
}

TEST(EventPoolTest, StreamWaitOrdersAfterTheOtherStreamAndRecyclesItsEventAtOnce) {
  EventPool& pool = services().events();
  auto gated = independent_stream();
  auto waiting = independent_stream();
  Event waiting_done(0, EventOptions{});
  EventHandle top = pool.acquire(0);
  pool.release(0, top);
  Gate gate(*gated);

  waiting->wait(*gated);
  waiting_done.record(*waiting);
  EXPECT_FALSE(waiting_done.complete()) << "the wait did not order after the other stream's queued work";
  EXPECT_EQ(pool.acquire(0), top);  // back in the pool while the wait is still pending
  pool.release(0, top);

  gate.open();
  waiting_done.synchronize();
  EXPECT_TRUE(waiting_done.complete());
}

// The simulator keeps each recording's completion apart. It once counted an event's recordings with one
// counter, so a later recording that completed first (on another stream) also satisfied the waits queued on
// the earlier one, which CUDA keeps waiting. Both tests below failed on that.
TEST(EventPoolTest, RecordingAReleasedEventAgainLeavesEarlierWaitsOnTheirRecording) {
  EventPool& pool = services().events();
  auto gated = independent_stream();
  auto waiting = independent_stream();
  auto elsewhere = independent_stream();
  Event waiting_done(0, EventOptions{});
  Gate gate(*gated);

  EventHandle event = pool.acquire(0);
  backend().streams().record_event(event, gated->handle());
  waiting->wait(event);
  waiting_done.record(*waiting);
  pool.release(0, event);

  EventHandle reused = pool.acquire(0);
  ASSERT_EQ(reused, event);
  backend().streams().record_event(reused, elsewhere->handle());
  elsewhere->synchronize();
  EXPECT_TRUE(backend().streams().event_complete(reused));
  EXPECT_FALSE(waiting_done.complete()) << "the queued wait followed the event's new recording";

  gate.open();
  waiting_done.synchronize();
  pool.release(0, reused);
}

TEST(EventPoolTest, StreamWaitStaysOrderedWhenItsEventIsRecordedElsewhere) {
  // The same rule as the core uses it: Stream::wait() gives its event back at once, and the tracker's next
  // entry on another stream records that very event there.
  auto gated = independent_stream();
  auto waiting = independent_stream();
  auto elsewhere = independent_stream();
  Event waiting_done(0, EventOptions{});
  Gate gate(*gated);

  waiting->wait(*gated);
  waiting_done.record(*waiting);
  elsewhere->hold({std::make_shared<int>(0)});
  elsewhere->synchronize();
  EXPECT_FALSE(waiting_done.complete()) << "the wait ended when its recycled event completed on another stream";

  gate.open();
  waiting_done.synchronize();
}

}  // namespace
}  // namespace cuweave
