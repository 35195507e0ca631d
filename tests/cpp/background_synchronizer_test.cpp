// BackgroundSynchronizer: callers waiting in slices are answered by a call that began after their wait began,
// and a wait longer than a slice leaves no further call behind.
#include "cuweave/background_synchronizer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "cuweave/interruptible_wait.hpp"

namespace cuweave {
namespace {

using namespace std::chrono_literals;

// A blocking call that lasts `duration` and answers `error`. Leaked: the helper thread outlives the test.
struct SlowCall {
  std::chrono::milliseconds duration;
  std::atomic<int> error{0};
  BackgroundSynchronizer* synchronizer = new BackgroundSynchronizer(
      [this] {
        std::this_thread::sleep_for(duration);
        return error.load();
      },
      [](int code) { throw std::runtime_error("error " + std::to_string(code)); });
  explicit SlowCall(std::chrono::milliseconds d) : duration(d) {}
};

TEST(BackgroundSynchronizerTest, AWaitOfManySlicesBeginsOneCallAndLeavesNoneRunning) {
  auto* call = new SlowCall(5 * kWaitSlice);
  wait_interruptibly([&](const WaitSlice& slice) { return call->synchronizer->wait(slice); });
  EXPECT_EQ(call->synchronizer->begun(), 1u);
  std::this_thread::sleep_for(2 * kWaitSlice);  // a call asked for by a later slice would have begun by now
  EXPECT_EQ(call->synchronizer->begun(), 1u);
}

TEST(BackgroundSynchronizerTest, AWaitIsAnsweredOnlyByACallThatBeganAfterIt) {
  auto* call = new SlowCall(4 * kWaitSlice);
  const auto first_began = std::chrono::steady_clock::now();
  EXPECT_FALSE(call->synchronizer->wait(WaitSlice{first_began, first_began + 1ms}));  // starts a call, gives up
  while (call->synchronizer->begun() == 0) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(1ms);
  // Begun while that call runs: it needs a call of its own.
  wait_interruptibly([&](const WaitSlice& slice) { return call->synchronizer->wait(slice); });
  EXPECT_EQ(call->synchronizer->begun(), 2u);
}

TEST(BackgroundSynchronizerTest, ACallsErrorReachesItsWaiters) {
  auto* call = new SlowCall(1ms);
  call->error = 700;
  const auto began = std::chrono::steady_clock::now();
  EXPECT_THROW(call->synchronizer->wait(WaitSlice{began, began + 10s}), std::runtime_error);
}

TEST(BackgroundSynchronizerTest, ADeferredActionRunsAfterTheNextCallOnly) {
  auto* call = new SlowCall(1ms);
  std::atomic<bool> ran{false};
  call->synchronizer->after_next_synchronization([&ran] { ran = true; });
  std::this_thread::sleep_for(2 * kWaitSlice);
  EXPECT_FALSE(ran) << "no call was asked for";
  wait_interruptibly([&](const WaitSlice& slice) { return call->synchronizer->wait(slice); });
  for (int i = 0; i < 100 && !ran; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace cuweave
