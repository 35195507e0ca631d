// Note [Interruptible waits]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A wait a user asks for (synchronize, Transfer.wait, to_numpy, a pool's reserve) can last seconds, and
// Ctrl-C must end it. CUDA's blocking calls cannot be interrupted, so the core waits in slices of at
// most kWaitSlice, each a bounded wait of the backend, and between slices calls the installed interrupt
// check, which throws to abandon the wait (the bindings' check raises KeyboardInterrupt when Python has
// a pending SIGINT). Abandoning changes nothing: queued work still runs and every object stays valid.
// The check runs with no cuweave lock held (it takes the GIL). Waits in cuweave's own bookkeeping
// (destructors, pools, shutdown) are not interruptible: they must not throw.
#pragma once

#include <chrono>

#include "cuweave/backend.hpp"

namespace cuweave {

// Short enough that a SIGINT is honoured well within 100 ms; long enough that the check costs nothing.
inline constexpr std::chrono::milliseconds kWaitSlice{20};

// Throws to abandon a wait; returns to go on waiting.
using InterruptCheck = void (*)();
void set_interrupt_check(InterruptCheck check) noexcept;
// Calls the installed check (nothing happens when none is installed).
void check_interrupt();

// Calls wait_for(slice) until it answers true; between slices, check_interrupt().
template <typename WaitFor>
void wait_interruptibly(WaitFor&& wait_for) {
  const auto began = std::chrono::steady_clock::now();
  WaitSlice slice{began, began + kWaitSlice};
  while (!wait_for(slice)) {
    check_interrupt();
    slice.until = std::chrono::steady_clock::now() + kWaitSlice;
  }
}

}  // namespace cuweave
