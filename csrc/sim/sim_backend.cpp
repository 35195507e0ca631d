// The host simulator backend: the whole API on host threads, with CUDA's ordering rules and errors.
// See Note [Simulator scheduling] in scheduler.hpp and Note [Simulated capture and graphs] in capture_book.hpp.
// Its facets (Note [Backend facets] in cuweave/backend.hpp) live in sim_<facet>_backend.cpp; here they are made
// once, over the simulator's shared state, and put together.
#include <memory>

#include "cuweave/backend.hpp"
#include "sim/sim_facets.hpp"
#include "sim/sim_tracer.hpp"

namespace cuweave::sim {

namespace {

// The facets; members are made in order, each after what it is given.
struct SimFacets {
  Scheduler& scheduler = Scheduler::instance();
  CaptureBook& captures = CaptureBook::instance();
  GraphStore& graphs_store = GraphStore::instance();
  DeviceAccess& access = DeviceAccess::instance();
  MemoryRegistry& memory_registry = MemoryRegistry::instance();
  Handles handles{scheduler, access};
  std::unique_ptr<DeviceBackend> devices = make_device_backend(handles, scheduler, captures, access);
  std::unique_ptr<StreamBackend> streams = make_stream_backend(handles, scheduler, captures, access);
  std::unique_ptr<MemoryBackend> memory = make_memory_backend(handles, scheduler, captures, access, memory_registry);
  std::unique_ptr<KernelBackend> kernels = make_kernel_backend(handles, scheduler, captures, access, memory_registry);
  std::unique_ptr<CaptureBackend> capture = make_capture_backend(handles, captures, graphs_store);
  std::unique_ptr<GraphBackend> graphs = make_graph_backend(handles, scheduler, captures, graphs_store);
  std::unique_ptr<CollectiveBackend> collectives = make_collective_backend(handles, scheduler);
  std::unique_ptr<PartitionBackend> partitions = make_partition_backend(handles, scheduler);
  SimTracer tracer{handles};
  Backend backend{"sim", BackendFacets{devices.get(), streams.get(), memory.get(), kernels.get(), capture.get(),
                                       graphs.get(), &tracer, collectives.get(), partitions.get()}};
};

}  // namespace
}  // namespace cuweave::sim

namespace cuweave {

Backend& sim_backend() {
  static auto* instance = new sim::SimFacets;  // leaked: used until the process ends
  return instance->backend;
}

}  // namespace cuweave
