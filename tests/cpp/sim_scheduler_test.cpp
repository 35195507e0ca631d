// The simulator's scheduler keeps CUDA's ordering rules and nothing more (Note [Simulator scheduling]), tested
// directly: work on a stream runs in order; an event wait orders two streams in every explored schedule (it is
// for the recording before it, not a later one), and without it some schedule runs them the other way round; the
// legacy default stream waits for blocking streams and they for it, non-blocking streams for neither; a destroyed
// stream finishes its work; a bounded wait answers false; a seed replays its schedule; once a device's context is
// lost, its queued work runs no further; the launches of one executable run one after another; synchronizing a
// device waits for its streams alone; an event never recorded (or forgotten) is waited for by nothing; the
// per-thread default stream is ordered with the legacy one; elapsed time needs both events complete.
#include "sim/scheduler.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/errors.hpp"
#include "sim/device_access.hpp"

namespace cuweave::sim {
namespace {

constexpr int kSeeds = 64;

// What ran, in the order it ran (operations may run on the scheduler's worker threads).
class RunOrder {
 public:
  std::function<void()> note(std::string name) {
    return [this, name = std::move(name)] {
      std::lock_guard<std::mutex> lock(mutex_);
      ran_.push_back(name);
    };
  }
  std::vector<std::string> ran() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ran_;
  }
  // Whether `first` ran before `second` (both must have run).
  bool before(const std::string& first, const std::string& second) {
    const std::vector<std::string> order = ran();
    std::size_t a = order.size(), b = order.size();
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (order[i] == first) a = i;
      if (order[i] == second) b = i;
    }
    EXPECT_LT(a, order.size()) << first << " never ran";
    EXPECT_LT(b, order.size()) << second << " never ran";
    return a < b;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> ran_;
};

// The streams and events one schedule makes, destroyed with it.
struct Made {
  explicit Made(Scheduler& scheduler) : scheduler(scheduler) {}
  Scheduler& scheduler;
  std::vector<SimStream*> streams;
  std::vector<SimEvent*> events;
  SimStream* stream(bool blocking = false) {
    streams.push_back(scheduler.create_stream(0, 0, blocking));
    return streams.back();
  }
  SimEvent* event() {
    events.push_back(scheduler.create_event(0, 0));
    return events.back();
  }
  ~Made() {
    for (SimEvent* made : events) scheduler.destroy_event(made);
    for (SimStream* made : streams) scheduler.destroy_stream(made);
  }
};

// A launch's two steps (a graph of two nodes), each noting "<name>node 1" or "<name>node 2" as it runs.
std::vector<Step> two_nodes(RunOrder& order, const std::string& name) {
  std::vector<Step> steps;
  steps.push_back(Step{order.note(name + "node 1"), {}, {}, nullptr});
  steps.push_back(Step{order.note(name + "node 2"), {}, {}, nullptr});
  return steps;
}

// Each test has a scheduler of its own, over device access of its own: the process's simulator is left alone.
class SimSchedulerTest : public ::testing::Test {
 protected:
  DeviceAccess access;
  Scheduler scheduler{access};
};

TEST_F(SimSchedulerTest, AStreamRunsItsWorkInOrderInEveryMode) {
  for (std::optional<std::uint64_t> seed : {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{3}}) {
    scheduler.configure(seed);
    Made made{scheduler};
    SimStream* stream = made.stream();
    RunOrder order;
    std::vector<std::string> expected;
    for (int i = 0; i < 200; ++i) {
      expected.push_back(std::to_string(i));
      scheduler.enqueue(stream, order.note(expected.back()));
    }
    scheduler.synchronize_stream(stream);
    EXPECT_EQ(order.ran(), expected);
  }
}

// In odd seeds the event is recorded again, on an idle stream, after the wait: the wait is for the recording
// before it, not that later one (which completes at once).
TEST_F(SimSchedulerTest, AnEventWaitOrdersTwoStreamsInEveryExploredScheduleWhateverIsRecordedLater) {
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    scheduler.configure(seed);
    Made made{scheduler};
    SimStream* producer = made.stream();
    SimStream* consumer = made.stream();
    SimEvent* ready = made.event();
    RunOrder order;
    scheduler.enqueue(producer, order.note("produce"));
    scheduler.record(ready, producer);
    scheduler.wait(consumer, ready);
    if (seed % 2 == 1) scheduler.record(ready, made.stream());
    scheduler.enqueue(consumer, order.note("consume"));
    scheduler.synchronize_device(0);
    EXPECT_TRUE(order.before("produce", "consume")) << "seed " << seed;
  }
}

