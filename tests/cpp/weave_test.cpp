// Note [Weaving]: placement, waits and records of the weave, driven with byte ranges alone (no memory is
// touched: place() only chooses streams and queues event records and waits on them).
#include "cuweave/owned_stream.hpp"
#include "cuweave/weave.hpp"

#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using sanitizer::Access;
using sanitizer::AccessKind;
using testing::independent_stream;

// Byte ranges standing for arrays: A is [1000, 1100), B [2000, 2100), ...
Access reads(char array) {
  const std::uintptr_t begin = 1000 * static_cast<std::uintptr_t>(array - 'A' + 1);
  return {begin, begin + 100, AccessKind::Read};
}
Access writes(char array) {
  Access access = reads(array);
  access.kind = AccessKind::Write;
  return access;
}

// A weave's first stream is the thread's current stream (cuweave.weave() begins it so).
class WeaveTest : public ::testing::Test {
 protected:
  WeaveTest() { current_stream::push(first); }
  ~WeaveTest() override { current_stream::pop(first.get()); }
  void TearDown() override {
    if (weave) weave->end();
    backend().devices().synchronize_device(0);
  }
  // The strand `stream` is in the weave.
  std::size_t strand(const std::shared_ptr<Stream>& stream) const {
    const auto streams = weave->streams();
    for (std::size_t i = 0; i < streams.size(); ++i) {
      if (streams[i] == stream) return i;
    }
    ADD_FAILURE() << "not a strand";
    return streams.size();
  }

  std::shared_ptr<Stream> first = independent_stream();
  std::vector<std::shared_ptr<Stream>> others{independent_stream(), independent_stream(), independent_stream()};
  std::shared_ptr<Weave> weave = begin();

 private:
  std::shared_ptr<Weave> begin() {
    current_stream::push(first);
    auto made = Weave::begin(first, others);
    current_stream::pop(first.get());
    return made;
  }
};

TEST_F(WeaveTest, IsActiveOnItsThreadUntilItEndsAndRefusesASecondWeave) {
  EXPECT_EQ(Weave::active(), weave.get());
  EXPECT_THROW(Weave::begin(first, {}), std::exception);
  weave->end();
  EXPECT_EQ(Weave::active(), nullptr);
  weave->end();  // idempotent
}

TEST_F(WeaveTest, AChainStaysOnTheFirstStreamAndWaitsForNothing) {
  for (int i = 0; i < 10; ++i) EXPECT_EQ(weave->place({reads('A'), writes('A')}, nullptr), first);
  weave->end();
  const WeaveCounts counts = weave->counts();
  EXPECT_EQ(counts.per_stream, (std::vector<std::size_t>{10, 0, 0, 0}));
  EXPECT_EQ(counts.waits, 0u);
  EXPECT_EQ(counts.records, 1u);  // the entry, sealed as the first stream went on past it
}

TEST_F(WeaveTest, ChainsTakenInTurnEachStayOnTheirStreamWithoutWaitsOrRecords) {
  // The wide DAG's shape: chain c writes its array at every step, the chains issued in turn.
  std::vector<std::shared_ptr<Stream>> placed;
  for (char c : {'A', 'B', 'C', 'D'}) placed.push_back(weave->place({writes(c)}, nullptr));
  const WeaveCounts before = weave->counts();
  for (int step = 0; step < 5; ++step) {
    for (int c = 0; c < 4; ++c) EXPECT_EQ(weave->place({reads('A' + c), writes('A' + c)}, nullptr), placed[c]);
  }
  EXPECT_EQ(weave->counts().waits, before.waits);
  EXPECT_EQ(weave->counts().records, before.records);
  EXPECT_EQ(weave->counts().operations, before.operations + 20);
}

TEST_F(WeaveTest, AWriteOfBytesReadSinceOnAnotherStreamWaitsForTheRead) {
  weave->place({writes('A')}, nullptr);                       // first stream
  auto reader = weave->place({reads('X'), writes('B')}, nullptr);  // another stream
  ASSERT_NE(reader, first);
  weave->place({reads('A'), writes('A')}, nullptr);  // the chain goes on: nothing read A since
  auto r = weave->place({reads('A'), writes('C')}, reader);  // A read on the other stream
  EXPECT_EQ(r, reader);
  const std::size_t waits = weave->counts().waits;
  EXPECT_EQ(weave->place({writes('A')}, nullptr), first);  // A's writer's stream, after the read
  EXPECT_EQ(weave->counts().waits, waits + 1);
}

