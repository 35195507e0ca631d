// The sanitizer as the core drives it (Note [What the sanitizer sees]), in process on the simulator: two streams
// touching the same bytes race unless something orders them (a wait for the other stream, an event, a host
// synchronize), a read beside a read is no race, new memory forgets its bytes' history, and Mode::Warn reports
// to the reporter instead of throwing.
#include "cuweave/sanitizer.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/owned_stream.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave::sanitizer {
namespace {

using testing::independent_stream;

std::vector<Conflict> reported;  // what the test reporter received (Mode::Warn)
void keep_report(const std::vector<Conflict>& conflicts) {
  reported.insert(reported.end(), conflicts.begin(), conflicts.end());
}

class SanitizerTest : public ::testing::Test {
 protected:
  void SetUp() override { enable(Mode::Raise); }
  void TearDown() override {
    disable();
    set_reporter(nullptr);
    reported.clear();
    backend().devices().synchronize_device(0);
  }

  // The conflicts `operation` raises, or none.
  static std::vector<Conflict> raised_by(Stream& stream, const std::string& name, const Access& access) {
    try {
      operation(stream, name, {access});
    } catch (const RaceFound& race) {
      return race.conflicts();
    }
    return {};
  }

  std::vector<unsigned char> bytes = std::vector<unsigned char>(256);
  std::shared_ptr<Stream> first = independent_stream();
  std::shared_ptr<Stream> second = independent_stream();
};

TEST_F(SanitizerTest, AReadOnAnotherStreamOfUnorderedWrittenBytesIsARaceNamingBoth) {
  operation(*first, "fill", {writes(bytes.data(), 128)});
  const std::vector<Conflict> conflicts = raised_by(*second, "sum", reads(bytes.data() + 64, 128));
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].earlier.name, "fill");
  EXPECT_EQ(conflicts[0].later.name, "sum");
  EXPECT_EQ(conflicts[0].earlier_kind, AccessKind::Write);
  EXPECT_EQ(conflicts[0].later_kind, AccessKind::Read);
  // Only the bytes both touch.
  EXPECT_EQ(conflicts[0].begin, reinterpret_cast<std::uintptr_t>(bytes.data() + 64));
  EXPECT_EQ(conflicts[0].end, reinterpret_cast<std::uintptr_t>(bytes.data() + 128));
  EXPECT_NE(conflicts[0].earlier_agent, conflicts[0].later_agent);
}

TEST_F(SanitizerTest, AWriteAfterAnUnorderedReadIsARaceToo) {
  operation(*first, "sum", {reads(bytes.data(), 64)});
  EXPECT_EQ(raised_by(*second, "fill", writes(bytes.data(), 64)).size(), 1u);
}

TEST_F(SanitizerTest, ReadsBesideReadsAndBytesApartAreNoRace) {
  operation(*first, "sum", {reads(bytes.data(), 64)});
  EXPECT_TRUE(raised_by(*second, "sum", reads(bytes.data(), 64)).empty());
  operation(*first, "fill", {writes(bytes.data() + 128, 64)});
  EXPECT_TRUE(raised_by(*second, "fill", writes(bytes.data() + 192, 64)).empty());
}

TEST_F(SanitizerTest, AStreamThatWaitedForTheWriterReadsInOrder) {
  operation(*first, "fill", {writes(bytes.data(), 64)});
  second->wait(*first);
  EXPECT_TRUE(raised_by(*second, "sum", reads(bytes.data(), 64)).empty());
}

TEST_F(SanitizerTest, AnEventRecordedAfterTheWriteAndWaitedForOrdersTheRead) {
  operation(*first, "fill", {writes(bytes.data(), 64)});
  const EventHandle event = backend().streams().create_event(0, kEventDefault);
  first->record_unobserved(event);
  event_recorded(event, *first);
  second->wait(event);
  EXPECT_TRUE(raised_by(*second, "sum", reads(bytes.data(), 64)).empty());
  event_destroyed(event);
  backend().streams().destroy_event(event);
}

TEST_F(SanitizerTest, AnEventRecordedBeforeTheWriteDoesNotOrderIt) {
  const EventHandle event = backend().streams().create_event(0, kEventDefault);
  first->record_unobserved(event);
  event_recorded(event, *first);
  operation(*first, "fill", {writes(bytes.data(), 64)});
  second->wait(event);
  EXPECT_EQ(raised_by(*second, "sum", reads(bytes.data(), 64)).size(), 1u);
  event_destroyed(event);
  backend().streams().destroy_event(event);
}

TEST_F(SanitizerTest, TheHostSynchronizingTheWriterOrdersLaterWorkOnAnyStream) {
  operation(*first, "fill", {writes(bytes.data(), 64)});
  first->synchronize();
  EXPECT_TRUE(raised_by(*second, "sum", reads(bytes.data(), 64)).empty());
}

TEST_F(SanitizerTest, NewMemoryForgetsWhatTouchedItsBytesBefore) {
  operation(*first, "fill", {writes(bytes.data(), 64)});
  allocated(bytes.data(), 64);  // cuweave's allocator handed the range out afresh
  EXPECT_TRUE(raised_by(*second, "sum", reads(bytes.data(), 64)).empty());
}

TEST_F(SanitizerTest, AStreamMadeWhereADestroyedOneLayIsANewAgent) {
  // The sanitizer keeps the stream it met last beside its table of streams: a stream made at the address of one
  // destroyed must not inherit that one's agent from it (or its program order would hide a race).
  std::shared_ptr<Stream> gone = OwnedStream::create(0, 0, /*blocking=*/false, "gone");
  const Stream* address = gone.get();
  operation(*gone, "fill", {writes(bytes.data(), 64)});
  gone->synchronize();
  gone.reset();
  std::vector<std::shared_ptr<Stream>> made;
  while (made.size() < 64 && (made.empty() || made.back().get() != address)) {
    made.push_back(OwnedStream::create(0, 0, /*blocking=*/false, "made"));
  }
  if (made.back().get() != address) GTEST_SKIP() << "no new stream took the destroyed one's address";
  Stream& again = *made.back();
  operation(again, "fill", {writes(bytes.data(), 64)});
  const std::vector<Conflict> conflicts = raised_by(*second, "sum", reads(bytes.data(), 64));
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_NE(conflicts[0].earlier_agent.find("'made'"), std::string::npos) << conflicts[0].earlier_agent;
}

TEST_F(SanitizerTest, InWarnModeARaceGoesToTheReporterAndTheOperationGoesOn) {
  set_reporter(&keep_report);
  enable(Mode::Warn);  // the innermost mode applies
  operation(*first, "fill", {writes(bytes.data(), 64)});
  EXPECT_NO_THROW(operation(*second, "sum", {reads(bytes.data(), 64)}));
  disable();
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].earlier.name, "fill");
  EXPECT_EQ(reported[0].later.name, "sum");
}

}  // namespace
}  // namespace cuweave::sanitizer