TEST_F(SimSchedulerTest, WithoutAWaitSomeExploredScheduleRunsTheStreamsTheOtherWayRound) {
  int reversed = 0;
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    scheduler.configure(seed);
    Made made{scheduler};
    RunOrder order;
    scheduler.enqueue(made.stream(), order.note("produce"));
    scheduler.enqueue(made.stream(), order.note("consume"));
    scheduler.synchronize_device(0);
    if (!order.before("produce", "consume")) ++reversed;
  }
  EXPECT_GT(reversed, 0);
  EXPECT_LT(reversed, kSeeds);  // and some schedule runs them in issue order
}

TEST_F(SimSchedulerTest, TheSameSeedReplaysTheSameSchedule) {
  auto schedule = [&](std::uint64_t seed) {
    scheduler.configure(seed);
    Made made{scheduler};
    RunOrder order;
    for (int s = 0; s < 4; ++s) made.stream();
    for (int i = 0; i < 8; ++i) {
      for (int s = 0; s < 4; ++s) {
        scheduler.enqueue(made.streams[s], order.note(std::to_string(s) + "." + std::to_string(i)));
      }
    }
    scheduler.synchronize_device(0);
    return order.ran();
  };
  const std::vector<std::string> first = schedule(41);
  EXPECT_EQ(schedule(41), first);
  bool another = false;
  for (std::uint64_t seed = 42; seed < 42 + 8 && !another; ++seed) another = schedule(seed) != first;
  EXPECT_TRUE(another) << "eight other seeds all drew seed 41's schedule";
}

TEST_F(SimSchedulerTest, TheLegacyStreamWaitsForBlockingStreamsAndTheyForItButNotForNonBlockingOnes) {
  int non_blocking_after_legacy_reversed = 0;
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    scheduler.configure(seed);
    Made made{scheduler};
    SimStream* blocking = made.stream(true);
    SimStream* non_blocking = made.stream();
    SimStream* legacy = scheduler.legacy_stream(0);
    RunOrder order;
    scheduler.enqueue(blocking, order.note("blocking 1"));
    scheduler.enqueue(legacy, order.note("legacy"));  // after the blocking stream's work so far
    scheduler.enqueue(blocking, order.note("blocking 2"));  // after the legacy stream's
    scheduler.enqueue(non_blocking, order.note("non-blocking"));  // ordered with neither
    scheduler.synchronize_device(0);
    EXPECT_TRUE(order.before("blocking 1", "legacy")) << "seed " << seed;
    EXPECT_TRUE(order.before("legacy", "blocking 2")) << "seed " << seed;
    if (order.before("non-blocking", "legacy")) ++non_blocking_after_legacy_reversed;
  }
  EXPECT_GT(non_blocking_after_legacy_reversed, 0);  // the legacy stream did not order it
}

TEST_F(SimSchedulerTest, ADestroyedStreamFinishesItsQueuedWork) {
  scheduler.configure(5);
  SimStream* stream = scheduler.create_stream(0, 0, false);
  SimEvent* done = scheduler.create_event(0, 0);
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) scheduler.enqueue(stream, [&ran] { ++ran; });
  scheduler.record(done, stream);
  scheduler.destroy_stream(stream);
  EXPECT_FALSE(scheduler.known(stream));
  scheduler.synchronize_event(done);
  EXPECT_EQ(ran.load(), 10);
  scheduler.destroy_event(done);
}

