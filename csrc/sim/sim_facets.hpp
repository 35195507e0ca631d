// The simulator's facets (Note [Backend facets] in cuweave/backend.hpp), each made in its own file,
// sim_<facet>_backend.cpp; sim_backend.cpp puts them together. A facet gets the simulator's shared state (the
// scheduler, the capture book, the graph store, device access, the memory registry, the handles) by
// reference, and it must outlive the facet.
#pragma once

#include <memory>

#include "cuweave/backend.hpp"
#include "sim/capture_book.hpp"
#include "sim/device_access.hpp"
#include "sim/graph_store.hpp"
#include "sim/handles.hpp"
#include "sim/memory_registry.hpp"
#include "sim/scheduler.hpp"

namespace cuweave::sim {

std::unique_ptr<DeviceBackend> make_device_backend(Handles& handles, Scheduler& scheduler, CaptureBook& captures,
                                                   DeviceAccess& access);
std::unique_ptr<StreamBackend> make_stream_backend(Handles& handles, Scheduler& scheduler, CaptureBook& captures,
                                                   DeviceAccess& access);
std::unique_ptr<MemoryBackend> make_memory_backend(Handles& handles, Scheduler& scheduler, CaptureBook& captures,
                                                   DeviceAccess& access, MemoryRegistry& memory);
std::unique_ptr<KernelBackend> make_kernel_backend(Handles& handles, Scheduler& scheduler, CaptureBook& captures,
                                                   DeviceAccess& access, MemoryRegistry& memory);
std::unique_ptr<CaptureBackend> make_capture_backend(Handles& handles, CaptureBook& captures, GraphStore& graphs);
std::unique_ptr<GraphBackend> make_graph_backend(Handles& handles, Scheduler& scheduler, CaptureBook& captures,
                                                 GraphStore& graphs);
std::unique_ptr<CollectiveBackend> make_collective_backend(Handles& handles, Scheduler& scheduler);
std::unique_ptr<PartitionBackend> make_partition_backend(Handles& handles, Scheduler& scheduler);

}  // namespace cuweave::sim
