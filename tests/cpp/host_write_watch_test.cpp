// HostWriteWatch: host bytes changed before the host followed the copy that reads them are reported
// (Note [Host writes under a copy]).
#include "cuweave/host_write_watch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace cuweave::sanitizer {
namespace {

std::uintptr_t begin_of(const std::vector<int>& v) { return reinterpret_cast<std::uintptr_t>(v.data()); }
std::uintptr_t end_of(const std::vector<int>& v) { return begin_of(v) + v.size() * sizeof(int); }

VectorClock clock_of(AgentId agent, std::uint64_t clock) {
  VectorClock c;
  c.set(agent, clock);
  return c;
}

// Watches both buffers as read by one copy of agent 1 at clock 1.
void watch_both(HostWriteWatch& watch, const std::vector<int>& first, const std::vector<int>& second) {
  for (const std::vector<int>* buffer : {&first, &second}) {
    watch.watch(begin_of(*buffer), end_of(*buffer), 1, 1, OperationInfo{"copy", 0}, "s");
  }
}

TEST(HostWriteWatchTest, AChangeBeforeTheHostFollowsTheCopyIsReportedOnceTheHostDoes) {
  std::vector<int> host(1000, 1);
  HostWriteWatch watch;
  watch.watch(begin_of(host), end_of(host), /*agent=*/3, /*clock=*/5, OperationInfo{"copy", 11}, "stream A");
  host[999] = 2;
  EXPECT_TRUE(watch.host_caught_up(clock_of(3, 4), OperationInfo{"wait", 12}, "the host").empty())
      << "the host does not follow the copy yet";
  EXPECT_EQ(watch.size(), 1u);
  const std::vector<Conflict> found = watch.host_caught_up(clock_of(3, 5), OperationInfo{"wait", 12}, "the host");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].earlier.name, "copy");
  EXPECT_EQ(found[0].earlier.call_site, 11u);
  EXPECT_EQ(found[0].earlier_agent, "stream A");
  EXPECT_EQ(found[0].later.name, kHostWrite);
  EXPECT_EQ(found[0].later.call_site, 12u);
  EXPECT_EQ(found[0].later_kind, AccessKind::Write);
  EXPECT_EQ(found[0].begin, begin_of(host));
  EXPECT_EQ(found[0].end, end_of(host));
  EXPECT_EQ(watch.size(), 0u) << "checked once";
}

TEST(HostWriteWatchTest, UnchangedBytesAndForgottenMemoryAreClean) {
  std::vector<int> kept(64, 7);
  std::vector<int> reused(64, 7);
  HostWriteWatch watch;
  watch_both(watch, kept, reused);
  watch.forget(begin_of(reused) + 4, begin_of(reused) + 8);  // any overlap: handed out anew
  reused[0] = 8;
  EXPECT_TRUE(watch.host_caught_up(clock_of(1, 1), OperationInfo{"wait", 0}, "h").empty());
  EXPECT_EQ(watch.size(), 0u);
}

TEST(HostWriteWatchTest, ReadersDoneChecksOnlyTheRangeWaitedFor) {
  std::vector<int> a(16, 0);
  std::vector<int> b(16, 0);
  HostWriteWatch watch;
  watch_both(watch, a, b);
  a[3] = 1;
  b[3] = 1;
  EXPECT_EQ(watch.readers_done(begin_of(a), end_of(a), OperationInfo{"wait", 0}, "h").size(), 1u);
  EXPECT_EQ(watch.size(), 1u) << "b's copy is still watched";
}

TEST(HostWriteWatchTest, TheChecksumSeesAnyChangedWordAndSwappedWords) {
  std::vector<std::uint64_t> words{1, 2, 3, 4, 5};
  const std::uint64_t before = checksum(words.data(), words.size() * 8);
  std::swap(words[0], words[1]);
  EXPECT_NE(checksum(words.data(), words.size() * 8), before);
  std::swap(words[0], words[1]);
  EXPECT_EQ(checksum(words.data(), words.size() * 8), before);
  reinterpret_cast<unsigned char*>(words.data())[39] ^= 1;  // the last byte
  EXPECT_NE(checksum(words.data(), words.size() * 8), before);
  EXPECT_NE(checksum(words.data(), 39), checksum(words.data(), 38)) << "the length counts";
}

TEST(HostWriteWatchTest, TheChecksumOfALargeBufferSeesEveryByteAndWordsSwappedWithinAndAcrossAccumulators) {
  std::vector<std::uint64_t> words(43);  // 5 rounds of the 8 accumulators, then 24 bytes of tail
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = 0x0101010101010101ull * i;
  const std::size_t bytes = words.size() * 8;
  const std::uint64_t before = checksum(words.data(), bytes);
  auto* raw = reinterpret_cast<unsigned char*>(words.data());
  for (std::size_t i = 0; i < bytes; ++i) {
    raw[i] ^= 0x10;
    EXPECT_NE(checksum(words.data(), bytes), before) << "byte " << i;
    raw[i] ^= 0x10;
  }
  EXPECT_EQ(checksum(words.data(), bytes), before);
  for (std::size_t other : {1, 8, 16, 41}) {  // another accumulator, the same one a round later, two rounds, the tail
    std::swap(words[0], words[other]);
    EXPECT_NE(checksum(words.data(), bytes), before) << "word 0 swapped with word " << other;
    std::swap(words[0], words[other]);
  }
}