TEST_F(SimSchedulerTest, ABoundedWaitAnswersFalseUntilTheWorkCanRun) {
  Made made{scheduler};
  SimStream* stream = made.stream();
  HostFlag* flag = scheduler.create_host_flag();
  std::atomic<bool> ran{false};
  scheduler.wait_host_flag(stream, flag);
  scheduler.enqueue(stream, [&ran] { ran = true; });
  EXPECT_FALSE(scheduler.synchronize_stream(stream, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
  EXPECT_FALSE(ran.load());
  EXPECT_FALSE(scheduler.stream_idle(stream));
  scheduler.raise_host_flag(flag);
  EXPECT_TRUE(scheduler.synchronize_stream(stream));
  EXPECT_TRUE(ran.load());
  scheduler.destroy_host_flag(flag);
}

TEST_F(SimSchedulerTest, InExploringModeNothingRunsUntilTheHostWaits) {
  scheduler.configure(9);
  Made made{scheduler};
  SimStream* stream = made.stream();
  std::atomic<bool> ran{false};
  scheduler.enqueue(stream, [&ran] { ran = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(ran.load());  // work is as late as it can be
  scheduler.synchronize_stream(stream);
  EXPECT_TRUE(ran.load());
}

// As on a GPU, where a kernel's fault stops the context: what was queued behind the faulting kernel, on its
// stream or another of its device, never runs (no copy into memory the program has since freed, no host function:
// cudaLaunchHostFunc's are not called after a context error), while what waits on it is still released. Only this
// test's device access loses the context.
TEST_F(SimSchedulerTest, OnceADevicesContextIsLostItsQueuedWorkRunsNoFurther) {
  Made made{scheduler};
  SimStream* faulting = made.stream();
  SimStream* other = made.stream();
  SimEvent* after_fault = made.event();
  RunOrder order;
  std::atomic<int> completed{0};
  scheduler.enqueue(faulting, order.note("before"));
  scheduler.enqueue(faulting, [this] { access.lose_context(0, "faulted for this test"); });
  scheduler.enqueue(faulting, order.note("behind on its stream"), [&completed] { ++completed; });
  scheduler.record(after_fault, faulting);
  scheduler.wait(other, after_fault);
  scheduler.enqueue(other, order.note("behind on another stream"), [&completed] { ++completed; });
  scheduler.synchronize_stream(other);
  EXPECT_EQ(order.ran(), std::vector<std::string>{"before"}) << "work ran on a device whose context was lost";
  EXPECT_EQ(completed.load(), 2);
}


// The launches of one executable graph run one after another, whatever streams they are queued on (CUDA does not
// run two launches of one executable at once); launches of two executables are ordered by nothing.
TEST_F(SimSchedulerTest, LaunchesSharingASerialRunInIssueOrderOnAnyStreamsAndOthersInAnyOrder) {
  int separate_reversed = 0;
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    scheduler.configure(seed);
    Made made{scheduler};
    RunOrder order;
    auto launch = [&](SimStream* stream, const std::shared_ptr<Serial>& serial, const std::string& name) {
      scheduler.enqueue_launch(stream, two_nodes(order, name + " "), {}, {}, serial);
    };
    const auto one_executable = std::make_shared<Serial>();
    launch(made.stream(), one_executable, "first");
    launch(made.stream(), one_executable, "second");
    launch(made.stream(), std::make_shared<Serial>(), "other 1");
    launch(made.stream(), std::make_shared<Serial>(), "other 2");
    scheduler.synchronize_device(0);
    EXPECT_TRUE(order.before("first node 1", "first node 2")) << "seed " << seed;
    EXPECT_TRUE(order.before("first node 2", "second node 1")) << "seed " << seed;
    if (order.before("other 2 node 2", "other 1 node 1")) ++separate_reversed;
  }
  EXPECT_GT(separate_reversed, 0);  // two executables' launches are not ordered
}

// A launch waits for the latest recording of each event it is given and records its own events once its last step
// has run.
TEST_F(SimSchedulerTest, ALaunchWaitsForItsEventsAndRecordsItsOwnAfterItsLastStep) {
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    scheduler.configure(seed);
    Made made{scheduler};
    SimStream* producer = made.stream();
    SimStream* launcher = made.stream();
    SimStream* consumer = made.stream();
    SimEvent* produced = made.event();
    SimEvent* launched = made.event();
    RunOrder order;
    scheduler.enqueue(producer, order.note("produce"));
    scheduler.record(produced, producer);
    scheduler.enqueue_launch(launcher, two_nodes(order, ""), {produced}, {launched}, std::make_shared<Serial>());
    scheduler.wait(consumer, launched);
    scheduler.enqueue(consumer, order.note("consume"));
    scheduler.synchronize_device(0);
    EXPECT_TRUE(order.before("produce", "node 1")) << "seed " << seed;
    EXPECT_TRUE(order.before("node 2", "consume")) << "seed " << seed;
  }
}

TEST_F(SimSchedulerTest, SynchronizingADeviceWaitsForItsOwnStreamsAlone) {
  for (std::optional<std::uint64_t> seed : {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{7}}) {
    scheduler.configure(seed);
    SimStream* on_zero = scheduler.create_stream(0, 0, false);
    SimStream* on_one = scheduler.create_stream(1, 0, false);
    HostFlag* flag = scheduler.create_host_flag();
    std::atomic<bool> zero_ran{false};
    scheduler.enqueue(on_zero, [&zero_ran] { zero_ran = true; });
    scheduler.wait_host_flag(on_one, flag);  // device 1's stream cannot finish until the flag is raised
    const auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::milliseconds(50); };
    EXPECT_TRUE(scheduler.synchronize_device(0, soon()));
    EXPECT_TRUE(zero_ran.load());
    EXPECT_FALSE(scheduler.synchronize_device(1, soon()));
    scheduler.raise_host_flag(flag);
    EXPECT_TRUE(scheduler.synchronize_device(1, soon()));
    scheduler.destroy_host_flag(flag);
    scheduler.destroy_stream(on_zero);
    scheduler.destroy_stream(on_one);
  }
}

// As in CUDA: an event never recorded is complete and a wait for it waits for nothing; forgetting an event's
// recordings makes it so again, while its queued recording still runs.
TEST_F(SimSchedulerTest, AnEventNeverRecordedOrWhoseRecordingsWereForgottenIsCompleteAndWaitedForByNothing) {
  scheduler.configure(11);
  Made made{scheduler};
  SimStream* held = made.stream();
  SimStream* consumer = made.stream();
  SimEvent* event = made.event();
  HostFlag* flag = scheduler.create_host_flag();
  const auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::milliseconds(50); };
  EXPECT_TRUE(scheduler.event_complete(event));
  EXPECT_FALSE(scheduler.has_recording(event));
  scheduler.wait(consumer, event);
  std::atomic<int> consumed{0};
  scheduler.enqueue(consumer, [&consumed] { ++consumed; });
  EXPECT_TRUE(scheduler.synchronize_stream(consumer, soon()));
  EXPECT_EQ(consumed.load(), 1);

  scheduler.wait_host_flag(held, flag);
  scheduler.record(event, held);  // behind the flag
  EXPECT_TRUE(scheduler.has_recording(event));
  EXPECT_FALSE(scheduler.event_complete(event));
  EXPECT_FALSE(scheduler.synchronize_event(event, soon()));
  scheduler.forget_recordings(event);
  EXPECT_FALSE(scheduler.has_recording(event));
  EXPECT_TRUE(scheduler.event_complete(event));
  scheduler.wait(consumer, event);
  scheduler.enqueue(consumer, [&consumed] { ++consumed; });
  EXPECT_TRUE(scheduler.synchronize_stream(consumer, soon()));  // the forgotten recording holds nothing up
  EXPECT_EQ(consumed.load(), 2);
  EXPECT_FALSE(scheduler.stream_idle(held));
  scheduler.raise_host_flag(flag);
  EXPECT_TRUE(scheduler.synchronize_stream(held));
  scheduler.destroy_host_flag(flag);
}

