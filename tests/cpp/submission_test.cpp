// Note [One operation, one path]: an Operation's accesses, and the order of the submission path's steps
// (placement, the sanitizer's check before the call, lifetimes after it), on the simulator.
#include "cuweave/owned_stream.hpp"
#include "cuweave/submission.hpp"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/operation.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/weave.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using sanitizer::Access;
using sanitizer::AccessKind;
using testing::independent_stream;

std::shared_ptr<DeviceArray> floats(std::int64_t count, const std::shared_ptr<Stream>& stream) {
  return DeviceArray::allocate({count}, DType::from_typestr("<f4"), stream);
}

std::uintptr_t address(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer); }

TEST(OperationTest, AccessesAreTheArraysBytesThenOtherBytesAndFollowLaterAdditions) {
  auto stream = independent_stream();
  auto x = floats(16, stream);
  auto y = floats(8, stream);
  const char host[32] = {};
  Operation operation("test");
  operation.reads(x).writes(y).writes(host, sizeof(host));
  const sanitizer::AccessSpan first = operation.accesses();
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].begin, address(x->data()));
  EXPECT_EQ(first[0].end, address(x->data()) + 64);
  EXPECT_EQ(first[0].kind, AccessKind::Read);
  EXPECT_EQ(first[1].end - first[1].begin, 32u);
  EXPECT_EQ(first[1].kind, AccessKind::Write);
  EXPECT_EQ(first[2].begin, address(host));
  // Added after the first call (an output allocated once the operation was placed): counted.
  auto out = floats(4, stream);
  operation.writes(out);
  EXPECT_EQ(operation.accesses().size(), 4u);
  EXPECT_EQ(operation.accesses()[2].begin, address(out->data()));  // with the arrays, before the host bytes
  backend().devices().synchronize_device(0);
}

TEST(OperationTest, APartOfAnArrayIsItsOwnBytesAndAnEmptyArrayTouchesNothing) {
  auto stream = independent_stream();
  auto times = floats(8, stream);
  auto empty = floats(0, stream);
  const char* slot = static_cast<const char*>(times->data()) + 12;
  Operation operation("test");
  operation.uses_part(times, slot, 4, AccessKind::Write).reads(empty);
  ASSERT_EQ(operation.accesses().size(), 1u);
  EXPECT_EQ(operation.accesses()[0].begin, address(slot));
  EXPECT_EQ(operation.accesses()[0].end, address(slot) + 4);
  backend().devices().synchronize_device(0);
}

class SubmissionTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (sanitized_) sanitizer::disable();
    backend().devices().synchronize_device(0);
  }
  void sanitize() {
    sanitizer::enable(sanitizer::Mode::Raise);
    sanitized_ = true;
  }
  // A weave of two strands, `first` (made current) and `second`, and three arrays made before it.
  void begin_weave_of_two() {
    first = independent_stream();
    second = independent_stream();
    current_stream::push(first);
    for (auto& array : arrays) array = floats(16, first);
    weave = Weave::begin(first, {second});
  }
  void end_weave() {
    weave->end();
    current_stream::pop(first.get());
  }

  std::shared_ptr<Stream> first, second;
  std::shared_ptr<DeviceArray> arrays[3];
  std::shared_ptr<Weave> weave;

 private:
  bool sanitized_ = false;
};

TEST_F(SubmissionTest, WithoutAWeaveTheGivenStreamElseTheCurrentOneIsUsed) {
  auto given = independent_stream();
  auto current = independent_stream();
  current_stream::push(current);
  Operation named("test");
  EXPECT_EQ(place(named, given), given);
  Operation unnamed("test");
  EXPECT_EQ(place(unnamed, nullptr), current);
  current_stream::pop(current.get());
}

