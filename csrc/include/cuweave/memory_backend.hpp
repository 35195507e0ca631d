// The backend's memory: device, pinned, registered and unpooled allocations, what a pointer points into, and
// the copies and memsets that move bytes between them (Note [Backend facets] in backend.hpp).
#pragma once

#include <cstddef>
#include <vector>

#include "cuweave/backend_handles.hpp"

namespace cuweave {

// One copy of a batch (MemoryBackend::copy_batch): any copy copy_async takes. A pageable source is read before
// the call returns, as one copy's is; other sources are read in stream order.
struct BatchedCopy {
  void* destination;
  const void* source;
  std::size_t bytes;
  bool pageable_source;
};

class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;

  // Device allocations are stream-ordered: usable on `stream` at once, freed after its prior work.
  virtual void* allocate_device(std::size_t bytes, int device, StreamHandle stream) = 0;
  // On a stream taking part in a capture, allocate_device's memory is made outside the capture, usable at once and
  // everywhere. allocate_in_capture makes an allocation node there instead (CUDA: cudaMallocFromPoolAsync captured):
  // an address the capture's later work uses, whose memory exists from each launch's run of that node until a free
  // node (free_device on a stream of a capture: a node), a free outside any graph after a launch, or the next
  // launch (graphs holding such nodes are instantiated to free what their last launch left allocated).
  virtual void* allocate_in_capture(std::size_t bytes, int device, StreamHandle stream) = 0;
  virtual void free_device(void* pointer, StreamHandle stream) noexcept = 0;
  virtual void* allocate_pinned(std::size_t bytes) = 0;
  virtual void free_pinned(void* pointer) noexcept = 0;
  virtual void register_host(void* pointer, std::size_t bytes) = 0;
  virtual void unregister_host(void* pointer) = 0;
  virtual bool is_pinned(const void* pointer) = 0;
  // The device whose memory `pointer` points into, or -1 for host or unknown memory.
  virtual int pointer_device(const void* pointer) = 0;
  virtual void copy_async(void* destination, const void* source, std::size_t bytes, StreamHandle stream) = 0;
  // The copies of `copies` in one call (CUDA 12.8: cudaMemcpyBatchAsync): in stream order as a whole, in any
  // order among themselves. Refused, as CUDA refuses it, for no copies, on the legacy default stream, and while
  // `stream` captures (there is no graph node for a batch): callers copy one by one there.
  virtual void copy_batch(const std::vector<BatchedCopy>& copies, StreamHandle stream) = 0;
  // copy_async done by a kernel on `device`, the stream's, instead of a copy engine (Note [Copies by
  // kernel]), where that device reaches both sides directly (its own memory, pinned host memory mapped into
  // its address space); returns false, queuing nothing, where it does not.
  virtual bool copy_by_kernel(void* destination, const void* source, std::size_t bytes, int device,
                              StreamHandle stream) = 0;
  // Lets the work of `device` and `peer` reach each other's memory directly where the hardware allows, both
  // ways: peer access, and each device's stream-ordered pool granted to the other (CUDA's peer access does not
  // cover pools: Note [Simulated device access]); enabled once per pair. Returns whether it can.
  virtual bool enable_peer_access(int device, int peer) = 0;
  // A copy between the memory of two devices on `stream` (of either): directly where enable_peer_access gave
  // them each other's memory, else staged through the host by the driver (CUDA: cudaMemcpyPeerAsync, which
  // needs no access to either side).
  virtual void copy_between_devices(void* destination, int destination_device, const void* source,
                                    int source_device, std::size_t bytes, StreamHandle stream) = 0;
  // Plain device memory (CUDA: cudaMalloc), outside the stream-ordered pools, which any current device may copy
  // to and from. cuweave's arrays live in the pools; this is the kind of memory other libraries' arrays often
  // hold, and the rules of the two differ (Note [Simulated device access]).
  virtual void* allocate_unpooled(std::size_t bytes, int device) = 0;
  virtual void free_unpooled(void* pointer) noexcept = 0;
  virtual void memset_async(void* destination, int value, std::size_t bytes, StreamHandle stream) = 0;
};

}  // namespace cuweave
