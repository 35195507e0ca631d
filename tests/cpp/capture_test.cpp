// Capture bookkeeping (Note [Capture and lifetimes]): which streams take part in a capture, what it keeps alive,
// what waits for its end, and that it ends exactly once, however it ends.
#include "cuweave/default_stream.hpp"
#include "cuweave/operation.hpp"
#include "cuweave/capture.hpp"

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/graph.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/pinned_pool.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using testing::independent_stream;
using testing::Watched;

CaptureState::Status backend_status(const Stream& stream) {
  return backend().capture().capture_state(stream.raw_handle()).status;
}

class CaptureTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(Capture::any_active()) << "an earlier test left a capture active"; }

  std::shared_ptr<Stream> origin = independent_stream();
  std::shared_ptr<Stream> branch = independent_stream();
};

TEST_F(CaptureTest, CaptureIsKnownForItsStreamUntilItEnds) {
  auto capture = Capture::begin(origin, CaptureMode::Global);
  EXPECT_TRUE(Capture::any_active());
  EXPECT_EQ(Capture::of(*origin), capture);
  EXPECT_EQ(Capture::of(*branch), nullptr);
  EXPECT_EQ(capture->stream(), origin);
  EXPECT_EQ(capture->mode(), CaptureMode::Global);
  EXPECT_NE(capture->id(), 0u);
  EXPECT_FALSE(capture->ended());
  EXPECT_EQ(backend_status(*origin), CaptureState::Status::Active);

  std::shared_ptr<Graph> graph = capture->end();
  EXPECT_NE(graph, nullptr);
  EXPECT_TRUE(capture->ended());
  EXPECT_FALSE(Capture::any_active());
  EXPECT_EQ(Capture::of(*origin), nullptr);
  EXPECT_EQ(backend_status(*origin), CaptureState::Status::None);
}

TEST_F(CaptureTest, LegacyDefaultStreamCannotBeCaptured) {
  EXPECT_THROW(Capture::begin(DefaultStream::legacy(0), CaptureMode::Global), InvalidArgument);
  EXPECT_FALSE(Capture::any_active());
}

TEST_F(CaptureTest, StreamAlreadyCapturingCannotBeginAnotherCapture) {
  auto capture = Capture::begin(origin, CaptureMode::Global);
  EXPECT_THROW(Capture::begin(origin, CaptureMode::Global), InvalidArgument);
  EXPECT_EQ(Capture::of(*origin), capture);  // the first capture goes on
  capture->end();
}

TEST_F(CaptureTest, CaptureEndsOnlyOnce) {
  auto capture = Capture::begin(origin, CaptureMode::Global);
  capture->end();
  EXPECT_THROW(capture->end(), InvalidArgument);
  capture->abandon();  // after the end: nothing left to do
  EXPECT_FALSE(Capture::any_active());
}

TEST_F(CaptureTest, EachCaptureHasItsOwnId) {
  auto first = Capture::begin(origin, CaptureMode::Relaxed);
  auto second = Capture::begin(branch, CaptureMode::Relaxed);
  EXPECT_NE(first->id(), second->id());
  second->end();
  EXPECT_TRUE(Capture::any_active()) << "ending one capture ended the count of all";
  first->end();
  EXPECT_FALSE(Capture::any_active());
}

TEST_F(CaptureTest, StreamThatWaitsForTheCapturingStreamJoinsTheCapture) {
  auto capture = Capture::begin(origin, CaptureMode::Global);
  branch->wait(*origin);  // fork
  EXPECT_EQ(Capture::of(*branch), capture);

  Watched used_on_branch;
  services().lifetimes().hold_until_complete(*branch, {used_on_branch.hold()});
  used_on_branch.let_go();
  origin->wait(*branch);  // join
  std::shared_ptr<Graph> graph = capture->end();
  EXPECT_EQ(Capture::of(*branch), nullptr);
  EXPECT_EQ(backend_status(*branch), CaptureState::Status::None);
  EXPECT_TRUE(used_on_branch.alive()) << "what the joined stream captured lives as long as the graph";
  graph.reset();
  EXPECT_FALSE(used_on_branch.alive());
}

