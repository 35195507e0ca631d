// The host simulator: its shared state, its facets over that state, and the Backend that hands them out.
// See Note [Simulator scheduling] in scheduler.hpp and Note [Simulated capture and graphs] in capture_book.hpp.
#pragma once

#include <memory>

#include "cuweave/backend.hpp"
#include "sim/sim_facets.hpp"
#include "sim/sim_tracer.hpp"

namespace cuweave::sim {

// Members are made in order, each after what it is given, and destroyed in reverse.
class Simulator {
 public:
  Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  Backend& backend() noexcept { return backend_; }
  SimState& state() noexcept { return state_; }

 private:
  SimState state_;
  std::unique_ptr<DeviceBackend> devices_;
  std::unique_ptr<StreamBackend> streams_;
  std::unique_ptr<MemoryBackend> memory_;
  std::unique_ptr<KernelBackend> kernels_;
  std::unique_ptr<CaptureBackend> capture_;
  std::unique_ptr<GraphBackend> graphs_;
  std::unique_ptr<CollectiveBackend> collectives_;
  std::unique_ptr<PartitionBackend> partitions_;
  SimTracer tracer_;
  Backend backend_;
};

// The process's simulator, behind sim_backend(): made at first use and never destroyed (its worker threads run
// until the process ends, and memory may be freed during interpreter exit).
Simulator& simulator();

}  // namespace cuweave::sim