TEST_F(WeaveTest, AStrandsLastOperationTouchingMoreThanTheNextOneIsSealedForOthers) {
  weave->place({reads('X'), writes('A'), writes('B')}, nullptr);  // first stream: A and B
  const std::size_t records = weave->counts().records;
  EXPECT_EQ(weave->place({writes('A')}, nullptr), first);  // B stays as that operation left it: sealed
  EXPECT_EQ(weave->counts().records, records + 1);
  auto b_reader = weave->place({reads('B'), writes('C')}, nullptr);  // waits for the seal, not for the new A
  EXPECT_NE(b_reader, first);
}

TEST_F(WeaveTest, AChainOnANamedStreamStaysThereAndAnotherStreamNamedWaitsForIt) {
  auto mine = independent_stream();
  EXPECT_EQ(weave->place({writes('A')}, mine), mine);
  EXPECT_EQ(weave->place({reads('A'), writes('A')}, mine), mine);
  const std::size_t waits = weave->counts().waits;
  auto other = independent_stream();
  EXPECT_EQ(weave->place({reads('A'), writes('A')}, other), other);  // the chain moved: after its last write
  EXPECT_EQ(weave->counts().waits, waits + 1);
}

TEST_F(WeaveTest, AForkTakesASecondStreamAndTheJoinWaitsOnlyForIt) {
  auto p = weave->place({reads('X'), writes('P')}, nullptr);
  auto q = weave->place({reads('X'), writes('Q')}, nullptr);  // independent of p
  auto r = weave->place({reads('P'), reads('Q'), writes('R')}, nullptr);
  EXPECT_EQ(p, first);
  EXPECT_NE(q, first);
  EXPECT_EQ(r, first);
  weave->end();  // the first stream already follows q's: nothing more
  EXPECT_EQ(weave->counts().waits, 2u);  // q's stream for the entry, r's for q
  EXPECT_EQ(weave->counts().records, 3u);
}

TEST_F(WeaveTest, ADependencyAnEarlierWaitImpliesAddsNoWait) {
  weave->place({writes('A')}, nullptr);                          // first stream
  auto b = weave->place({writes('B')}, nullptr);                 // another (waits for the entry)
  weave->place({reads('A'), reads('B'), writes('C')}, nullptr);  // first stream, waits for b
  auto d = weave->place({reads('B'), writes('D')}, nullptr);     // b's stream goes on
  EXPECT_EQ(d, b);
  weave->place({reads('C'), reads('D'), writes('E')}, nullptr);  // first stream, waits for d
  const std::size_t waits = weave->counts().waits;
  EXPECT_EQ(weave->place({reads('B'), writes('F')}, first), first);  // B's writer: implied by the wait for d
  EXPECT_EQ(weave->counts().waits, waits);
}

TEST_F(WeaveTest, ASealRecordedAfterAWaitCarriesIt) {
  weave->place({writes('A')}, nullptr);                          // first stream
  auto b = weave->place({writes('B')}, nullptr);                 // another
  ASSERT_NE(b, first);
  weave->place({reads('A'), reads('B'), writes('C')}, nullptr);  // first stream: seals A's writer, waits for b
  weave->place({reads('C'), writes('D')}, nullptr);              // seals C's writer, which follows b
  auto mine = independent_stream();
  const std::size_t waits = weave->counts().waits;
  EXPECT_EQ(weave->place({reads('D'), reads('B'), writes('E')}, mine), mine);  // D's writer's seal implies b
  EXPECT_EQ(weave->counts().waits, waits + 1);
}

