// The simulator's devices (DeviceBackend).
#include <memory>
#include <string>
#include <utility>

#include "cuweave/backend.hpp"
#include "sim/capture_book.hpp"
#include "sim/device_access.hpp"
#include "sim/handles.hpp"
#include "sim/memory_registry.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_error.hpp"
#include "sim/sim_facets.hpp"

namespace cuweave::sim {

namespace {

class SimDeviceBackend final : public DeviceBackend {
 public:
  SimDeviceBackend(Handles& handles, Scheduler& scheduler, CaptureBook& captures, DeviceAccess& access,
                   MemoryRegistry& memory)
      : handles_(handles), scheduler_(scheduler), captures_(captures), access_(access), memory_(memory) {}

  int device_count() noexcept override { return handles_.devices(); }
  std::string unavailable_reason() override { return ""; }
  void require_device() override {}

  int current_device() override { return handles_.current_device(); }
  void set_current_device(int device) override {
    handles_.set_current_device(handles_.checked(device, "cudaSetDevice"));
  }

  DeviceProperties device_properties(int device) override {
    DeviceProperties props;
    props.ordinal = handles_.checked(device, "cudaGetDeviceProperties");
    props.name = "cuweave simulator (host threads)";
    props.multiprocessor_count = static_cast<int>(kSimulatedMultiprocessors);
    props.async_engine_count = 2;
    props.lowest_priority = 0;
    props.highest_priority = -5;  // the range current NVIDIA GPUs report
    props.total_memory = kSimulatedDeviceMemory;
    props.pci_bus_id = "sim:" + std::to_string(device);
    return props;
  }

  void synchronize_device(int device) override {
    handles_.checked(device, "cudaDeviceSynchronize");
    captures_.check_device_synchronize(device, "cudaDeviceSynchronize");
    scheduler_.synchronize_device(device);
    access_.check_context(device, "cudaDeviceSynchronize");
  }
  bool synchronize_device_for(int device, const WaitSlice& slice) override {
    handles_.checked(device, "cudaDeviceSynchronize");
    captures_.check_device_synchronize(device, "cudaDeviceSynchronize");
    const bool done = scheduler_.synchronize_device(device, slice.until);
    access_.check_context(device, "cudaDeviceSynchronize");
    return done;
  }
  std::pair<int, int> driver_version() override { return {0, 0}; }
  std::pair<int, int> runtime_version() override { return {0, 0}; }
  // Each allocation node's bytes count from its first launch until a trim finds them freed (CUDA also shares
  // them among graphs whose launches do not overlap: the simulator counts each node's own).
  GraphMemoryUse graph_memory_use(int device) override {
    const std::size_t kept = memory_.graph_memory_kept(handles_.checked(device, "cudaDeviceGetGraphMemAttribute"));
    return {kept, kept};
  }
  void trim_graph_memory(int device) override {
    memory_.trim_graph_memory(handles_.checked(device, "cudaDeviceGraphMemTrim"));
  }

 private:
  Handles& handles_;
  Scheduler& scheduler_;
  CaptureBook& captures_;
  DeviceAccess& access_;
  MemoryRegistry& memory_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_device_backend(SimState& sim) {
  return std::make_unique<SimDeviceBackend>(sim.handles, sim.scheduler, sim.captures, sim.access, sim.memory);
}

}  // namespace cuweave::sim
