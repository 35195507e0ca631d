// Helpers shared by the core tests: gated streams, and waiting for a condition without guessing durations.
//
// Note [Gated streams]
// ~~~~~~~~~~~~~~~~~~~~
// A rule such as "a block is reused only after its event completed" is only tested while that event is
// pending, and a test that keeps work pending with a long kernel guesses how long the check takes. A Gate is
// a host function queued on a simulator stream that blocks the worker running it until the test calls
// open(): everything queued behind it on that stream stays pending, as long as the test likes, and runs once
// the gate opens. While a gate is closed, "this has not completed" is a fact, not a race the test hopes to
// win; after open(), a synchronize (never a sleep) waits for what the gate held back.
//
// Gates need the simulator's concurrent mode, where worker threads run queued work (test_main.cpp makes
// sure): in exploring mode the host thread that waits runs queued work itself, and would wait on its own gate.
#pragma once

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "cuweave/backend.hpp"
#include "cuweave/owned_stream.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::testing {

class Gate {
 public:
  // Queues the gate on `stream`: work queued on it later waits until open().
  explicit Gate(Stream& stream) { backend().streams().launch_host_function(stream.handle(), &Gate::pass, this); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  // Opens the gate and waits until its host function has let go of this object.
  ~Gate() {
    open();
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return passed_; });
  }

  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }

 private:
  static void pass(void* user_data) {
    auto* gate = static_cast<Gate*>(user_data);
    std::unique_lock<std::mutex> lock(gate->mutex_);
    gate->changed_.wait(lock, [gate] { return gate->open_; });
    gate->passed_ = true;
    gate->changed_.notify_all();  // under the lock: the destructor may free the gate as soon as it sees passed_
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;    // LOCK: mutex_
  bool passed_ = false;  // LOCK: mutex_
};

// A stream of device 0 that does not synchronize with the legacy default stream, so that only what a test
// queues on it decides when its work runs.
inline std::shared_ptr<Stream> independent_stream() { return OwnedStream::create(0, 0, /*blocking=*/false); }

// Waits until `condition` holds, for a state change that another thread makes: polls, never sleeps a guessed
// time. The deadline only turns a hang (a broken rule) into a failure; it never decides a passing test.
template <class Condition>
bool eventually(Condition condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// True while `future` has no result yet. Asked while a gate is closed, about work that needs the gate, the
// answer is certain for correct code; a broken rule can only make it false.
template <class T>
bool still_waiting(const std::future<T>& future) {
  return future.wait_for(std::chrono::seconds(0)) == std::future_status::timeout;
}

// What a Hold keeps alive in these tests: an int whose lifetime the test watches through a weak_ptr.
struct Watched {
  std::shared_ptr<int> object = std::make_shared<int>(0);
  std::weak_ptr<int> watch = object;
  const void* address = object.get();  // what the tracker compares Holds by

  Hold hold() const { return object; }
  // Drops the test's own reference: from here on only Holds keep the object alive.
  void let_go() { object.reset(); }
  bool alive() const { return !watch.expired(); }
};

}  // namespace cuweave::testing
