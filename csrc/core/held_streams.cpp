// The count of pending host holds (Note [Enqueueing behind a held stream] in held_streams.hpp).
#include "cuweave/held_streams.hpp"

#include <atomic>

namespace cuweave::held_streams {
namespace {
std::atomic<int> pending{0};
}  // namespace

void add() noexcept { pending.fetch_add(1, std::memory_order_relaxed); }
void remove() noexcept { pending.fetch_sub(1, std::memory_order_relaxed); }
bool any() noexcept { return pending.load(std::memory_order_relaxed) > 0; }

}  // namespace cuweave::held_streams
