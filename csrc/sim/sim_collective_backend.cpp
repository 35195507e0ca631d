// The simulator's collectives (CollectiveBackend); the simulated communicators are in sim_collectives.cpp.
#include <memory>
#include <string>
#include <vector>

#include "cuweave/backend.hpp"
#include "sim/handles.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_collectives.hpp"
#include "sim/sim_facets.hpp"

namespace cuweave::sim {

namespace {

class SimCollectiveBackend final : public CollectiveBackend {
 public:
  SimCollectiveBackend(Handles& handles, CommunicatorRegistry& communicators, const CollectiveParts& parts)
      : handles_(handles), communicators_(communicators), parts_(parts) {}

  std::string collective_id() override { return communicators_.make_id(); }
  CommunicatorHandle create_communicator(const std::string& id, int ranks, int rank, int device) override {
    return communicators_.join(id, ranks, rank, handles_.checked(device, "ncclCommInitRank"));
  }
  std::vector<CommunicatorHandle> create_communicators(const std::vector<int>& devices) override {
    for (int device : devices) handles_.checked(device, "ncclCommInitRankConfig");
    return communicators_for_devices(devices);
  }
  bool communicator_ready(CommunicatorHandle communicator) override { return sim::communicator_ready(communicator); }
  void abort_communicator(CommunicatorHandle communicator) noexcept override {
    sim::abort_communicator(communicator, parts_.scheduler);
  }
  void destroy_communicator(CommunicatorHandle communicator) noexcept override {
    // As NCCL's ncclCommDestroy, which synchronizes the communicator's streams and frees its device memory: it
    // waits for the device's queued work. Not while exploring schedules, where queued work runs only as the
    // test's thread waits, and a destroy may come on a thread of cuweave's own.
    if (!parts_.scheduler.seed()) {
      try {
        parts_.scheduler.synchronize_device(communicator_device(communicator));
      } catch (...) {
        // The device's work failed: NCCL's destroy goes on.
      }
    }
    sim::destroy_communicator(communicator);
  }
  void begin_collective_group() override { sim::begin_group(); }
  void end_collective_group() override { sim::end_group(parts_); }
  void collective(const Collective& collective, CommunicatorHandle communicator, StreamHandle handle) override {
    SimStream* stream = handles_.stream_on(handle, communicator_device(communicator), "ncclGroupEnd");
    enqueue_collective(collective, communicator, stream, parts_);
  }
  bool collective_completed(EventHandle event) override {
    return parts_.scheduler.event_done(handles_.resolve_event(event, "cudaEventQuery"));
  }

 private:
  Handles& handles_;
  CommunicatorRegistry& communicators_;
  CollectiveParts parts_;
};

}  // namespace

std::unique_ptr<CollectiveBackend> make_collective_backend(SimState& sim) {
  return std::make_unique<SimCollectiveBackend>(sim.handles, sim.communicators,
                                                CollectiveParts{sim.scheduler, sim.captures, sim.faults});
}

}  // namespace cuweave::sim
