// Memory that reads as 0xFF bytes until written, without writing it (Note [Memory that reads unwritten]).
#pragma once

#include <cstddef>

namespace cuweave::sim {

// Note [Memory that reads unwritten]
// The simulator promises that new memory holds 0xFF bytes (NaN as floats, -1 as integers), so that a read before
// any write fails every time. Writing them costs the host a pass over the memory as it allocates, about 5 ms for
// 32 MB: a program allocating as it queues work then shows no overlap on the simulator where a GPU would. So a
// large allocation is instead a run of copy-on-write mappings of one block of 0xFF bytes kept in memory (a memfd):
// reads see the block's bytes, a write copies the page it touches first, and the host writes nothing up front.

// `bytes` (rounded up to whole blocks) of such memory, page-aligned; null if the system cannot map it (the caller
// then allocates and fills as usual).
void* map_unwritten(std::size_t bytes) noexcept;
// Unmaps what map_unwritten(bytes) returned.
void unmap_unwritten(void* pointer, std::size_t bytes) noexcept;
// Allocations from this size up are mapped; smaller ones cost little to fill.
inline constexpr std::size_t kMappedFrom = std::size_t{1} << 20;

}  // namespace cuweave::sim
