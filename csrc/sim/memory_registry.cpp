#include "sim/memory_registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "sim/sim_error.hpp"
#include "sim/unwritten_memory.hpp"

namespace cuweave::sim {

namespace {
constexpr std::size_t kAlignment = 256;  // what cudaMalloc guarantees
std::size_t rounded_size(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }
}

void* MemoryRegistry::allocate(std::size_t bytes, MemoryKind kind, int device, bool pooled) {
  const std::size_t rounded = rounded_size(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (kind == MemoryKind::Device && device_bytes_ + rounded > kSimulatedDeviceMemory) {
      fail(pooled ? "cudaMallocFromPoolAsync" : "cudaMalloc", kMemoryAllocation,
           "out of memory: the simulated device has " + std::to_string(kSimulatedDeviceMemory >> 30) + " GiB");
    }
  }
  // CUDA leaves new memory as it was; the simulator makes it read as 0xFF bytes (NaN as floats, -1 as integers) so
  // that a program or test reading memory it never wrote fails every time rather than when the heap holds garbage.
  void* pointer = rounded >= kMappedFrom ? map_unwritten(rounded) : nullptr;
  const bool mapped = pointer != nullptr;
  if (!mapped) {
    pointer = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (!pointer) {
      fail(kind != MemoryKind::Device ? "cudaHostAlloc" : pooled ? "cudaMallocFromPoolAsync" : "cudaMalloc",
           kMemoryAllocation, "out of host memory");
    }
    std::memset(pointer, 0xFF, rounded == 0 ? kAlignment : rounded);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ranges_[reinterpret_cast<std::uintptr_t>(pointer)] =
      MemoryRange{reinterpret_cast<std::uintptr_t>(pointer), bytes, kind, device, pooled, mapped};
  if (kind == MemoryKind::Device) device_bytes_ += rounded;
  return pointer;
}

void* MemoryRegistry::reserve_graph(std::size_t bytes, int device) {
  void* pointer = allocate(bytes, MemoryKind::Device, device, /*pooled=*/true);
  any_graph_.store(true, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mutex_);
  ranges_.at(reinterpret_cast<std::uintptr_t>(pointer)).graph = true;
  return pointer;
}

void MemoryRegistry::graph_allocate(void* pointer) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = ranges_.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (found != ranges_.end() && found->second.graph) found->second.graph_allocated = found->second.graph_kept = true;
}

bool MemoryRegistry::graph_memory_missing(const void* pointer) {
  if (pointer == nullptr || !any_graph_.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranges_.upper_bound(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == ranges_.begin()) return false;
  --it;
  const MemoryRange& range = it->second;
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  return range.graph && address < range.start + std::max<std::size_t>(range.bytes, 1) && !range.graph_living;
}

std::size_t MemoryRegistry::graph_memory_kept(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t kept = 0;
  for (const auto& [start, range] : ranges_) {
    if (range.graph && range.graph_kept && range.device == device) kept += range.bytes;
  }
  return kept;
}

void MemoryRegistry::trim_graph_memory(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [start, range] : ranges_) {
    if (range.graph && range.device == device && !range.graph_allocated) range.graph_kept = false;
  }
}

void MemoryRegistry::graph_free(void* pointer) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = ranges_.find(reinterpret_cast<std::uintptr_t>(pointer));
    if (found == ranges_.end() || !found->second.graph) return;
    found->second.graph_allocated = false;
    if (!found->second.graph_forgotten) return;
  }
  release(pointer);
}

bool MemoryRegistry::launched_graph_memory(const std::vector<void*>& unfreed, bool free_on_launch) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<MemoryRange*> ranges;
  for (void* pointer : unfreed) {
    auto found = ranges_.find(reinterpret_cast<std::uintptr_t>(pointer));
    if (found == ranges_.end() || !found->second.graph) continue;
    if (found->second.graph_living && !free_on_launch) return false;
    ranges.push_back(&found->second);
  }
  for (MemoryRange* range : ranges) range->graph_living = true;
  return true;
}

void MemoryRegistry::freed_graph_memory(const void* pointer) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = ranges_.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (found != ranges_.end() && found->second.graph) found->second.graph_living = false;
}

void MemoryRegistry::forget_graph(void* pointer) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = ranges_.find(reinterpret_cast<std::uintptr_t>(pointer));
    if (found == ranges_.end() || !found->second.graph) return;
    found->second.graph_forgotten = true;
    if (found->second.graph_allocated) return;
  }
  release(pointer);
}

void MemoryRegistry::release(void* pointer) noexcept {
  std::size_t mapped_bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ranges_.find(reinterpret_cast<std::uintptr_t>(pointer));
    if (it == ranges_.end() || it->second.kind == MemoryKind::Registered) return;
    forget_freed_locked(it->second);  // released before its queued free ran (that free could not be queued)
    const std::size_t rounded = rounded_size(it->second.bytes);
    if (it->second.kind == MemoryKind::Device) device_bytes_ -= rounded;
    if (it->second.mapped) mapped_bytes = rounded;
    ranges_.erase(it);
  }
  if (mapped_bytes != 0) {
    unmap_unwritten(pointer, mapped_bytes);
  } else {
    std::free(pointer);
  }
}

