// Note [Other libraries' kernels in a weave]: another library's launches placed in a weave, and the ordering
// between the stream they were called on and the one they were moved to, on the simulator (a Gate on a stream stands
// for work still running there).
#include "cuweave/foreign_placement.hpp"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/graph.hpp"
#include "cuweave/kernel_backend.hpp"
#include "cuweave/owned_stream.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/weave.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using sanitizer::Access;
using sanitizer::AccessKind;
using testing::eventually;
using testing::Gate;
using testing::independent_stream;

// A kernel writing the bytes standing for array `array`: A is [1000, 1100), B [2000, 2100), ...
std::vector<Access> writes(char array) {
  const std::uintptr_t begin = 1000 * static_cast<std::uintptr_t>(array - 'A' + 1);
  return {{begin, begin + 100, AccessKind::Write}};
}

class ForeignPlacementTest : public ::testing::Test {
 protected:
  // A weave's first stream is the thread's current stream (cuweave.weave() begins it so).
  ForeignPlacementTest() {
    placement.reset();
    current_stream::push(first);
  }
  ~ForeignPlacementTest() override {
    placement.reset();
    if (weave) weave->end();
    current_stream::pop(first.get());
    backend().devices().synchronize_device(0);
  }
  void begin_weave() { weave = Weave::begin(first, others); }
  bool woven(const std::shared_ptr<Stream>& stream) const {
    for (const auto& strand : weave->streams()) {
      if (strand == stream) return true;
    }
    return false;
  }

  ForeignPlacement& placement = ForeignPlacement::this_thread();
  std::shared_ptr<Stream> library = independent_stream();  // the stream the other library calls on
  std::shared_ptr<Stream> first = independent_stream();
  std::vector<std::shared_ptr<Stream>> others{independent_stream(), independent_stream(), independent_stream()};
  std::shared_ptr<Weave> weave;
};

TEST_F(ForeignPlacementTest, OutsideAWeaveALaunchStaysWhereItWasCalled) {
  EXPECT_EQ(placement.place(library->raw_handle(), writes('A')), nullptr);
  placement.launch_queued();  // nothing was moved: nothing to follow
  EXPECT_TRUE(library->idle());
}

TEST_F(ForeignPlacementTest, IndependentLaunchesAreMovedToStreamsSideBySide) {
  begin_weave();
  const std::shared_ptr<Stream> a = placement.place(library->raw_handle(), writes('A'));
  placement.launch_queued();
  const std::shared_ptr<Stream> b = placement.place(library->raw_handle(), writes('B'));
  placement.launch_queued();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(woven(a) && woven(b));
  EXPECT_NE(a, b);
  EXPECT_EQ(weave->counts().operations, 2u);
}

TEST_F(ForeignPlacementTest, TheFirstLaunchMovedOffAStreamFollowsItsEarlierWork) {
  begin_weave();
  auto earlier = std::make_unique<Gate>(*library);  // cupy.zeros' memset, say, still running
  const std::shared_ptr<Stream> placed = placement.place(library->raw_handle(), writes('A'));
  ASSERT_NE(placed, nullptr);
  EXPECT_FALSE(placed->idle());
  earlier.reset();
  EXPECT_TRUE(eventually([&] { return placed->idle(); }));
}

TEST_F(ForeignPlacementTest, TheCalledStreamFollowsAMovedLaunchOnceItIsQueued) {
  begin_weave();
  const std::shared_ptr<Stream> placed = placement.place(library->raw_handle(), writes('A'));
  ASSERT_NE(placed, nullptr);
  auto kernel = std::make_unique<Gate>(*placed);  // the moved kernel, still running
  placement.launch_queued();
  EXPECT_FALSE(library->idle());  // the library's next work there (a copy of the result) waits for the kernel
  kernel.reset();
  EXPECT_TRUE(eventually([&] { return library->idle(); }));
}

TEST_F(ForeignPlacementTest, ALaunchOnAnotherDevicesStreamStaysWhereItWasCalled) {
  begin_weave();
  const std::shared_ptr<Stream> on_device_1 = OwnedStream::create(1, 0, /*blocking=*/false);
  EXPECT_EQ(placement.place(on_device_1->raw_handle(), writes('A')), nullptr);
  EXPECT_EQ(weave->counts().operations, 0u);
}

class UnmovedWork : public ForeignPlacementTest, public ::testing::WithParamInterface<bool> {};

