// HostWriteWatch: host bytes changed before the host followed the copy that reads them are reported
// (Note [Host writes under a copy]).
#include "cuweave/host_write_watch.hpp"

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

}  // namespace
}  // namespace cuweave::sanitizer
