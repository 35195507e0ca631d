// The backend's devices: how many, which is current, what they are, and waiting for all of a device's work
// (Note [Backend facets] in backend.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "cuweave/backend_handles.hpp"

namespace cuweave {

struct DeviceProperties {
  int ordinal = 0;
  std::string name;
  int multiprocessor_count = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int async_engine_count = 0;
  int lowest_priority = 0;   // numerically greatest (CUDA: 0)
  int highest_priority = 0;  // numerically least (CUDA: e.g. -5)
  std::size_t total_memory = 0;
  std::string pci_bus_id;
};

// Graph memory of one device (Note [Graph memory] in capture.hpp), in bytes: what graphs' allocations hold now,
// and what the device keeps for them (between launches too, until a trim).
struct GraphMemoryUse {
  std::size_t used = 0;
  std::size_t reserved = 0;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // device_count() never throws: it answers 0 when no device or driver is usable, and unavailable_reason()
  // then says why.
  virtual int device_count() noexcept = 0;
  virtual std::string unavailable_reason() = 0;
  // Throws DeviceUnavailable, naming what is missing, unless at least one device is usable.
  virtual void require_device() = 0;
  virtual int current_device() = 0;
  virtual void set_current_device(int device) = 0;
  virtual DeviceProperties device_properties(int device) = 0;
  virtual void synchronize_device(int device) = 0;
  // synchronize_device for at most one slice: true once the device's work has completed.
  virtual bool synchronize_device_for(int device, const WaitSlice& slice) = 0;
  virtual std::pair<int, int> driver_version() = 0;
  virtual std::pair<int, int> runtime_version() = 0;
  // CUDA: cudaDeviceGetGraphMemAttribute (UsedMemCurrent, ReservedMemCurrent).
  virtual GraphMemoryUse graph_memory_use(int device) = 0;
  // Gives back the graph memory `device` keeps that no allocation holds now (CUDA: cudaDeviceGraphMemTrim).
  virtual void trim_graph_memory(int device) = 0;
};

}  // namespace cuweave