TEST_F(SubmissionTest, WrittenArraysFollowTheStreamTheOperationWentToAndReadOnesKeepTheirs) {
  auto made_on = independent_stream();
  auto x = floats(16, made_on);
  auto y = floats(16, made_on);
  auto other = independent_stream();
  Operation operation("test");
  operation.reads(x).writes(y);
  int calls = 0;
  queue(operation, *other, [&](StreamHandle handle) {
    EXPECT_EQ(handle, other->handle());
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(y->stream(), other);
  EXPECT_EQ(x->stream(), made_on);
}

TEST_F(SubmissionTest, WhatIsKeptAliveLivesUntilTheStreamsWorkCompletes) {
  auto stream = independent_stream();
  auto kept = std::make_shared<int>(7);
  std::weak_ptr<int> watch = kept;
  {
    testing::Gate gate(*stream);
    Operation operation("test");
    operation.keep_alive(std::move(kept));
    queue(operation, *stream, [](StreamHandle) {});
    EXPECT_FALSE(watch.expired());  // the gate holds the stream's work back
  }
  stream->synchronize();
  EXPECT_TRUE(watch.expired());
}

TEST_F(SubmissionTest, ARaceTheSanitizerFindsStopsTheOperationBeforeTheCallAndChangesNoLifetime) {
  sanitize();
  auto a = independent_stream();
  auto b = independent_stream();
  auto y = floats(16, a);
  a->synchronize();
  testing::Gate gate(*a);
  Operation write_on_a("first");
  write_on_a.writes(y);
  queue(write_on_a, *a, [](StreamHandle) {});
  Operation write_on_b("second");
  write_on_b.writes(y);
  bool called = false;
  EXPECT_THROW(queue(write_on_b, *b, [&](StreamHandle) { called = true; }), sanitizer::RaceFound);
  EXPECT_FALSE(called);
  EXPECT_EQ(y->stream(), a);
}

TEST_F(SubmissionTest, InsideAWeaveTheWeavePlacesByTheAccessesAndSubmitUsesItsChoice) {
  begin_weave_of_two();
  auto& [x, p, q] = arrays;
  Operation make_p("p");
  make_p.reads(x).writes(p);
  std::shared_ptr<Stream> p_stream = submit(make_p, nullptr, [](StreamHandle) {});
  Operation make_q("q");  // independent of p: the other strand
  make_q.reads(x).writes(q);
  std::shared_ptr<Stream> q_stream = submit(make_q, nullptr, [](StreamHandle) {});
  EXPECT_EQ(p_stream, first);
  EXPECT_EQ(q_stream, second);
  EXPECT_EQ(q->stream(), second);
  end_weave();
}

TEST_F(SubmissionTest, OperationsOrderedByOneResourceStayInIssueOrderAndTheSanitizerSeesNoSuchByte) {
  begin_weave_of_two();
  auto& [x, y, z] = arrays;
  const char resource = 0;  // as a communicator, whose collectives NCCL runs in issue order
  Operation on_x("collective on x");
  on_x.writes(x).ordered_by(&resource);
  EXPECT_EQ(on_x.accesses().size(), 1u);  // what the sanitizer checks: x's bytes only
  EXPECT_EQ(on_x.placement_accesses().size(), 2u);
  std::shared_ptr<Stream> x_stream = submit(on_x, nullptr, [](StreamHandle) {});
  Operation on_y("collective on y");  // disjoint from x, but after it
  on_y.writes(y).ordered_by(&resource);
  std::shared_ptr<Stream> y_stream = submit(on_y, nullptr, [](StreamHandle) {});
  Operation unordered("independent of both");  // the same kind of work without the resource: beside them
  unordered.writes(z);
  std::shared_ptr<Stream> z_stream = submit(unordered, nullptr, [](StreamHandle) {});
  EXPECT_EQ(x_stream, y_stream);
  EXPECT_NE(z_stream, y_stream);
  end_weave();
}

TEST_F(SubmissionTest, InsideAWeaveAnOperationBoundToADeviceRunsThereWhateverItsArraysDevices) {
  auto first = independent_stream();
  current_stream::push(first);
  auto on_device_1 = OwnedStream::create(1, 0, false);
  auto x = floats(16, first);
  auto out = floats(16, on_device_1);
  auto weave = Weave::begin(first, {});
  Operation bound("kernel");  // as a kernel loaded on device 0 writing device 1's array
  bound.reads(x).writes(out);
  EXPECT_EQ(place_on(bound, nullptr, 0)->device(), 0);
  Operation by_data("scale");  // an operation placed by its data: where it writes
  by_data.reads(x).writes(out);
  EXPECT_EQ(place(by_data, nullptr)->device(), 1);
  weave->end();
  current_stream::pop(first.get());
  backend().devices().synchronize_device(1);
}

}  // namespace
}  // namespace cuweave
