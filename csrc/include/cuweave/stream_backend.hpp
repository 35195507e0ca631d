// The backend's streams, the events recorded on them and the host flags they wait for: everything that
// orders work and tells when it has completed (Note [Backend facets] in backend.hpp).
#pragma once

#include <string>

#include "cuweave/backend_handles.hpp"

namespace cuweave {

struct StreamInfo {
  int device = 0;
  int priority = 0;
  bool blocking = true;
};

// Bit flags for StreamBackend::create_event.
enum EventFlag : unsigned {
  kEventDefault = 0,
  kEventTiming = 1u << 0,
  kEventBlockingSync = 1u << 1,
  kEventInterprocess = 1u << 2,
};

class StreamBackend {
 public:
  virtual ~StreamBackend() = default;

  // Streams. The two default streams are fixed handles valid on every device.
  virtual StreamHandle legacy_default_stream() const noexcept = 0;
  virtual StreamHandle per_thread_default_stream() const noexcept = 0;
  virtual StreamHandle create_stream(int device, int priority, bool blocking) = 0;
  virtual void destroy_stream(StreamHandle stream) noexcept = 0;
  virtual StreamInfo stream_info(StreamHandle stream) = 0;
  virtual void synchronize_stream(StreamHandle stream) = 0;
  // synchronize_stream for at most one slice: true once the stream's work has completed.
  virtual bool synchronize_stream_for(StreamHandle stream, const WaitSlice& slice) = 0;
  virtual bool stream_idle(StreamHandle stream) = 0;
  virtual void stream_wait_event(StreamHandle stream, EventHandle event) = 0;
  // Calls function(user_data) once all prior work on the stream has completed; later work waits for it.
  virtual void launch_host_function(StreamHandle stream, HostFunction function, void* user_data) = 0;

  // Host flags, raised once by the host, for which streams can wait (CUDA: cuStreamWaitValue32 on mapped
  // pinned memory). Destroy a flag only after raising it.
  virtual HostFlagHandle create_host_flag() = 0;
  virtual void destroy_host_flag(HostFlagHandle flag) noexcept = 0;
  // Later work on `stream` waits until the flag has been raised.
  virtual void stream_wait_host_flag(StreamHandle stream, HostFlagHandle flag) = 0;
  // From any host thread.
  virtual void raise_host_flag(HostFlagHandle flag) noexcept = 0;

  // Events.
  virtual EventHandle create_event(int device, unsigned flags) = 0;
  virtual void destroy_event(EventHandle event) noexcept = 0;
  virtual void record_event(EventHandle event, StreamHandle stream) = 0;
  virtual bool event_complete(EventHandle event) = 0;
  virtual void synchronize_event(EventHandle event) = 0;
  // synchronize_event for at most one slice: true once the event has completed.
  virtual bool synchronize_event_for(EventHandle event, const WaitSlice& slice) = 0;
  virtual float elapsed_ms(EventHandle start, EventHandle end) = 0;
  virtual std::string event_ipc_handle(EventHandle event) = 0;
  virtual EventHandle open_event_ipc_handle(const std::string& handle) = 0;
};

}  // namespace cuweave
