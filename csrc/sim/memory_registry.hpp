// What the simulator knows about each address range: simulated device memory, pinned host memory
// (allocated by the backend) and registered host memory. Anything else is ordinary (pageable) memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace cuweave::sim {

enum class MemoryKind { Device, Pinned, Registered };

struct MemoryRange {
  std::uintptr_t start;
  std::size_t bytes;
  MemoryKind kind;
  int device;           // for device memory
  bool pooled = false;  // device memory from a stream-ordered pool (cudaMallocFromPoolAsync), not cudaMalloc
  bool mapped = false;  // made by map_unwritten (Note [Memory that reads unwritten]), not aligned_alloc
};

class MemoryRegistry {
 public:
  MemoryRegistry() = default;
  MemoryRegistry(const MemoryRegistry&) = delete;
  MemoryRegistry& operator=(const MemoryRegistry&) = delete;

  // Throws cudaErrorMemoryAllocation. `pooled`: device memory from the device's stream-ordered pool.
  void* allocate(std::size_t bytes, MemoryKind kind, int device, bool pooled = false);
  void release(void* pointer) noexcept;                            // for allocate()d ranges
  void register_range(void* pointer, std::size_t bytes);           // throws if it overlaps a range
  void unregister_range(void* pointer);                            // throws if not registered
  // The range containing `pointer`, if any.
  std::optional<MemoryRange> find(const void* pointer);
  std::size_t device_bytes_in_use();
  // How many ranges of `kind` are allocated (or registered) now.
  std::size_t ranges_of(MemoryKind kind);
  // True if [pointer, pointer + bytes) lies in simulated device or page-locked memory; false for ordinary
  // host memory. Refuses (cudaErrorInvalidValue, naming `call`) a range that starts inside a known
  // allocation and runs past its end.
  bool within_range(const void* pointer, std::size_t bytes, const char* call);
  // True if `pointer` points into simulated device memory.
  bool is_device_memory(const void* pointer);

 private:
  std::mutex mutex_;
  std::map<std::uintptr_t, MemoryRange> ranges_;  // LOCK: mutex_ (by start)
  std::size_t device_bytes_ = 0;                  // LOCK: mutex_
};

// The nominal memory of a simulated device (allocations past it fail as on a full GPU).
inline constexpr std::size_t kSimulatedDeviceMemory = std::size_t{16} << 30;

}  // namespace cuweave::sim