TEST_P(UnmovedWork, ALaunchMovedLaterWaitsForItOnceTold) {
  const bool told = GetParam();
  begin_weave();
  const std::shared_ptr<Stream> placed = placement.place(library->raw_handle(), writes('A'));
  ASSERT_NE(placed, nullptr);
  placement.launch_queued();
  library->synchronize();
  auto gemm = std::make_unique<Gate>(*library);  // a cuBLAS call the weave cannot read, still running
  if (told) placement.unmoved(library->raw_handle());
  const std::shared_ptr<Stream> next = placement.place(library->raw_handle(), writes('A'));  // continues the first's chain
  EXPECT_EQ(next, placed);
  EXPECT_EQ(next->idle(), !told);
  gemm.reset();
  EXPECT_TRUE(eventually([&] { return next->idle(); }));
}

INSTANTIATE_TEST_SUITE_P(ForeignPlacementTest, UnmovedWork, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& told) { return told.param ? "Told" : "NotTold"; });

TEST_F(ForeignPlacementTest, AResetForgetsWhatTheStreamsWereWaitedFor) {
  begin_weave();
  ASSERT_NE(placement.place(library->raw_handle(), writes('A')), nullptr);
  placement.launch_queued();
  library->synchronize();
  placement.reset();
  auto earlier = std::make_unique<Gate>(*library);
  const std::shared_ptr<Stream> placed = placement.place(library->raw_handle(), writes('A'));
  ASSERT_NE(placed, nullptr);
  EXPECT_FALSE(placed->idle());  // as at a weave's start: all of the stream's work so far
  earlier.reset();
  EXPECT_TRUE(eventually([&] { return placed->idle(); }));
}

// Under a capture (cuweave.woven): the library's stream joins the weave's capture, so its work is captured too, and
// joins back as the placing ends, as a capture requires.
class CapturedWeave : public ForeignPlacementTest {
 protected:
  CapturedWeave() {
    capture = Capture::begin(first, CaptureMode::Global);
    begin_weave();
  }
  ~CapturedWeave() override {
    if (capture && !capture->ended()) capture->abandon();
  }
  bool captured(const Stream& stream) const { return Capture::of(stream) == capture; }
  // Work the library queues on its stream that the weave does not move (a cuBLAS call, say).
  void library_work() { backend().kernels().spin(1000, 1, nullptr, library->raw_handle()); }

  std::shared_ptr<Capture> capture;
};

TEST_F(CapturedWeave, TheLibrarysStreamJoinsTheCaptureAtTheStartAndBackAtTheEnd) {
  EXPECT_TRUE(placement.follow_into_capture(library->raw_handle()));
  EXPECT_TRUE(captured(*library));
  library_work();
  const std::shared_ptr<Stream> placed = placement.place(library->raw_handle(), writes('A'));
  ASSERT_NE(placed, nullptr);
  EXPECT_TRUE(woven(placed) && captured(*placed));
  placement.launch_queued();
  EXPECT_TRUE(placement.end());
  weave->end();
  const std::shared_ptr<Graph> graph = capture->end();  // every stream joined back: CUDA ends the capture
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->nodes().size(), 1u);  // the library's own work, captured
}

TEST_F(CapturedWeave, AStreamFirstCalledOnInsideTheBlockJoinsAtItsFirstLaunch) {
  const std::shared_ptr<Stream> placed = placement.place(library->raw_handle(), writes('A'));
  ASSERT_NE(placed, nullptr);
  EXPECT_TRUE(captured(*library));
  placement.launch_queued();
  EXPECT_TRUE(placement.end());
  weave->end();
  EXPECT_NE(capture->end(), nullptr);
}

TEST_F(CapturedWeave, WithoutTheJoinBackTheCaptureCannotEnd) {
  // What end() is for: the stream that joined must be joined back before the capture ends.
  ASSERT_TRUE(placement.follow_into_capture(library->raw_handle()));
  library_work();
  placement.reset();
  weave->end();
  EXPECT_THROW(capture->end(), BackendError);
}

TEST_F(CapturedWeave, TheLegacyDefaultStreamIsNotJoinedAndItsLaunchesAreRefusedByName) {
  EXPECT_FALSE(placement.follow_into_capture(backend().streams().legacy_default_stream()));
  try {
    placement.place(backend().streams().legacy_default_stream(), writes('A'));
    FAIL() << "a launch on the legacy default stream was placed in a captured weave";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("legacy default stream"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(placement.end());
  weave->end();
  EXPECT_NE(capture->end(), nullptr);
}

TEST_F(CapturedWeave, OutsideACaptureNothingJoins) {
  capture->abandon();
  weave->end();
  weave = Weave::begin(first, others);
  EXPECT_FALSE(placement.follow_into_capture(library->raw_handle()));
  EXPECT_EQ(Capture::of(*library), nullptr);
  EXPECT_FALSE(placement.end());
}

}  // namespace
}  // namespace cuweave
