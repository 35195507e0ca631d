// The built-in strided copy (strided_copy.hpp) on the simulator: gathers, scatters, negative and zero strides,
// element sizes up to 16 bytes, captured into a graph, and the ranges it refuses.
#include "cuweave/strided_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/graph.hpp"
#include "cuweave/operation.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using testing::independent_stream;

// Bytes 0, 1, 2, ... offset by `seed` (wrapping): every byte of a buffer tells where it came from.
std::vector<unsigned char> pattern(std::size_t bytes, unsigned char seed) {
  std::vector<unsigned char> values(bytes);
  for (std::size_t i = 0; i < bytes; ++i) values[i] = static_cast<unsigned char>(seed + i);
  return values;
}

StridedCopy describe(std::size_t itemsize, std::initializer_list<std::int64_t> shape,
                     std::initializer_list<std::int64_t> source_strides,
                     std::initializer_list<std::int64_t> destination_strides) {
  StridedCopy copy;
  copy.itemsize = itemsize;
  copy.ndim = static_cast<int>(shape.size());
  std::copy(shape.begin(), shape.end(), copy.shape);
  std::copy(source_strides.begin(), source_strides.end(), copy.source_strides);
  std::copy(destination_strides.begin(), destination_strides.end(), copy.destination_strides);
  return copy;
}

// What the copy leaves in `destination`, computed on the host from each element's linear index (div/mod, innermost
// last), independently of how the simulator walks the elements. Offsets are from the buffers' starts.
void copy_on_host(const StridedCopy& copy, std::int64_t source_offset, const std::vector<unsigned char>& source,
                  std::int64_t destination_offset, std::vector<unsigned char>& destination) {
  for (std::size_t i = 0; i < copy.count(); ++i) {
    std::int64_t from = source_offset, to = destination_offset;
    std::size_t rest = i;
    for (int d = copy.ndim - 1; d >= 0; --d) {
      const auto index = static_cast<std::int64_t>(rest % static_cast<std::size_t>(copy.shape[d]));
      rest /= static_cast<std::size_t>(copy.shape[d]);
      from += index * copy.source_strides[d];
      to += index * copy.destination_strides[d];
    }
    std::memcpy(destination.data() + to, source.data() + from, copy.itemsize);
  }
}

class StridedCopyTest : public ::testing::Test {
 protected:
  void TearDown() override {
    stream->synchronize();
    for (void* device : allocations_) backend().memory().free_device(device, stream->handle());
    backend().devices().synchronize_device(0);
  }

  unsigned char* upload(const std::vector<unsigned char>& bytes) {
    auto* device = static_cast<unsigned char*>(backend().memory().allocate_device(bytes.size(), 0, stream->handle()));
    allocations_.push_back(device);
    Operation copy("copy");
    stream->copy_async(copy, device, bytes.data(), bytes.size());
    return device;
  }

  std::vector<unsigned char> download(const unsigned char* device, std::size_t bytes) {
    std::vector<unsigned char> host(bytes);
    Operation copy("copy");
    stream->copy_async(copy, host.data(), device, bytes);
    stream->synchronize();
    return host;
  }

  // Runs `copy` from `source_offset` bytes into a patterned buffer of `source_bytes` to `destination_offset`
  // bytes into another of `destination_bytes`; the whole destination buffer must then hold what the host
  // computes, so bytes the copy must not touch are checked too. Returns the destination's bytes.
  std::vector<unsigned char> expect_copies(StridedCopy copy, std::size_t source_bytes, std::int64_t source_offset,
                                           std::size_t destination_bytes, std::int64_t destination_offset) {
    const std::vector<unsigned char> source = pattern(source_bytes, 0);
    std::vector<unsigned char> expected = pattern(destination_bytes, 0x80);
    unsigned char* device_source = upload(source);
    unsigned char* device_destination = upload(expected);
    copy.source = device_source + source_offset;
    copy.destination = device_destination + destination_offset;
    Operation operation("copy_strided");
    stream->copy_strided_async(operation, copy);
    copy_on_host(copy, source_offset, source, destination_offset, expected);
    std::vector<unsigned char> copied = download(device_destination, destination_bytes);
    EXPECT_EQ(copied, expected);
    return copied;
  }

  std::shared_ptr<Stream> stream = independent_stream();

 private:
  std::vector<void*> allocations_;
};

TEST_F(StridedCopyTest, GathersEveryOtherColumnIntoContiguousMemory) {
  // A 4 x 6 matrix of int32; columns 0, 2, 4 into a contiguous 4 x 3.
  expect_copies(describe(4, {4, 3}, {24, 8}, {12, 4}), 4 * 6 * 4, 0, 4 * 3 * 4, 0);
}

TEST_F(StridedCopyTest, ReversesWithANegativeStride) {
  std::vector<std::int64_t> values(10);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int64_t>(i * 1000 + 7);
  std::vector<unsigned char> bytes(values.size() * 8);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  unsigned char* source = upload(bytes);
  unsigned char* destination = upload(std::vector<unsigned char>(bytes.size(), 0));
  StridedCopy copy = describe(8, {10}, {-8}, {8});
  copy.source = source + 9 * 8;  // the last element, walked backwards
  copy.destination = destination;
  Operation operation("copy_strided");
  stream->copy_strided_async(operation, copy);
  const std::vector<unsigned char> copied = download(destination, bytes.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::int64_t value = 0;
    std::memcpy(&value, copied.data() + i * 8, 8);
    EXPECT_EQ(value, values[values.size() - 1 - i]) << "element " << i;
  }
}

TEST_F(StridedCopyTest, ScattersIntoAStridedDestinationLeavingTheGapsAlone) {
  // 5 contiguous int32 into every third slot, from an offset element on.
  expect_copies(describe(4, {5}, {4}, {12}), 5 * 4, 0, 16 * 4, 4);
}