TEST_F(WeaveTest, AWaitForALaterSealOfAStrandCoversItsEarlierOperations) {
  weave->place({writes('A')}, nullptr);                   // first stream
  weave->place({reads('A'), writes('B')}, nullptr);       // seals A's writer
  weave->place({reads('B'), writes('C')}, nullptr);       // seals B's writer, no wait between the two seals
  auto mine = independent_stream();
  EXPECT_EQ(weave->place({reads('B'), writes('M')}, mine), mine);  // waits for B's writer
  const std::size_t waits = weave->counts().waits;
  EXPECT_EQ(weave->place({reads('A'), writes('N')}, mine), mine);  // A's writer came before it: no wait
  EXPECT_EQ(weave->counts().waits, waits);
}

TEST_F(WeaveTest, WritesWaitForEveryReaderSinceTheLastWrite) {
  weave->place({writes('A')}, nullptr);
  auto r1 = weave->place({reads('A'), writes('B')}, nullptr);
  auto r2 = weave->place({reads('A'), writes('C')}, nullptr);
  auto r3 = weave->place({reads('A'), writes('D')}, nullptr);
  EXPECT_EQ(r1, first);
  EXPECT_NE(r2, r3);
  const std::size_t waits = weave->counts().waits;
  auto w = weave->place({writes('A')}, nullptr);  // after all three reads (WAR), on one of their streams
  EXPECT_TRUE(w == r1 || w == r2 || w == r3);
  EXPECT_EQ(weave->counts().waits, waits + 2);
}

TEST_F(WeaveTest, AnExplicitStreamIsTrackedButNeverChosen) {
  auto mine = independent_stream();
  weave->place({writes('A')}, nullptr);
  EXPECT_EQ(weave->place({reads('A'), writes('B')}, mine), mine);  // waits for A's writer
  EXPECT_EQ(weave->counts().waits, 1u);
  auto next = weave->place({reads('B'), writes('C')}, nullptr);  // follows `mine`, placed elsewhere
  EXPECT_NE(next, mine);
  EXPECT_EQ(weave->counts().waits, 2u);
  weave->end();
  EXPECT_EQ(weave->streams().size(), 5u);
  EXPECT_EQ(strand(mine), 4u);
}

TEST_F(WeaveTest, PartlyOverlappingRangesAreDependencies) {
  weave->place({{1000, 1100, AccessKind::Write}}, nullptr);
  weave->place({{5000, 5100, AccessKind::Write}}, nullptr);  // elsewhere
  const std::size_t waits = weave->counts().waits;
  auto s = weave->place({{1050, 5050, AccessKind::Read}, {9000, 9100, AccessKind::Write}}, nullptr);
  EXPECT_EQ(weave->counts().waits, waits + 1);  // the first write on one stream, the second on the other
  (void)s;
}

// Note [Segments found again]: segments found for chains' steps, then erased by one write over both arrays, are
// looked up anew (a stale one is memory the map freed: the sanitizer build of these tests reads it as an error).
TEST_F(WeaveTest, AWriteOverSeveralArraysTakesTheirBytesFromTheChainsBefore) {
  auto a = weave->place({writes('A')}, nullptr);
  auto b = weave->place({writes('B')}, nullptr);
  ASSERT_NE(a, b);
  EXPECT_EQ(weave->place({writes('A')}, nullptr), a);  // each chain found again on its stream
  EXPECT_EQ(weave->place({writes('B')}, nullptr), b);
  const std::size_t waits = weave->counts().waits;
  auto both = weave->place({{1000, 2100, AccessKind::Write}}, nullptr);  // A, the gap, and B: after both chains
  EXPECT_EQ(weave->counts().waits, waits + 1);
  // A's bytes are that write's now: writing them again follows it alone, on its stream, waiting for nothing.
  EXPECT_EQ(weave->place({writes('A')}, nullptr), both);
  EXPECT_EQ(weave->place({writes('A')}, nullptr), both);
  EXPECT_EQ(weave->counts().waits, waits + 1);
  // B's bytes too: its new chain follows the write (through a seal where placed elsewhere), then stays put.
  auto b_again = weave->place({writes('B')}, nullptr);
  EXPECT_EQ(weave->place({writes('B')}, nullptr), b_again);
  EXPECT_EQ(weave->counts().waits, waits + (b_again == both ? 1 : 2));
}