// CUDA's per-thread default stream is not a non-blocking stream: it is ordered with the legacy default stream.
TEST_F(SimSchedulerTest, ThePerThreadDefaultStreamIsOrderedWithTheLegacyStreamBothWays) {
  for (std::uint64_t seed = 0; seed < kSeeds; ++seed) {
    scheduler.configure(seed);
    SimStream* per_thread = scheduler.per_thread_stream(0);
    EXPECT_EQ(per_thread, scheduler.per_thread_stream(0));  // one per thread and device
    EXPECT_NE(per_thread, scheduler.per_thread_stream(1));
    SimStream* legacy = scheduler.legacy_stream(0);
    RunOrder order;
    scheduler.enqueue(per_thread, order.note("per-thread 1"));
    scheduler.enqueue(legacy, order.note("legacy"));
    scheduler.enqueue(per_thread, order.note("per-thread 2"));
    scheduler.synchronize_device(0);
    EXPECT_TRUE(order.before("per-thread 1", "legacy")) << "seed " << seed;
    EXPECT_TRUE(order.before("legacy", "per-thread 2")) << "seed " << seed;
  }
}

TEST_F(SimSchedulerTest, ElapsedTimeIsRefusedUntilBothEventsWereRecordedAndHaveCompleted) {
  Made made{scheduler};
  SimStream* stream = made.stream();
  SimEvent* start = made.event();
  SimEvent* end = made.event();
  auto error_of = [&] {
    try {
      scheduler.elapsed_ms(start, end);
    } catch (const BackendError& error) {
      return error.name();
    }
    return std::string();
  };
  HostFlag* flag = scheduler.create_host_flag();
  scheduler.record(start, stream);
  EXPECT_EQ(error_of(), "cudaErrorInvalidResourceHandle");  // `end` never recorded
  scheduler.wait_host_flag(stream, flag);
  scheduler.enqueue(stream, [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  scheduler.record(end, stream);
  EXPECT_EQ(error_of(), "cudaErrorNotReady");
  scheduler.raise_host_flag(flag);
  scheduler.synchronize_event(end);
  EXPECT_GE(scheduler.elapsed_ms(start, end), 20.0);  // the work between them took 20 ms
  EXPECT_LE(scheduler.elapsed_ms(end, start), -20.0);
  scheduler.destroy_host_flag(flag);
}

}  // namespace
}  // namespace cuweave::sim