TEST_F(CaptureTest, UnjoinedForkFailsTheEndButStillEndsTheCapture) {
  auto block = services().pinned().allocate(4096);
  Watched captured;
  auto capture = Capture::begin(origin, CaptureMode::Global);
  services().lifetimes().hold_until_complete(*origin, {captured.hold()});
  captured.let_go();
  branch->wait(*origin);
  Operation clear("memset");
  branch->memset_async(clear, block->data(), 0, block->size());  // work the origin never waits for

  try {
    capture->end();
    ADD_FAILURE() << "a capture with an unjoined fork ended without an error";
  } catch (const BackendError& error) {
    EXPECT_EQ(error.name(), "cudaErrorStreamCaptureUnjoined");
  }
  EXPECT_TRUE(capture->ended());
  EXPECT_FALSE(Capture::any_active());
  EXPECT_EQ(Capture::of(*branch), nullptr);
  EXPECT_EQ(backend_status(*origin), CaptureState::Status::None);
  EXPECT_EQ(backend_status(*branch), CaptureState::Status::None);
  EXPECT_FALSE(captured.alive()) << "the holds go with the failed capture";
  branch->synchronize();  // both streams work normally again
  origin->synchronize();
}

// Capture::end() tells an end the backend refused (the capture goes on) from one that failed (the capture is
// over); it once unregistered the capture either way, leaving the stream capturing with nothing to end it.
TEST_F(CaptureTest, EndRefusedOnAnotherThreadLeavesTheCaptureActive) {
  auto capture = Capture::begin(origin, CaptureMode::Global);
  std::thread other([&] {
    try {
      capture->end();  // a global capture ends only on the thread that began it
      ADD_FAILURE() << "a global capture ended on another thread";
    } catch (const BackendError& error) {
      EXPECT_EQ(error.name(), "cudaErrorStreamCaptureWrongThread");
    }
  });
  other.join();
  EXPECT_EQ(backend_status(*origin), CaptureState::Status::Active);
  EXPECT_FALSE(capture->ended());
  EXPECT_TRUE(Capture::any_active());
  EXPECT_EQ(Capture::of(*origin), capture);

  capture->abandon();  // on this thread: the stream leaves capture either way
  EXPECT_EQ(backend_status(*origin), CaptureState::Status::None);
}

TEST_F(CaptureTest, HoldsGivenDuringCaptureLiveAsLongAsTheGraph) {
  LifetimeTracker& tracker = services().lifetimes();
  backend().devices().synchronize_device(0);
  tracker.collect();
  const std::size_t pending_before = tracker.pending_entries();
  Watched captured;
  auto capture = Capture::begin(origin, CaptureMode::Global);
  origin->hold({captured.hold()});
  captured.let_go();
  // No event may be recorded for it: captured work runs at each replay, not after this point.
  EXPECT_EQ(tracker.pending_entries(), pending_before);

  std::shared_ptr<Graph> graph = capture->end();
  EXPECT_TRUE(captured.alive());
  capture.reset();
  EXPECT_TRUE(captured.alive());
  graph.reset();
  EXPECT_FALSE(captured.alive());
}

TEST_F(CaptureTest, CapturedWorkRunsOnlyWhenTheGraphIsReplayed) {
  auto block = services().pinned().allocate(4096);
  auto* bytes = static_cast<unsigned char*>(block->data());
  std::memset(bytes, 0, block->size());
  auto capture = Capture::begin(origin, CaptureMode::Global);
  Operation fill("memset");
  fill.keep_alive(block);
  origin->memset_async(fill, bytes, 0x5A, block->size());
  std::shared_ptr<Graph> graph = capture->end();
  origin->synchronize();
  EXPECT_EQ(bytes[0], 0) << "captured work ran during the capture";

  graph->launch(origin);
  origin->synchronize();
  EXPECT_EQ(bytes[0], 0x5A);
  EXPECT_EQ(bytes[block->size() - 1], 0x5A);
}

