// DeviceArray: element types and counts, memory freed in its stream's order (Note [Memory follows its stream]),
// views that share and keep their base's memory, and the writers of shared memory.
#include "cuweave/device_array.hpp"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/array_layout.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"
#include "sim/memory_registry.hpp"
#include "sim/simulator.hpp"

namespace cuweave {
namespace {

using testing::Gate;
using testing::independent_stream;

std::shared_ptr<DeviceArray> floats(std::int64_t count, const std::shared_ptr<Stream>& stream) {
  return DeviceArray::allocate({count}, DType::from_typestr("<f4"), stream);
}

std::size_t device_bytes() { return sim::simulator().state().memory.device_bytes_in_use(); }

class DeviceArrayTest : public ::testing::Test {
 protected:
  void SetUp() override { settle(); }
  void TearDown() override { settle(); }
  static void settle() {
    backend().devices().synchronize_device(0);
    services().lifetimes().collect();
  }
};

TEST_F(DeviceArrayTest, TypesAndCountsAreNumPys) {
  const DType f4 = DType::from_typestr("<f4");
  EXPECT_EQ(f4.kind, 'f');
  EXPECT_EQ(f4.itemsize, 4u);
  EXPECT_EQ(DType::from_typestr("|b1").kind, 'b');
  EXPECT_THROW(DType::from_typestr("<U4"), WrongType);
  EXPECT_EQ(DeviceArray::element_count({2, 3, 4}), 24u);
  EXPECT_EQ(DeviceArray::element_count({}), 1u);  // a 0-d array holds one element
  EXPECT_THROW(DeviceArray::element_count({2, -1}), InvalidArgument);
  EXPECT_EQ(DeviceArray::contiguous_strides({2, 3}, 4), (std::vector<std::int64_t>{12, 4}));
}

TEST_F(DeviceArrayTest, MemoryIsFreedAfterTheWorkQueuedOnItsStream) {
  auto stream = independent_stream();
  const std::size_t before = device_bytes();
  {
    Gate gate(*stream);
    auto array = floats(1 << 16, stream);
    EXPECT_GT(device_bytes(), before);
    EXPECT_EQ(array->stream(), stream);
    EXPECT_EQ(array->nbytes(), 4u << 16);
    array.reset();  // its free is queued behind the gate
    EXPECT_GT(device_bytes(), before);
  }
  settle();
  EXPECT_EQ(device_bytes(), before);
}

TEST_F(DeviceArrayTest, UseOnAnotherStreamMovesTheFreeBehindThatStreamsWork) {
  auto made_on = independent_stream();
  auto used_on = independent_stream();
  const std::size_t before = device_bytes();
  {
    Gate gate(*used_on);
    auto array = floats(1 << 16, made_on);
    Holds holds = array->uses_on(used_on);  // the free now follows `used_on`; the move holds the memory itself
    array.reset();
    holds.clear();
    made_on->synchronize();
    services().lifetimes().collect();
    EXPECT_GT(device_bytes(), before);  // freed on the stream it was last used on, still behind the gate
  }
  settle();
  EXPECT_EQ(device_bytes(), before);
}

TEST_F(DeviceArrayTest, AViewSharesItsBasesMemoryAndKeepsItAlive) {
  auto stream = independent_stream();
  const std::size_t before = device_bytes();
  auto base = floats(16, stream);
  auto view = DeviceArray::view_of(base, ArrayLayout{16, {4}, {8}}, base->dtype());  // elements 4, 6, 8, 10 (bytes)
  EXPECT_EQ(view->base(), base);
  EXPECT_EQ(static_cast<char*>(view->data()), static_cast<char*>(base->data()) + 16);
  EXPECT_FALSE(view->contiguous());
  const auto [begin, end] = view->byte_span();
  EXPECT_EQ(end - begin, 3u * 8 + 4);
  base.reset();
  settle();
  EXPECT_GT(device_bytes(), before);  // the view holds the allocation
  view.reset();
  settle();
  EXPECT_EQ(device_bytes(), before);
}

TEST_F(DeviceArrayTest, ReadersOfAViewWaitForTheWritersOfItsBytesOnly) {
  auto first = independent_stream();
  auto second = independent_stream();
  auto base = floats(16, first);
  auto low = DeviceArray::view_of(base, ArrayLayout{0, {8}, {4}}, base->dtype());
  auto high = DeviceArray::view_of(base, ArrayLayout{32, {8}, {4}}, base->dtype());
  const auto [low_begin, low_end] = low->byte_span();
  const auto [high_begin, high_end] = high->byte_span();
  low->written_on(first, low_begin, low_end);
  high->written_on(second, high_begin, high_end);
  EXPECT_EQ(low->writers(), (std::vector<std::shared_ptr<Stream>>{first}));
  EXPECT_EQ(high->writers(), (std::vector<std::shared_ptr<Stream>>{second}));
  EXPECT_EQ(base->writers().size(), 2u);  // the whole array: both
  base->written_on(second);               // a write of everything on one stream takes over
  EXPECT_EQ(low->writers(), (std::vector<std::shared_ptr<Stream>>{second}));
}

}  // namespace
}  // namespace cuweave
