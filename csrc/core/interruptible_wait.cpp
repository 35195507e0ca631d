#include "cuweave/interruptible_wait.hpp"

#include <atomic>

namespace cuweave {

namespace {
std::atomic<InterruptCheck> installed_check{nullptr};
}  // namespace

void set_interrupt_check(InterruptCheck check) noexcept { installed_check.store(check, std::memory_order_release); }

void check_interrupt() {
  if (InterruptCheck check = installed_check.load(std::memory_order_acquire)) check();
}

}  // namespace cuweave