TEST(HostWriteWatchTest, RangesUpToAMebibyteAreCheckedWholeLargerOnesSampledAStrideApart) {
  EXPECT_EQ(Sampling::of(Sampling::kExactBytes).stride, 0u);
  const Sampling large = Sampling::of(std::size_t{64} << 20);
  EXPECT_EQ(large.stride, 4096u) << "16384 lines over 64 MiB";
  EXPECT_LT(large.phase, large.stride);
  EXPECT_EQ(large.phase % 64, 0u);
  bool phases_differ = false;
  for (int i = 0; i < 16 && !phases_differ; ++i) phases_differ = Sampling::of(std::size_t{64} << 20).phase != large.phase;
  EXPECT_TRUE(phases_differ) << "each copy draws its own phase";
}

TEST(HostWriteWatchTest, ASampledChecksumSeesAWriteOfAStrideAnywhereAndTheLastByte) {
  std::vector<unsigned char> bytes((std::size_t{4} << 20) + 8, 7);  // 4 MiB: a stride of 256 bytes
  const Sampling sampling = Sampling::of(bytes.size());
  ASSERT_EQ(sampling.stride, 256u);
  const std::uint64_t before = checksum(bytes.data(), bytes.size(), sampling);
  for (std::size_t offset : {std::size_t{0}, std::size_t{100}, std::size_t{1} << 20, bytes.size() - 256}) {
    std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(offset), 256, 9);
    EXPECT_NE(checksum(bytes.data(), bytes.size(), sampling), before) << "256 bytes written at " << offset;
    std::fill_n(bytes.begin() + static_cast<std::ptrdiff_t>(offset), 256, 7);
  }
  bytes.back() = 1;
  EXPECT_NE(checksum(bytes.data(), bytes.size(), sampling), before) << "the last line is always checked";
}

TEST(HostWriteWatchTest, ASampledChecksumMissesAWriteBetweenItsLines) {
  std::vector<unsigned char> bytes(std::size_t{4} << 20, 7);
  const Sampling sampling{256, 0};  // lines at 0, 256, 512...
  const std::uint64_t before = checksum(bytes.data(), bytes.size(), sampling);
  bytes[64] = 9;  // the documented limit: a write smaller than the stride may fall between the lines
  EXPECT_EQ(checksum(bytes.data(), bytes.size(), sampling), before);
  bytes[256] = 9;
  EXPECT_NE(checksum(bytes.data(), bytes.size(), sampling), before);
}

TEST(HostWriteWatchTest, AHostWriteOverALargeWatchedRangeIsFound) {
  std::vector<unsigned char> bytes(std::size_t{64} << 20, 7);
  HostWriteWatch watch;
  const auto begin = reinterpret_cast<std::uintptr_t>(bytes.data());
  watch.watch(begin, begin + bytes.size(), 1, 1, OperationInfo{"copy", 0}, "stream");
  std::fill(bytes.begin() + 1000, bytes.begin() + 9000, 3);  // an 8000-byte write: over a 4 KiB stride
  EXPECT_EQ(watch.readers_done(begin, begin + bytes.size(), OperationInfo{"wait", 0}, "h").size(), 1u);
}

TEST(HostWriteWatchTest, ADeviceWriteEndsTheEarlierWatchesAndHoldsOffLaterOnesUntilTheHostFollowsIt) {
  std::vector<int> host(64, 1);
  HostWriteWatch watch;
  watch.watch(begin_of(host), end_of(host), 1, 1, OperationInfo{"copy", 0}, "s");
  // A copy of agent 2 (clock 3) writes the bytes: the reading copy before it was ordered before it.
  EXPECT_TRUE(watch.device_writes(begin_of(host), end_of(host), 2, 3, VectorClock{}, OperationInfo{kHostWrite, 0}, "h")
                  .empty());
  EXPECT_EQ(watch.size(), 0u) << "the bytes are the device's to change now";
  host[0] = 2;  // what the device's copy writes
  EXPECT_TRUE(watch.host_caught_up(clock_of(1, 1), OperationInfo{"wait", 0}, "h").empty());
  EXPECT_TRUE(watch.device_write_pending(begin_of(host) + 8, begin_of(host) + 12, clock_of(2, 2)))
      << "a copy reading these bytes now would read what the device is still to write";
  EXPECT_FALSE(watch.device_write_pending(begin_of(host), end_of(host), clock_of(2, 3))) << "the host follows it";
  EXPECT_FALSE(watch.device_write_pending(end_of(host), end_of(host) + 4, VectorClock{})) << "other bytes";
  watch.forget(begin_of(host), end_of(host));
  EXPECT_FALSE(watch.device_write_pending(begin_of(host), end_of(host), VectorClock{})) << "handed out anew";
}

TEST(HostWriteWatchTest, AHostWriteBeforeADeviceWriteIsFoundWhereTheDeviceWriteIsQueued) {
  std::vector<int> host(64, 1);
  HostWriteWatch watch;
  watch.watch(begin_of(host), end_of(host), 1, 1, OperationInfo{"copy", 11}, "s");
  host[5] = 2;  // the host, before anyone waited for the copy: the device's write has not run yet
  const std::vector<Conflict> found =
      watch.device_writes(begin_of(host), end_of(host), 1, 2, VectorClock{}, OperationInfo{kHostWrite, 12}, "h");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].earlier.call_site, 11u);
  EXPECT_EQ(found[0].later.call_site, 12u);
}

}  // namespace
}  // namespace cuweave::sanitizer
