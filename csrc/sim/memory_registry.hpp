// What the simulator knows about each address range: simulated device memory, pinned host memory
// (allocated by the backend) and registered host memory. Anything else is ordinary (pageable) memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace cuweave::sim {

enum class MemoryKind { Device, Pinned, Registered };

struct MemoryRange {
  std::uintptr_t start;
  std::size_t bytes;
  MemoryKind kind;
  int device;           // for device memory
  bool pooled = false;  // device memory from a stream-ordered pool (cudaMallocFromPoolAsync), not cudaMalloc
  bool mapped = false;  // made by map_unwritten (Note [Memory that reads unwritten]), not aligned_alloc
  bool graph = false;            // graph memory (Note [Simulated graph memory]): an allocation node's address
  bool graph_allocated = false;  // for graph memory: whether it exists now (an allocation node ran, no free since)
  bool graph_forgotten = false;  // for graph memory: no graph holds its allocation node any more
  bool graph_living = false;     // for graph memory, in host order: a launch made it, and nothing freed it since
  bool graph_kept = false;       // for graph memory: made by a launch, and no trim found it freed since
  // For pooled device memory freed on a stream, its free not run yet (Note [Reuse in a stream's order]): the
  // stream's id and the free's ticket; 0 while the memory is in use.
  std::uint64_t freed_on_stream = 0;
  std::uint64_t free_ticket = 0;
};

// Why a copy of graph memory that does not exist is refused, or a kernel touching it faults (Note [Simulated graph
// memory]).
inline constexpr const char* kGraphMemoryMissing =
    "touched graph memory that does not exist now (before its graph's first replay, or after it was freed)";

// Note [Simulated graph memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An allocation captured on a stream (cudaMallocAsync) is not memory yet: it is a graph node with an address fixed
// at capture. The bytes exist from where a launch runs that node until a free node (of that graph or of another,
// run later) or a cudaFreeAsync outside any graph ends them, and the next launch's allocation node makes them again
// at the same address. Where they do not exist (in host order) the addresses are unmapped: a kernel touching them
// faults as it runs, losing the device's context, and a copy given its direction is refused as it is called
// (cudaErrorInvalidValue). A copy as cuweave makes them (cudaMemcpyDefault) takes an unmapped address for host
// memory and reads it on the host, crashing the process; the simulator refuses it as a directed copy instead, and
// cuweave refuses any operation on graph memory before its graph's first replay (Note [Graph memory]).
// What CUDA refuses of graphs holding such nodes (checked on an H200, tools/probes/graph_memory_nodes_probe.cu) the
// simulator refuses too: a clone or a copy embedded as a child (cudaErrorNotSupported), a second executable beside
// the first (cudaErrorNotSupported), a launch inside a capture (cudaErrorStreamCaptureUnsupported), and a launch
// while an allocation of the previous launch was never freed, unless the executable frees it itself
// (cudaErrorInvalidValue; cuweave instantiates such graphs with cudaGraphInstantiateFlagAutoFreeOnLaunch). A free
// of graph memory that does not exist now is refused by CUDA (cudaErrorInvalidValue) and changes nothing here
// either.

// Note [Reuse in a stream's order]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A block freed on a stream (cudaFreeAsync) goes back to CUDA's pool once the stream's work before the free has run,
// but the pool hands it at once to the next allocation of the same size on that same stream: the stream's order
// keeps its two holders apart. A loop making a new array from the last (`x = add(x, 1)`) takes two addresses in turn
// on a GPU (seen on an H200). The simulator does the same, so that what keeps a range per address (the weave's and
// the sanitizer's byte maps) sees what it sees on a GPU, and so that a free that does not follow another stream's use
// lets the next holder's work overwrite the bytes that stream still reads, as CUDA's pool does. A block freed on a
// stream is reused only by an allocation of the same size and device on that stream (not while it captures), before
// its free runs; the reused block reads as 0xFF bytes again from the allocation on, in the stream's order (Note
// [Memory that reads unwritten]). Blocks freed on a destroyed stream are never reused: its id is not given again.

class MemoryRegistry {
 public:
  MemoryRegistry() = default;
  MemoryRegistry(const MemoryRegistry&) = delete;
  MemoryRegistry& operator=(const MemoryRegistry&) = delete;

  // Throws cudaErrorMemoryAllocation. `pooled`: device memory from the device's stream-ordered pool.
  void* allocate(std::size_t bytes, MemoryKind kind, int device, bool pooled = false);
  void release(void* pointer) noexcept;                            // for allocate()d ranges
  // Pooled device memory at `pointer` freed on the stream with id `stream`, its free queued there (Note [Reuse in a
  // stream's order]): the ticket release_freed() takes, or 0 where the memory is not reusable so (graph memory, a
  // mapped or empty range); then release() it as the free runs.
  std::uint64_t freed_on(void* pointer, std::uint64_t stream) noexcept;
  // The queued free of `pointer` runs: the memory goes, unless an allocation took it since `ticket`.
  void release_freed(void* pointer, std::uint64_t ticket) noexcept;
  // Memory of `bytes` on `device` freed on the stream with id `stream` whose free has not run: taken for a new
  // allocation there (its range now `bytes` long); null when there is none.
  void* reuse_freed(std::size_t bytes, int device, std::uint64_t stream);
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

  // Graph memory (Note [Simulated graph memory]): an address for an allocation node, its bytes not existing yet.
  void* reserve_graph(std::size_t bytes, int device);
  // An allocation node ran (the bytes exist from now on) or a free ended them. Both at graph memory's start.
  void graph_allocate(void* pointer) noexcept;
  void graph_free(void* pointer) noexcept;
  // A launch that allocates `unfreed` and frees none of it, in host order (what CUDA checks as it takes a launch):
  // false, changing nothing, where some of it still lives from an earlier launch and the launch does not free it
  // first (`free_on_launch`); else the memory counts as living until freed outside a graph or by the next launch.
  bool launched_graph_memory(const std::vector<void*>& unfreed, bool free_on_launch);
  // A free of graph memory outside any graph, in host order.
  void freed_graph_memory(const void* pointer) noexcept;
  // Whether `pointer` is graph memory that no launch has made, or that was freed since (in host order): a copy of
  // it is refused, a kernel touching it faults as it runs. One atomic load while no graph memory was ever reserved.
  bool graph_memory_missing(const void* pointer);
  // Bytes of `device`'s graph memory made by a launch and not given back by a trim since; the trim.
  std::size_t graph_memory_kept(int device);
  void trim_graph_memory(int device);
  // No graph holds an allocation node of `pointer` any more: its address goes back now, or, while the bytes a last
  // launch made exist, once they are freed.
  void forget_graph(void* pointer) noexcept;

 private:
  // `range` is no longer one an allocation may take (Note [Reuse in a stream's order]).
  void forget_freed_locked(MemoryRange& range) noexcept;

  std::mutex mutex_;
  std::map<std::uintptr_t, MemoryRange> ranges_;  // LOCK: mutex_ (by start)
  std::size_t device_bytes_ = 0;                  // LOCK: mutex_
  // By stream id: the starts of the blocks freed there whose free has not run, the latest last.
  std::map<std::uint64_t, std::vector<std::uintptr_t>> freed_;  // LOCK: mutex_
  std::uint64_t tickets_ = 0;                                   // LOCK: mutex_
  std::atomic<bool> any_graph_{false};            // set once graph memory was reserved
};

// The nominal memory of a simulated device (allocations past it fail as on a full GPU).
inline constexpr std::size_t kSimulatedDeviceMemory = std::size_t{16} << 30;

}  // namespace cuweave::sim
