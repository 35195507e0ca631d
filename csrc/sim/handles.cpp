#include "sim/handles.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "sim/sim_error.hpp"

namespace cuweave::sim {

namespace {

int configured_device_count() {
  const char* value = std::getenv("CUWEAVE_SIM_DEVICES");
  if (value == nullptr || *value == '\0') return 1;
  const int count = std::atoi(value);
  return count > 0 ? count : 1;
}

// A default stream's handle: the legacy one (null or CU_STREAM_LEGACY) or the per-thread one, on every device.
bool names_default_stream(StreamHandle handle) {
  return handle == kLegacyHandle || handle == nullptr || handle == kPerThreadHandle;
}

}  // namespace

thread_local int Handles::current_device_ = 0;

Handles::Handles(Scheduler& scheduler, DeviceAccess& access)
    : scheduler_(scheduler), access_(access), devices_(configured_device_count()) {}

int Handles::checked(int device, const char* call) const {
  if (device < 0 || device >= devices_) {
    fail(call, kInvalidDevice, "device " + std::to_string(device) + " does not exist");
  }
  return device;
}

SimStream* Handles::stream_on(StreamHandle handle, int device, const char* call) {
  if (names_default_stream(handle)) {
    access_.check_context(device, call);
    return handle == kPerThreadHandle ? scheduler_.per_thread_stream(device) : scheduler_.legacy_stream(device);
  }
  auto* stream = static_cast<SimStream*>(handle);
  if (!scheduler_.known(stream)) fail(call, kInvalidResourceHandle, "invalid stream handle");
  access_.check_context(stream->device, call);
  return stream;
}

bool Handles::names_live_stream(StreamHandle handle) {
  return names_default_stream(handle) || scheduler_.known(static_cast<SimStream*>(handle));
}

void Handles::crash_unless_live_stream(StreamHandle handle, const char* call, const char* consequence) {
  if (names_live_stream(handle)) return;
  std::fprintf(stderr, "cuweave simulator: %s was given the handle %p of a destroyed stream; CUDA crashes there (seen on an H200). %s\n",
               call, handle, consequence);
  std::abort();
}

SimEvent* Handles::resolve_event(EventHandle handle, const char* call) {
  auto* event = static_cast<SimEvent*>(handle);
  if (!scheduler_.known(event)) fail(call, kInvalidResourceHandle, "invalid event handle");
  access_.check_context(event->device, call);
  return event;
}

}  // namespace cuweave::sim
