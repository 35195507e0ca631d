// A trace session of bounded size (Note [Tracing]): it keeps the first or the last `limit` activities, in
// arrival order, and counts the rest.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuweave/trace.hpp"

namespace cuweave::trace {
namespace {

std::vector<std::uint64_t> correlations(const Session& session) {
  std::vector<std::uint64_t> result;
  for (const Activity& activity : session.activities()) result.push_back(activity.correlation);
  return result;
}

void add_numbered(Session& session, std::uint64_t from, std::uint64_t to) {
  for (std::uint64_t n = from; n <= to; ++n) {
    Activity activity;
    activity.correlation = n;
    session.add(activity);
  }
}

TEST(TraceSession, KeepingTheLastWrapsAroundAndStillReadsInArrivalOrder) {
  Session session(false, 4, Keep::Last);
  add_numbered(session, 1, 3);
  EXPECT_EQ(correlations(session), (std::vector<std::uint64_t>{1, 2, 3}));
  add_numbered(session, 4, 10);  // the ring wraps more than once
  EXPECT_EQ(correlations(session), (std::vector<std::uint64_t>{7, 8, 9, 10}));
  EXPECT_EQ(session.dropped(), 6u);
}

TEST(TraceSession, KeepingTheFirstIgnoresWhatComesOnceFull) {
  Session session(false, 4, Keep::First);
  add_numbered(session, 1, 10);
  EXPECT_EQ(correlations(session), (std::vector<std::uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(session.dropped(), 6u);
}

TEST(TraceSession, WithoutALimitEverythingIsKept) {
  Session session(false);
  add_numbered(session, 1, 1000);
  EXPECT_EQ(session.activities().size(), 1000u);
  EXPECT_EQ(session.dropped(), 0u);
  EXPECT_EQ(session.limit(), Session::kUnlimited);
}

}  // namespace
}  // namespace cuweave::trace