std::uint64_t MemoryRegistry::freed_on(void* pointer, std::uint64_t stream) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranges_.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == ranges_.end()) return 0;
  MemoryRange& range = it->second;
  if (range.kind != MemoryKind::Device || !range.pooled || range.mapped || range.graph || range.bytes == 0 ||
      range.free_ticket != 0) {
    return 0;
  }
  try {
    freed_[stream].push_back(range.start);
  } catch (...) {
    return 0;  // not reusable then: released as its free runs
  }
  range.freed_on_stream = stream;
  range.free_ticket = ++tickets_;
  return range.free_ticket;
}

void MemoryRegistry::release_freed(void* pointer, std::uint64_t ticket) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ranges_.find(reinterpret_cast<std::uintptr_t>(pointer));
    if (it == ranges_.end() || it->second.free_ticket != ticket) return;  // reused since: its new holder frees it
    forget_freed_locked(it->second);  // no allocation takes it from now on
  }
  release(pointer);
}

void MemoryRegistry::forget_freed_locked(MemoryRange& range) noexcept {
  if (range.free_ticket == 0) return;
  auto stream = freed_.find(range.freed_on_stream);
  if (stream != freed_.end()) {
    std::vector<std::uintptr_t>& starts = stream->second;
    starts.erase(std::remove(starts.begin(), starts.end(), range.start), starts.end());
    if (starts.empty()) freed_.erase(stream);
  }
  range.freed_on_stream = 0;
  range.free_ticket = 0;
}

void* MemoryRegistry::reuse_freed(std::size_t bytes, int device, std::uint64_t stream) {
  if (bytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  auto freed = freed_.find(stream);
  if (freed == freed_.end()) return nullptr;
  std::vector<std::uintptr_t>& starts = freed->second;
  for (auto start = starts.rbegin(); start != starts.rend(); ++start) {
    MemoryRange& range = ranges_.at(*start);
    if (range.device != device || rounded_size(range.bytes) != rounded_size(bytes)) continue;
    range.bytes = bytes;
    range.freed_on_stream = 0;
    range.free_ticket = 0;
    starts.erase(std::next(start).base());
    if (starts.empty()) freed_.erase(freed);
    return reinterpret_cast<void*>(range.start);
  }
  return nullptr;
}

void MemoryRegistry::register_range(void* pointer, std::size_t bytes) {
  const auto start = reinterpret_cast<std::uintptr_t>(pointer);
  std::lock_guard<std::mutex> lock(mutex_);
  auto next = ranges_.lower_bound(start);
  const bool overlaps_next = next != ranges_.end() && next->first < start + bytes;
  const bool overlaps_previous =
      next != ranges_.begin() && std::prev(next)->second.start + std::prev(next)->second.bytes > start;
  if (overlaps_next || overlaps_previous) {
    fail("cudaHostRegister", kHostMemoryAlreadyRegistered, "part of this memory is already page-locked");
  }
  ranges_[start] = MemoryRange{start, bytes, MemoryKind::Registered, -1, false};
}

void MemoryRegistry::unregister_range(void* pointer) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranges_.find(reinterpret_cast<std::uintptr_t>(pointer));
  if (it == ranges_.end() || it->second.kind != MemoryKind::Registered) {
    fail("cudaHostUnregister", kHostMemoryNotRegistered, "this memory is not registered");
  }
  ranges_.erase(it);
}

std::optional<MemoryRange> MemoryRegistry::find(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranges_.upper_bound(address);
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  const MemoryRange& range = it->second;
  if (address < range.start + (range.bytes == 0 ? 1 : range.bytes)) return range;
  return std::nullopt;
}

std::size_t MemoryRegistry::device_bytes_in_use() {
  std::lock_guard<std::mutex> lock(mutex_);
  return device_bytes_;
}

std::size_t MemoryRegistry::ranges_of(MemoryKind kind) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t count = 0;
  for (const auto& [start, range] : ranges_) count += range.kind == kind ? 1 : 0;
  return count;
}

bool MemoryRegistry::within_range(const void* pointer, std::size_t bytes, const char* call) {
  auto range = find(pointer);
  if (!range) return false;
  if (reinterpret_cast<std::uintptr_t>(pointer) + bytes > range->start + range->bytes) {
    fail(call, kInvalidValue, "the access runs past the end of its allocation");
  }
  return true;
}

bool MemoryRegistry::is_device_memory(const void* pointer) {
  auto range = find(pointer);
  return range && range->kind == MemoryKind::Device;
}

}  // namespace cuweave::sim
