#include "cuweave/pinned_pool.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>
#include <utility>

#include "cuweave/backend.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/sanitizer.hpp"

namespace cuweave {

namespace {
// CUWEAVE_DEBUG_POOL=1 checks that no pointer is ever handed out twice (debugging aid).
bool debug_pool() {
  static const bool enabled = std::getenv("CUWEAVE_DEBUG_POOL") != nullptr;
  return enabled;
}
std::unordered_set<void*>& live_blocks() {
  static auto* live = new std::unordered_set<void*>;
  return *live;
}
void note_handed_out(void* pointer, const char* how) {
  if (debug_pool() && !live_blocks().insert(pointer).second) {
    std::fprintf(stderr, "cuweave pinned pool: %s handed out %p, which is still live\n", how, pointer);
  }
}
void note_returned(void* pointer) {
  if (debug_pool() && live_blocks().erase(pointer) == 0) {
    std::fprintf(stderr, "cuweave pinned pool: %p returned but was not live\n", pointer);
  }
}
}  // namespace

PinnedBlock::~PinnedBlock() { pool_.give_back(pointer_, capacity_); }

std::size_t PinnedPool::size_class(std::size_t bytes) noexcept {
  constexpr std::size_t kMinimum = 512;
  constexpr std::size_t kExactPowersUpTo = std::size_t{1} << 20;
  if (bytes <= kMinimum) return kMinimum;
  std::size_t power = kMinimum;
  while (power < bytes) power <<= 1;
  if (power <= kExactPowersUpTo) return power;
  // Above 1 MiB, four classes per power of two keep the waste under 25%.
  const std::size_t step = power / 8;
  return (bytes + step - 1) / step * step;
}

std::shared_ptr<PinnedBlock> PinnedPool::hand_out(void* pointer, std::size_t bytes, std::size_t capacity,
                                                  const char* source) {
  stats_.in_use_bytes += capacity;
  stats_.in_use_blocks += 1;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  note_handed_out(pointer, source);
  // A block back from the cache is new memory to its next user: the pool reused it only after its event.
  if (sanitizer::enabled()) sanitizer::allocated(pointer, capacity);
  return std::make_shared<PinnedBlock>(*this, pointer, bytes, capacity);
}

std::shared_ptr<PinnedBlock> PinnedPool::take_cached(std::size_t bytes, std::size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cached_.find(capacity);
  if (it == cached_.end() || it->second.empty()) return nullptr;
  void* pointer = it->second.back();
  it->second.pop_back();
  stats_.cached_bytes -= capacity;
  stats_.cached_blocks -= 1;
  stats_.hits += 1;
  return hand_out(pointer, bytes, capacity, "the cache");
}

std::shared_ptr<PinnedBlock> PinnedPool::try_allocate_cached(std::size_t bytes) {
  return take_cached(bytes, size_class(bytes));
}

namespace {

std::size_t default_results_limit() {
  const char* text = std::getenv("CUWEAVE_PINNED_RESULTS_MB");
  if (text != nullptr && *text != '\0') {
    char* end = nullptr;
    const unsigned long long megabytes = std::strtoull(text, &end, 10);
    if (end != nullptr && *end == '\0') return static_cast<std::size_t>(megabytes) << 20;
  }
  return std::size_t{256} << 20;
}

// A result's block: its memory counts toward the results' bound until the result goes.
struct CountedResult {
  PinnedPool& pool;
  std::shared_ptr<PinnedBlock> block;
  explicit CountedResult(PinnedPool& counting) : pool(counting) {}
  CountedResult(const CountedResult&) = delete;
  CountedResult& operator=(const CountedResult&) = delete;
  ~CountedResult() {
    if (block) pool.result_released(block->capacity());
  }
};

}  // namespace

PinnedPool::PinnedPool(MemoryBackend& memory, LifetimeTracker& lifetimes) : memory_(memory), lifetimes_(lifetimes) {
  stats_.results_limit_bytes = default_results_limit();
}

std::shared_ptr<PinnedBlock> PinnedPool::allocate_result(std::size_t bytes) {
  const std::size_t capacity = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stats_.results_in_use_bytes + capacity > stats_.results_limit_bytes) return nullptr;
  }
  std::shared_ptr<PinnedBlock> block = take_cached(bytes, capacity);
  if (!block) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (requested_classes_.insert(capacity).second) return nullptr;  // first request of this size class
    }
    block = allocate(bytes);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.results_in_use_bytes += capacity;
  }
  auto counted = std::make_shared<CountedResult>(*this);  // made in place: a temporary's destructor would count too
  counted->block = std::move(block);
  PinnedBlock* pointer = counted->block.get();
  return std::shared_ptr<PinnedBlock>(std::move(counted), pointer);  // shares the count's lifetime
}

void PinnedPool::result_released(std::size_t capacity) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.results_in_use_bytes -= capacity;
}

std::size_t PinnedPool::results_limit() const { return stats().results_limit_bytes; }

void PinnedPool::set_results_limit(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.results_limit_bytes = bytes;
}

std::shared_ptr<PinnedBlock> PinnedPool::allocate(std::size_t bytes) {
  const std::size_t capacity = size_class(bytes);
  if (auto block = take_cached(bytes, capacity)) return block;
  // Blocks whose last user was a completed copy come back once their Holds are released.
  if (lifetimes_.collect() > 0) {
    if (auto block = take_cached(bytes, capacity)) return block;
  }
  void* pointer = memory_.allocate_pinned(capacity);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.misses += 1;
  return hand_out(pointer, bytes, capacity, "the backend");
}

void PinnedPool::give_back(void* pointer, std::size_t capacity) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  note_returned(pointer);
  try {
    cached_[capacity].push_back(pointer);
  } catch (...) {
    return;  // out of host memory for the list: the block is leaked, never handed out twice
  }
  stats_.in_use_bytes -= capacity;
  stats_.in_use_blocks -= 1;
  stats_.cached_bytes += capacity;
  stats_.cached_blocks += 1;
}

PinnedPoolStats PinnedPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::size_t PinnedPool::empty_cache() {
  lifetimes_.collect();
  std::unordered_map<std::size_t, std::vector<void*>> blocks;
  std::size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks.swap(cached_);
    bytes = stats_.cached_bytes;
    stats_.cached_bytes = 0;
    stats_.cached_blocks = 0;
  }
  for (auto& size_class_blocks : blocks) {
    for (void* pointer : size_class_blocks.second) memory_.free_pinned(pointer);
  }
  return bytes;
}

}  // namespace cuweave