// Note [Weaving]: several devices. The copies of other devices' arrays a weave keeps for their readers.
TEST_F(WeaveTest, AKeptCopyServesItsSourceUntilTheSourceIsWrittenOrTheWeaveEnds) {
  auto on_device_1 = OwnedStream::create(1, 0, false);
  auto source = DeviceArray::allocate({64}, DType::from_typestr("<f4"), first);
  auto copy = DeviceArray::allocate({64}, DType::from_typestr("<f4"), on_device_1);
  auto other = DeviceArray::allocate({64}, DType::from_typestr("<f4"), first);
  weave->keep_copy(source, copy);
  EXPECT_EQ(weave->copy_on(*source, 1), copy);
  EXPECT_EQ(weave->copy_on(*source, 0), nullptr);  // a copy on another device than asked
  EXPECT_EQ(weave->copy_on(*other, 1), nullptr);
  weave->place({sanitizer::touches(*source, AccessKind::Read)}, nullptr);  // a read keeps it
  EXPECT_EQ(weave->copy_on(*source, 1), copy);
  weave->place({sanitizer::touches(*source, AccessKind::Write)}, nullptr);  // a write makes it stale
  EXPECT_EQ(weave->copy_on(*source, 1), nullptr);
  weave->keep_copy(source, copy);
  weave->end();
  EXPECT_EQ(weave->copy_on(*source, 1), nullptr);  // the weave no longer holds it
  EXPECT_EQ(copy.use_count(), 1);
  backend().devices().synchronize_device(1);
}

// A weave begun on the current stream takes its other streams from those no weave holds, in the same order each
// time (a loop of weaves keeps each array on the stream it used before), and gives them back as it ends.
class SpareStreamsTest : public ::testing::Test {
 protected:
  SpareStreamsTest() { current_stream::push(first); }
  ~SpareStreamsTest() override {
    current_stream::pop(first.get());
    backend().devices().synchronize_device(0);
  }
  std::shared_ptr<Stream> first = independent_stream();
};

TEST_F(SpareStreamsTest, AWeaveTakesTheStreamsTheLastOneGaveBackInTheSameOrder) {
  auto weave = Weave::begin_on_current(4);
  const std::vector<std::shared_ptr<Stream>> taken = weave->streams();
  ASSERT_EQ(taken.size(), 4u);
  EXPECT_EQ(taken[0], first);
  weave->end();  // gives them back while the ended weave is still alive
  auto next = Weave::begin_on_current(4);
  EXPECT_EQ(next->streams(), taken);
  next->end();
  auto fewer = Weave::begin_on_current(2);
  EXPECT_EQ(fewer->streams(), (std::vector<std::shared_ptr<Stream>>{first, taken[1]}));
  fewer->end();
}

TEST_F(SpareStreamsTest, TwoOpenWeavesHoldNoStreamInCommonAndAWeaveGoneGivesItsStreamsBack) {
  std::vector<std::shared_ptr<Stream>> mine;
  auto weave = Weave::begin_on_current(3);
  mine = weave->streams();
  std::vector<std::shared_ptr<Stream>> theirs;
  std::thread other([&theirs, this] {
    current_stream::push(first);
    auto elsewhere = Weave::begin_on_current(3);
    theirs = elsewhere->streams();
    current_stream::pop(first.get());
    // Not ended: going, it gives its streams back all the same.
  });
  other.join();
  for (std::size_t i = 1; i < mine.size(); ++i) {
    for (std::size_t j = 1; j < theirs.size(); ++j) EXPECT_NE(mine[i], theirs[j]);
  }
  weave->end();
  weave.reset();
  auto next = Weave::begin_on_current(5);  // this weave's two first, then the other's two
  EXPECT_EQ(next->streams(),
            (std::vector<std::shared_ptr<Stream>>{first, mine[1], mine[2], theirs[1], theirs[2]}));
  next->end();
}

TEST_F(SpareStreamsTest, RefusesASecondWeaveOnItsThread) {
  auto weave = Weave::begin_on_current(2);
  EXPECT_THROW(Weave::begin_on_current(2), InvalidArgument);
  EXPECT_THROW(Weave::begin(first, {}), InvalidArgument);
  weave->end();
  EXPECT_THROW(Weave::begin_on_current(0), InvalidArgument);
}

}  // namespace
}  // namespace cuweave
