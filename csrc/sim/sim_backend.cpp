// The host simulator backend: the whole API on host threads, with CUDA's ordering rules and errors.
// Its facets (Note [Backend facets] in cuweave/backend.hpp) live in sim_<facet>_backend.cpp; here they are made
// over the simulator's shared state and put together.
#include "sim/simulator.hpp"

namespace cuweave::sim {

Simulator::Simulator()
    : devices_(make_device_backend(state_)),
      streams_(make_stream_backend(state_)),
      memory_(make_memory_backend(state_)),
      kernels_(make_kernel_backend(state_)),
      capture_(make_capture_backend(state_)),
      graphs_(make_graph_backend(state_)),
      collectives_(make_collective_backend(state_)),
      partitions_(make_partition_backend(state_)),
      tracer_(state_.handles, state_.faults),
      backend_("sim", BackendFacets{devices_.get(), streams_.get(), memory_.get(), kernels_.get(), capture_.get(),
                                    graphs_.get(), &tracer_, collectives_.get(), partitions_.get()}) {}

Simulator& simulator() {
  static auto* made = new Simulator;  // never destroyed (simulator.hpp)
  return *made;
}

}  // namespace cuweave::sim

namespace cuweave {

Backend& sim_backend() { return sim::simulator().backend(); }

}  // namespace cuweave
