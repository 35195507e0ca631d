// EventPool over a fake of the one facet it needs (support/fake_stream_backend.hpp), not the simulator: what it
// asks the backend for, and when it asks nothing (Note [Backend facets]).
#include <gtest/gtest.h>

#include "cuweave/event_pool.hpp"
#include "fake_stream_backend.hpp"

namespace cuweave {
namespace {

using testing::FakeStreamBackend;

TEST(EventPoolFakeStreamsTest, AnEmptyPoolCreatesATimingFreeEventOnTheRequestedDevice) {
  FakeStreamBackend streams;
  EventPool pool(streams);
  // Device 5: no simulated device has that ordinal, so only the fake can have answered.
  EventHandle event = pool.acquire(5);
  EXPECT_EQ(streams.events_created, 1);
  EXPECT_EQ(streams.event_devices.at(event), 5);
  EXPECT_EQ(streams.event_flags.at(event), unsigned{kEventDefault}) << "bookkeeping events must not time";
  pool.release(5, event);
}

TEST(EventPoolFakeStreamsTest, AReleasedEventIsHandedOutAgainWithoutAskingTheBackend) {
  FakeStreamBackend streams;
  EventPool pool(streams);
  EventHandle event = pool.acquire(0);
  pool.release(0, event);
  EXPECT_EQ(pool.acquire(0), event);
  EXPECT_EQ(streams.events_created, 1);
  EXPECT_EQ(streams.events_destroyed, 0) << "the pool destroyed an event it keeps";
}

TEST(EventPoolFakeStreamsTest, AnEventOfOneDeviceIsNeverHandedOutForAnother) {
  FakeStreamBackend streams;
  EventPool pool(streams);
  EventHandle on_device_0 = pool.acquire(0);
  pool.release(0, on_device_0);
  EventHandle on_device_1 = pool.acquire(1);
  EXPECT_NE(on_device_1, on_device_0);
  EXPECT_EQ(streams.event_devices.at(on_device_1), 1);
  EXPECT_EQ(streams.events_created, 2);
  EXPECT_EQ(pool.acquire(0), on_device_0);
}

}  // namespace
}  // namespace cuweave