TEST_F(CaptureTest, DeferredActionsRunOnceTheCaptureHasEnded) {
  int runs = 0;
  auto capture = Capture::begin(origin, CaptureMode::Global);
  capture->defer([&] { ++runs; });
  EXPECT_EQ(runs, 0);
  capture->end();
  EXPECT_EQ(runs, 1);
}

TEST_F(CaptureTest, AbandonDropsWhatWasCapturedAndRunsDeferredActions) {
  int runs = 0;
  Watched captured;
  auto capture = Capture::begin(origin, CaptureMode::Global);
  capture->keep({captured.hold()});
  captured.let_go();
  capture->defer([&] { ++runs; });

  capture->abandon();
  EXPECT_TRUE(capture->ended());
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(captured.alive());
  EXPECT_FALSE(Capture::any_active());
  EXPECT_EQ(backend_status(*origin), CaptureState::Status::None);
}

TEST_F(CaptureTest, DroppingAnActiveCaptureAbandonsIt) {
  Watched captured;
  {
    auto capture = Capture::begin(origin, CaptureMode::Global);
    capture->keep({captured.hold()});
    captured.let_go();
  }
  EXPECT_FALSE(Capture::any_active());
  EXPECT_EQ(backend_status(*origin), CaptureState::Status::None);
  EXPECT_FALSE(captured.alive());
}

TEST_F(CaptureTest, WhenNoneActiveWaitsForTheLastCaptureToEnd) {
  int runs = 0;
  Capture::when_none_active([&] { ++runs; });
  EXPECT_EQ(runs, 1) << "with no capture active the action runs at once";

  auto first = Capture::begin(origin, CaptureMode::Relaxed);
  auto second = Capture::begin(branch, CaptureMode::Relaxed);
  Capture::when_none_active([&] { ++runs; });
  EXPECT_EQ(runs, 1);
  first->end();
  EXPECT_EQ(runs, 1) << "ran while another capture was still active";
  second->abandon();
  EXPECT_EQ(runs, 2);
}

TEST_F(CaptureTest, ACaptureBeginsOnlyOnceTheFencesTakenBeforeItAreGone) {
  // Note [Deciding beside a beginning capture]
  std::optional<Capture::BeginFence> fence;
  fence.emplace();
  EXPECT_FALSE(fence->any_active());
  std::shared_ptr<Capture> capture;
  std::thread beginner([&] { capture = Capture::begin(origin, CaptureMode::Relaxed); });  // (ended here)
  while (!Capture::any_active()) std::this_thread::yield();  // counted active before it waits
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(backend_status(*origin), CaptureState::Status::None) << "began while a fence taken before it lived";
  fence.reset();
  beginner.join();
  ASSERT_NE(capture, nullptr);
  EXPECT_EQ(backend_status(*origin), CaptureState::Status::Active);
  {
    const Capture::BeginFence later;  // taken once the capture is active: sees it, and nothing waits
    EXPECT_TRUE(later.any_active());
  }
  capture->end();
  EXPECT_FALSE(Capture::any_active());
}

// Note [Graph footprints]
TEST(GraphFootprintTest, NodesAccessesAreGatheredReplacedAndRepointed) {
  GraphFootprint footprint;
  int a = 0, b = 0;  // two node handles
  footprint.set_node(&a, {sanitizer::Access{100, 200, sanitizer::AccessKind::Write}});
  footprint.set_node(&b, {sanitizer::Access{300, 400, sanitizer::AccessKind::Read}});
  footprint.set_node(&a, {sanitizer::Access{150, 200, sanitizer::AccessKind::Write}});  // repointed: replaced
  ASSERT_EQ(footprint.all().size(), 2u);
  EXPECT_EQ(footprint.all()[0].begin, 150u);
  const std::uint64_t before = footprint.changes;
  // Bytes 100..200 now live at 1100..1200: the access inside moves, the one outside stays.
  footprint.remap({PointerRemap{reinterpret_cast<const void*>(std::uintptr_t{100}),
                                reinterpret_cast<const void*>(std::uintptr_t{1100}), 100}});
  EXPECT_GT(footprint.changes, before);
  const auto all = footprint.all();
  EXPECT_EQ(all[0].begin, 1150u);
  EXPECT_EQ(all[0].end, 1200u);
  EXPECT_EQ(all[1].begin, 300u);
}

