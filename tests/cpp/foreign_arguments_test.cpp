// Note [Another library's kernel arguments]: the bytes a launch's CArray arguments touch.
#include "cuweave/foreign_arguments.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cuweave::foreign_arguments {
namespace {

using sanitizer::AccessKind;

std::string int64s(const std::vector<std::int64_t>& values) {
  std::string bytes(values.size() * 8, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// A CArray's bytes: data, element count, extents, byte strides.
std::string carray(std::uintptr_t data, const std::vector<std::int64_t>& shape,
                   const std::vector<std::int64_t>& strides) {
  std::int64_t size = 1;
  for (std::int64_t extent : shape) size *= extent;
  std::vector<std::int64_t> values{static_cast<std::int64_t>(data), size};
  values.insert(values.end(), shape.begin(), shape.end());
  values.insert(values.end(), strides.begin(), strides.end());
  return int64s(values);
}

const Parameter kInput{true, false, 1, 4};   // const CArray<float, 1>
const Parameter kOutput{true, true, 1, 4};   // CArray<float, 1>
const Parameter kScalar{false, false, 0, 0};  // float

TEST(ForeignArguments, EachArrayCountsFromItsLowestElementToItsHighestAndValuesTouchNothing) {
  const auto touched = accesses({kInput, kScalar, kOutput},
                                {carray(0x1000, {8}, {4}), int64s({2}).substr(0, 4), carray(0x2000, {8}, {-4})});
  ASSERT_TRUE(touched.has_value());
  ASSERT_EQ(touched->size(), 2u);
  EXPECT_EQ((*touched)[0].begin, 0x1000u);
  EXPECT_EQ((*touched)[0].end, 0x1020u);
  EXPECT_EQ((*touched)[0].kind, AccessKind::Read);
  EXPECT_EQ((*touched)[1].begin, 0x2000u - 28);  // reversed: element 0 is the highest
  EXPECT_EQ((*touched)[1].end, 0x2004u);
  EXPECT_EQ((*touched)[1].kind, AccessKind::Write);
}

TEST(ForeignArguments, AnElementSizeTheSourceDoesNotGiveIsTheSmallestStepBetweenNeighbours) {
  const Parameter unknown{true, false, 2, 0};
  const auto touched = accesses({unknown}, {carray(0x1000, {3, 4}, {64, 8})});  // a 3 x 4 array of 8-byte items
  ASSERT_TRUE(touched.has_value());
  ASSERT_EQ(touched->size(), 1u);
  EXPECT_EQ((*touched)[0].begin, 0x1000u);
  EXPECT_EQ((*touched)[0].end, 0x1000u + 2 * 64 + 3 * 8 + 8);
  // one element, or only broadcast axes: one byte
  const auto single = accesses({unknown}, {carray(0x1000, {1, 5}, {0, 0})});
  ASSERT_TRUE(single.has_value());
  EXPECT_EQ((*single)[0].end - (*single)[0].begin, 1u);
}

TEST(ForeignArguments, AnEmptyArrayOrANullOneTouchesNothing) {
  const auto touched = accesses({kInput, kOutput}, {carray(0x1000, {0}, {4}), carray(0, {8}, {4})});
  ASSERT_TRUE(touched.has_value());
  EXPECT_TRUE(touched->empty());
}

TEST(ForeignArguments, ValuesThatDoNotFitTheParametersSayNothing) {
  EXPECT_FALSE(accesses({kInput, kOutput}, {carray(0x1000, {8}, {4})}).has_value());  // one value missing
  const Parameter matrix{true, false, 2, 4};
  EXPECT_FALSE(accesses({matrix}, {carray(0x1000, {8}, {4})}).has_value());  // a 1-D array where 2-D is declared
}

}  // namespace
}  // namespace cuweave::foreign_arguments
