// Copies between host memory and device memory, choosing the path by the host memory's kind and size:
//  * pinned or registered host memory, or fewer than kStagedCopyThreshold bytes: one DMA on the stream;
//  * larger ordinary (pageable) memory: chunks through the staging ring, host-side copies split
//    across HostCopyThreads while the copy engine moves the previous chunk (Note [Staging ring reuse]).
// Either way the semantics are CUDA's: a host-to-device copy returns once the host data has been read
// (later host writes do not reach the device), a device-to-host copy into pageable memory returns once
// the data is there, and into pinned memory it is asynchronous.
#pragma once

#include <cstddef>
#include <vector>

#include "cuweave/copy_by.hpp"
#include "cuweave/hold.hpp"

namespace cuweave {

class CopyThreadTuner;
class Operation;
class Stream;

inline constexpr std::size_t kStagedCopyThreshold = std::size_t{1} << 20;

// Ordered on `stream`, through the submission path for `operation` (which names the device side and what to
// keep alive; the host bytes are added here). Callers release the GIL. `by` applies where the host side is
// pinned (Note [Copies by kernel]); staged copies use the copy engines.
void copy_host_to_device(Operation& operation, Stream& stream, void* device_destination, const void* host_source,
                         std::size_t bytes, CopyBy by = CopyBy::CopyEngine);
void copy_device_to_host(Operation& operation, Stream& stream, void* host_destination, const void* device_source,
                         std::size_t bytes, CopyBy by = CopyBy::CopyEngine);

// Note [Batched copies]
// ~~~~~~~~~~~~~~~~~~~~~
// A batch of arrays copied to the device together (a prefetched dict of arrays, cuweave.to_device_batch) is one
// submission: one operation naming every device side, one placement, one sanitizer check. Its pinned sources and
// its pageable ones below kStagedCopyThreshold go in one backend call (MemoryBackend::copy_batch, CUDA's
// cudaMemcpyBatchAsync), which costs the host about what one copy does; larger pageable sources go through the
// staging ring, each as copy_host_to_device copies one. Where CUDA refuses a batch (on the legacy default stream,
// and while the stream captures: a graph has no node for one) the same copies go one by one, captured as memcpy
// nodes. A batch of one is one copy.
struct HostToDevice {
  void* device_destination;
  const void* host_source;
  std::size_t bytes;
};
void copy_host_to_device_batch(Operation& operation, Stream& stream, const std::vector<HostToDevice>& copies);

// How many copy threads staged copies in each direction use (Note [Copy threads chosen as transfers run]).
enum class StagedDirection { ToDevice, ToHost };
CopyThreadTuner& staged_copy_tuner(StagedDirection direction);

}  // namespace cuweave
