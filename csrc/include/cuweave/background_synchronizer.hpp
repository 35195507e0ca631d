// A blocking wait that has no bounded or polled form (cudaDeviceSynchronize), made on a helper thread while
// callers wait for it in slices (Note [Interruptible waits]). A caller that gives up leaves the call running;
// each caller is answered by a call that began after its wait began, so none returns before the work it asked
// about has completed. A call already running that began after a caller's wait began answers that caller when
// it ends: the caller's next slices ask for no other. (Asking again at every slice left one more call running
// after each wait longer than a slice: under compute-sanitizer, a process exiting during it crashed inside the
// tool's library.)
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "cuweave/backend_handles.hpp"

namespace cuweave {

class BackgroundSynchronizer {
 public:
  // `synchronize` makes the blocking call and returns its error code (0: success); `raise` throws the exception
  // a nonzero code stands for.
  BackgroundSynchronizer(std::function<int()> synchronize, std::function<void(int)> raise);
  // The helper thread, once started, is never joined (a call still running at exit must not be waited for
  // while the runtime shuts down) and uses the object: owners never destroy a synchronizer they waited on.

  // True once a call that began at or after slice.began has finished (rethrowing its error through `raise`).
  bool wait(const WaitSlice& slice);
  // Runs `action` on the helper thread once a call that began after this one has finished (whatever its
  // result). Never blocks and begins no call of its own: the action waits for the next one a caller asks for.
  void after_next_synchronization(std::function<void()> action);
  // How many calls have begun (for the tests).
  std::uint64_t begun() const;

 private:
  void start_locked();
  void run();

  using Clock = std::chrono::steady_clock;
  struct Deferred {
    Clock::time_point asked;
    std::function<void()> action;
  };

  const std::function<int()> synchronize_;
  const std::function<void(int)> raise_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool started_ = false;                 // LOCK: mutex_
  bool want_ = false;                    // LOCK: someone waits for a call not yet begun
  bool running_ = false;                 // LOCK: a call is running
  Clock::time_point running_began_{};    // LOCK: when it began
  Clock::time_point finished_began_{};   // LOCK: when the latest finished call began
  bool finished_any_ = false;            // LOCK
  int finished_error_ = 0;               // LOCK: its code
  std::uint64_t begun_ = 0;              // LOCK
  std::vector<Deferred> deferred_;       // LOCK: actions waiting for a call that began after them
};

}  // namespace cuweave