TEST_F(StridedCopyTest, TransposesThreeDimensionsOfTwoByteElements) {
  // (2, 3, 4) int16, C order, into its (4, 3, 2) transpose: element (i, j, k) lands at [k][j][i].
  const std::vector<unsigned char> copied = expect_copies(describe(2, {2, 3, 4}, {24, 8, 2}, {2, 4, 12}), 48, 0, 48, 0);
  const std::vector<unsigned char> source = pattern(48, 0);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) {
        const int from = (i * 12 + j * 4 + k) * 2, to = (k * 6 + j * 2 + i) * 2;
        EXPECT_EQ(std::memcmp(copied.data() + to, source.data() + from, 2), 0) << i << j << k;
      }
    }
  }
}

TEST_F(StridedCopyTest, CopiesSixteenByteElementsAlignedToEightOnly) {
  // Columns 1 and 3 of a 3 x 4 matrix of complex128, starting 8 bytes into the buffer (as a NumPy view may).
  expect_copies(describe(16, {3, 2}, {64, 32}, {32, 16}), 8 + 3 * 64, 8 + 16, 3 * 2 * 16 + 8, 8);
}

TEST_F(StridedCopyTest, BroadcastsWithAZeroStrideAndCopiesOneElementWithNoDimensions) {
  expect_copies(describe(4, {3, 4}, {0, 4}, {16, 4}), 16, 0, 48, 0);  // one row, three times
  expect_copies(describe(8, {}, {}, {}), 16, 8, 24, 16);
}

TEST_F(StridedCopyTest, AnEmptyCopyDoesNothing) {
  expect_copies(describe(4, {3, 0}, {4, 4}, {4, 4}), 16, 0, 16, 0);
}

TEST_F(StridedCopyTest, ACapturedCopyRunsAtEachReplayAndFollowsReplacedPointers) {
  const std::vector<unsigned char> source = pattern(24, 1);
  unsigned char* device_source = upload(source);
  unsigned char* destination = upload(std::vector<unsigned char>(12, 0));
  stream->synchronize();
  StridedCopy copy = describe(4, {3}, {8}, {4});  // every other int32
  copy.source = device_source;
  copy.destination = destination;
  auto capture = Capture::begin(stream, CaptureMode::Global);
  Operation operation("copy_strided");
  stream->copy_strided_async(operation, copy);
  std::shared_ptr<Graph> graph = capture->end();
  EXPECT_EQ(download(destination, 12), std::vector<unsigned char>(12, 0)) << "captured work ran during the capture";
  const std::vector<GraphNodeInfo> nodes = graph->nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].kind, GraphNodeKind::Kernel);
  EXPECT_EQ(nodes[0].label, "copy_strided");

  std::vector<unsigned char> expected(12);
  for (int i = 0; i < 3; ++i) std::memcpy(expected.data() + i * 4, source.data() + i * 8, 4);
  graph->launch(stream);
  EXPECT_EQ(download(destination, 12), expected);

  // Both pointers repointed: the replay reads and writes the new buffers.
  const std::vector<unsigned char> other_source = pattern(24, 0x40);
  unsigned char* moved_source = upload(other_source);
  unsigned char* moved_destination = upload(std::vector<unsigned char>(12, 0));
  stream->synchronize();
  EXPECT_EQ(graph->replace_pointers({{device_source, moved_source, 24}, {destination, moved_destination, 12}}, {}, {}),
            2u);
  graph->launch(stream);
  for (int i = 0; i < 3; ++i) std::memcpy(expected.data() + i * 4, other_source.data() + i * 8, 4);
  EXPECT_EQ(download(moved_destination, 12), expected);
}

TEST_F(StridedCopyTest, RefusesSidesReachingOutsideTheirAllocation) {
  unsigned char* source = upload(pattern(16, 0));
  unsigned char* destination = upload(pattern(64, 0));
  Operation operation("copy_strided");
  StridedCopy past_the_end = describe(4, {8}, {4}, {4});  // reads 32 bytes of 16
  past_the_end.source = source;
  past_the_end.destination = destination;
  EXPECT_THROW(stream->copy_strided_async(operation, past_the_end), BackendError);
  StridedCopy before_the_start = describe(4, {2}, {-4}, {4});  // walks backwards from the first byte
  before_the_start.source = source;
  before_the_start.destination = destination;
  EXPECT_THROW(stream->copy_strided_async(operation, before_the_start), BackendError);
  StridedCopy scattered_too_far = describe(4, {4}, {4}, {24});  // the last element's bytes are 72..76 of 64
  scattered_too_far.source = source;
  scattered_too_far.destination = destination;
  EXPECT_THROW(stream->copy_strided_async(operation, scattered_too_far), BackendError);
  // The same copies within bounds are taken.
  scattered_too_far.destination_strides[0] = 16;
  EXPECT_NO_THROW(stream->copy_strided_async(operation, scattered_too_far));
}

TEST_F(StridedCopyTest, RefusesElementSizesAndDimensionCountsItCannotCopy) {
  unsigned char* buffer = upload(pattern(64, 0));
  Operation operation("copy_strided");
  StridedCopy odd_size = describe(3, {4}, {3}, {3});
  odd_size.source = odd_size.destination = buffer;
  EXPECT_THROW(stream->copy_strided_async(operation, odd_size), BackendError);
  StridedCopy too_many_dims = describe(1, {1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1});
  too_many_dims.ndim = StridedCopy::kMaxDims + 1;
  too_many_dims.source = too_many_dims.destination = buffer;
  EXPECT_THROW(stream->copy_strided_async(operation, too_many_dims), BackendError);
}

}  // namespace
}  // namespace cuweave
