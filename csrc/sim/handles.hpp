// What the device ordinals and the stream and event handles a simulator call names mean: checked as CUDA
// checks them, a default stream's handle resolved against the calling thread's current device. One per
// simulator, shared by its facets (Note [Backend facets] in cuweave/backend.hpp).
#pragma once

#include <cstdint>

#include "cuweave/backend_handles.hpp"
#include "sim/device_access.hpp"
#include "sim/scheduler.hpp"

namespace cuweave::sim {

// The SMs of each simulated device (its properties' multiprocessor count, and what SM partitions split).
inline constexpr unsigned kSimulatedMultiprocessors = 4;

inline StreamHandle const kLegacyHandle = reinterpret_cast<StreamHandle>(std::uintptr_t{1});
inline StreamHandle const kPerThreadHandle = reinterpret_cast<StreamHandle>(std::uintptr_t{2});

class Handles {
 public:
  // As many devices as CUWEAVE_SIM_DEVICES says (default 1).
  Handles(Scheduler& scheduler, DeviceAccess& access);

  int devices() const noexcept { return devices_; }
  // The calling thread's.
  int current_device() const noexcept { return current_device_; }
  void set_current_device(int device) noexcept { current_device_ = device; }

  // `device`, or fails as `call` would where no such device exists.
  int checked(int device, const char* call) const;
  // The stream a handle means on `device` (the calling thread's own for the per-thread default stream).
  SimStream* stream_on(StreamHandle handle, int device, const char* call);
  SimStream* resolve_stream(StreamHandle handle, const char* call) { return stream_on(handle, current_device_, call); }
  SimEvent* resolve_event(EventHandle handle, const char* call);
  // Whether `handle` names a default stream or one made and not destroyed.
  bool names_live_stream(StreamHandle handle);
  // Stops the process, naming `call` and `consequence`, unless `handle` names a live stream: for calls that CUDA
  // does not refuse a destroyed stream but crashes on (seen on an H200), and whose caller could pass an error over.
  void crash_unless_live_stream(StreamHandle handle, const char* call, const char* consequence);

 private:
  Scheduler& scheduler_;
  DeviceAccess& access_;
  const int devices_;
  static thread_local int current_device_;
};

}  // namespace cuweave::sim
