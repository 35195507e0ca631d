// The simulator's facets (Note [Backend facets] in cuweave/backend.hpp), each made in its own file,
// sim_<facet>_backend.cpp; simulator.hpp puts them together. A facet gets the simulator's shared state (the
// injected faults, device access, the scheduler, the capture book, the graph store, the memory registry, the
// handles, the graphs' conditions, the communicators being joined) by reference, and it must outlive the facet.
#pragma once

#include <memory>

#include "cuweave/backend.hpp"
#include "sim/capture_book.hpp"
#include "sim/device_access.hpp"
#include "sim/fault_plan.hpp"
#include "sim/graph_store.hpp"
#include "sim/handles.hpp"
#include "sim/memory_registry.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_collectives.hpp"
#include "sim/sim_graph.hpp"

namespace cuweave::sim {

// The simulator's shared state, made in this order (each part after what it is given; the memory first, so that
// graphs, which give their graph memory's addresses back as they go, go before it).
struct SimState {
  MemoryRegistry memory;
  FaultPlan faults;
  DeviceAccess access;
  Scheduler scheduler{access};
  ConditionBook conditions;
  CaptureBook captures{scheduler, conditions};
  GraphStore graphs{conditions};
  Handles handles{scheduler, access};
  CommunicatorRegistry communicators;
};

std::unique_ptr<DeviceBackend> make_device_backend(SimState& sim);
std::unique_ptr<StreamBackend> make_stream_backend(SimState& sim);
std::unique_ptr<MemoryBackend> make_memory_backend(SimState& sim);
std::unique_ptr<KernelBackend> make_kernel_backend(SimState& sim);
std::unique_ptr<CaptureBackend> make_capture_backend(SimState& sim);
std::unique_ptr<GraphBackend> make_graph_backend(SimState& sim);
std::unique_ptr<CollectiveBackend> make_collective_backend(SimState& sim);
std::unique_ptr<PartitionBackend> make_partition_backend(SimState& sim);

}  // namespace cuweave::sim
