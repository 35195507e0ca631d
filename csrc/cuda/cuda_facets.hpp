// The CUDA backend's facets (Note [Backend facets] in cuweave/backend.hpp), each made in its own file,
// cuda_<facet>_backend.cpp; cuda_backend.cpp puts them together. A facet gets the facets and the state it
// shares with others of this backend by reference, and they must outlive it.
#pragma once

#include <memory>

#include "cuda/active_captures.hpp"
#include "cuweave/backend.hpp"

namespace cuweave::cuda {

std::unique_ptr<DeviceBackend> make_device_backend();
std::unique_ptr<StreamBackend> make_stream_backend(const ActiveCaptures& captures);
std::unique_ptr<MemoryBackend> make_memory_backend(const ActiveCaptures& captures);
std::unique_ptr<KernelBackend> make_kernel_backend(const ActiveCaptures& captures, DeviceBackend& devices,
                                                   MemoryBackend& memory);
std::unique_ptr<GraphBackend> make_graph_backend();
std::unique_ptr<CaptureBackend> make_capture_backend(ActiveCaptures& captures, GraphBackend& graphs);
std::unique_ptr<CollectiveBackend> make_collective_backend(const ActiveCaptures& captures, StreamBackend& streams);
std::unique_ptr<PartitionBackend> make_partition_backend();

}  // namespace cuweave::cuda