TEST_F(CaptureTest, WaitingOnACapturingStreamIsRefused) {
  auto capture = Capture::begin(origin, CaptureMode::Global);
  try {
    Capture::refuse_wait(*origin, "cudaStreamSynchronize", "stream.synchronize()");
    ADD_FAILURE() << "a wait on a capturing stream was allowed";
  } catch (const BackendError& error) {
    EXPECT_EQ(error.name(), "cudaErrorStreamCaptureUnsupported");
  }
  EXPECT_THROW(origin->synchronize(), BackendError);
  EXPECT_THROW(origin->idle(), BackendError);
  EXPECT_NO_THROW(Capture::refuse_wait(*branch, "cudaStreamSynchronize", "stream.synchronize()"));

  capture->end();  // refusing invalidated nothing
  EXPECT_NO_THROW(origin->synchronize());
}

TEST_F(CaptureTest, CaptureBegunOutsideCuweaveIsNotOneOfItsCaptures) {
  auto capture = Capture::begin(origin, CaptureMode::Relaxed);
  backend().capture().begin_capture(branch->handle(), CaptureMode::Relaxed);  // as another library would
  EXPECT_EQ(backend_status(*branch), CaptureState::Status::Active);
  EXPECT_EQ(Capture::of(*branch), nullptr);
  backend().graphs().destroy_graph(backend().capture().end_capture(branch->handle()));
  capture->end();
}

// Note [Footprints of captures]: with the sanitizer off, the capture knows what its operations touch, unless work
// that no operation of cuweave's queued (a raw kernel, here a raw memset) was captured between them or after them.
TEST_F(CaptureTest, AGraphCapturedWithoutTheSanitizerTouchesWhatItsOperationsTouchUnlessItHoldsUnseenWork) {
  ASSERT_FALSE(sanitizer::enabled());
  auto block = services().pinned().allocate(8192);
  auto* bytes = static_cast<unsigned char*>(block->data());
  const auto address = reinterpret_cast<std::uintptr_t>(bytes);
  const auto captured = [&](bool raw_between, bool raw_after) {
    auto capture = Capture::begin(origin, CaptureMode::Global);
    for (int i = 0; i < 2; ++i) {
      Operation fill("memset");
      fill.writes(bytes, 4096).keep_alive(block);
      origin->memset_async(fill, bytes, 1, 4096);
      if ((i == 0 && raw_between) || (i == 1 && raw_after)) {
        backend().memory().memset_async(bytes + 4096, 2, 4096, origin->handle());
      }
    }
    return capture->end();
  };
  const std::vector<sanitizer::Access> known = captured(false, false)->touches();
  ASSERT_EQ(known.size(), 2u);  // each operation's
  for (const sanitizer::Access& access : known) {
    EXPECT_EQ(access.begin, address);
    EXPECT_EQ(access.end, address + 4096);
    EXPECT_EQ(access.kind, sanitizer::AccessKind::Write);
  }
  for (const auto& [between, after] : {std::pair{true, false}, std::pair{false, true}}) {
    const std::vector<sanitizer::Access> unknown = captured(between, after)->touches();
    ASSERT_EQ(unknown.size(), 1u);
    EXPECT_EQ(unknown[0].begin, sanitizer::everything().begin);
    EXPECT_EQ(unknown[0].end, sanitizer::everything().end);
  }
  origin->synchronize();
}

}  // namespace
}  // namespace cuweave
