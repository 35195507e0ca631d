// Which bytes two accesses share when one or both are stepped (runs of `width` bytes every `period`).
#include "cuweave/byte_pattern.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

namespace cuweave {
namespace {

using Shared = std::pair<std::uintptr_t, std::uintptr_t>;

BytePattern range(std::uintptr_t begin, std::uintptr_t end) { return {begin, end, 0, 0}; }
BytePattern stepped(std::uintptr_t begin, std::uintptr_t end, std::uintptr_t period, std::uintptr_t width) {
  return {begin, end, period, width};
}

// The bytes a pattern touches, one by one (the reference the tests compare against).
std::set<std::uintptr_t> bytes_of(const BytePattern& p) {
  std::set<std::uintptr_t> bytes;
  for (std::uintptr_t at = p.begin; at < p.end; ++at) {
    if (p.contiguous() || (at - p.begin) % p.period < p.width) bytes.insert(at);
  }
  return bytes;
}

bool share_a_byte(const BytePattern& a, const BytePattern& b) {
  const auto in_b = bytes_of(b);
  for (std::uintptr_t at : bytes_of(a)) {
    if (in_b.count(at) != 0) return true;
  }
  return false;
}

TEST(BytePatternTest, EvenAndOddElementsShareNoByteAndAWindowOverBothSharesWithEach) {
  const auto evens = stepped(1000, 1000 + 4096 * 8, 8, 4);  // x[::2] of float32
  const auto odds = stepped(1004, 1000 + 4096 * 8, 8, 4);   // x[1::2]
  EXPECT_FALSE(first_shared_run(evens, odds));
  EXPECT_FALSE(first_shared_run(odds, evens));
  EXPECT_EQ(first_shared_run(evens, range(1000, 1016)), (Shared{1000, 1004}));
  EXPECT_EQ(first_shared_run(range(1000, 1016), odds), (Shared{1004, 1008}));
  EXPECT_FALSE(first_shared_run(range(1004, 1008), evens));  // one odd element only
}

TEST(BytePatternTest, ColumnsOfAMatrixShareBytesOnlyWhereTheirColumnsOverlap) {
  // A 1000 x 64 float32 matrix: columns [0, 8) and [8, 16) are runs of 32 bytes every 256.
  const auto left = stepped(0, 999 * 256 + 32, 256, 32);
  const auto right = stepped(32, 999 * 256 + 64, 256, 32);
  const auto middle = stepped(16, 999 * 256 + 48, 256, 32);  // columns [4, 12)
  EXPECT_FALSE(first_shared_run(left, right));
  EXPECT_EQ(first_shared_run(left, middle), (Shared{16, 32}));
  EXPECT_EQ(first_shared_run(middle, right), (Shared{32, 48}));
}

TEST(BytePatternTest, PatternsOfDifferentPeriodsShareWhereTheirRunsMeet) {
  const auto every_second = stepped(0, 4800, 8, 4);  // x[::2]
  const auto every_third = stepped(4, 4800, 12, 4);  // x[1::3]: elements 1, 4, 7, ...: element 4 is even
  EXPECT_EQ(first_shared_run(every_second, every_third), (Shared{16, 20}));
  const auto odd_thirds = stepped(4, 4800, 24, 4);  // x[1::6]: elements 1, 7, 13, ...: all odd
  EXPECT_FALSE(first_shared_run(every_second, odd_thirds));
}

TEST(BytePatternTest, DisjointPatternsOfLongArraysAreToldApartWithinOneCommonPeriod) {
  // x[::2] and x[1::4] of 2^24 float32 elements: they repeat together every 16 bytes, so the answer comes
  // from the first two runs, not from walking (or giving up on) millions.
  const std::uintptr_t end = std::uintptr_t{4} << 24;
  EXPECT_FALSE(first_shared_run(stepped(0, end, 8, 4), stepped(4, end, 16, 4)));
  // Periods of 4001 and 4003 elements repeat together only after 4001 x 4003 of them: still answered exactly,
  // for the first halves of one's elements beside the second halves of the other's (no byte shared) and for
  // whole elements (element 4001 x 4003 is in both).
  EXPECT_FALSE(first_shared_run(stepped(0, end, 4001 * 4, 2), stepped(2, end, 4003 * 4, 2)));
  EXPECT_EQ(first_shared_run(stepped(0, end, 4001 * 4, 4), stepped(4003 * 4 * 4001, end, 4003 * 4, 4)),
            (Shared{4003 * 4 * 4001, 4003 * 4 * 4001 + 4}));
}

TEST(BytePatternTest, AgreesWithTheBytesOneByOneOnSmallPatterns) {
  int checked = 0;
  for (std::uintptr_t pa : {0u, 3u, 4u, 8u, 10u, 12u}) {
    for (std::uintptr_t wa : {1u, 2u, 4u}) {
      for (std::uintptr_t pb : {0u, 4u, 6u, 7u, 8u}) {
        for (std::uintptr_t wb : {1u, 3u}) {
          for (std::uintptr_t ba = 0; ba < 6; ++ba) {
            for (std::uintptr_t bb = 0; bb < 6; ++bb) {
              const auto a = stepped(ba, ba + 150, pa, wa);  // longer than any two periods repeat
              const auto b = stepped(bb, bb + 137, pb, wb);
              const auto shared = first_shared_run(a, b);
              ASSERT_EQ(shared.has_value(), share_a_byte(a, b)) << ba << " " << pa << " " << wa << " / " << bb
                                                                << " " << pb << " " << wb;
              if (shared) {
                for (std::uintptr_t at = shared->first; at < shared->second; ++at) {
                  ASSERT_TRUE(bytes_of(a).count(at) && bytes_of(b).count(at));
                }
              }
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 6 * 3 * 5 * 2 * 36);
}

}  // namespace
}  // namespace cuweave
