// The simulator's streams, events and host flags (StreamBackend).
#include <memory>
#include <string>

#include "cuweave/backend.hpp"
#include "sim/capture_book.hpp"
#include "sim/device_access.hpp"
#include "sim/handles.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_error.hpp"
#include "sim/sim_facets.hpp"
#include "sim/sim_graph.hpp"
#include "sim/sim_tracer.hpp"

namespace cuweave::sim {

namespace {

class SimStreamBackend final : public StreamBackend {
 public:
  SimStreamBackend(Handles& handles, Scheduler& scheduler, CaptureBook& captures, DeviceAccess& access)
      : handles_(handles), scheduler_(scheduler), captures_(captures), access_(access) {}

  StreamHandle legacy_default_stream() const noexcept override { return kLegacyHandle; }
  StreamHandle per_thread_default_stream() const noexcept override { return kPerThreadHandle; }

  StreamHandle create_stream(int device, int priority, bool blocking) override {
    return scheduler_.create_stream(handles_.checked(device, "cudaStreamCreateWithPriority"), priority, blocking);
  }
  void destroy_stream(StreamHandle handle) noexcept override {
    if (handle == kLegacyHandle || handle == kPerThreadHandle) return;
    captures_.forget(static_cast<SimStream*>(handle));
    scheduler_.destroy_stream(static_cast<SimStream*>(handle));
  }
  StreamInfo stream_info(StreamHandle handle) override {
    SimStream* stream = handles_.resolve_stream(handle, "cudaStreamGetDevice");
    captures_.check_stream_described(stream, "cudaStreamGetDevice");
    return StreamInfo{stream->device, stream->priority, stream->blocking};
  }
  void synchronize_stream(StreamHandle handle) override { synchronize_stream_until(handle, TimePoint::max()); }
  bool synchronize_stream_for(StreamHandle handle, const WaitSlice& slice) override {
    return synchronize_stream_until(handle, slice.until);
  }
  bool stream_idle(StreamHandle handle) override {
    // Seen: the sanitizer asked about an adopted stream whose owner had destroyed it (the sanitized suite on an
    // H200 crashed there).
    handles_.crash_unless_live_stream(handle, "cudaStreamQuery",
                                      "A stream adopted with Stream.from_external must outlive its adoption.");
    SimStream* stream = handles_.resolve_stream(handle, "cudaStreamQuery");
    captures_.check_stream_query(stream, "cudaStreamQuery");
    const bool idle = scheduler_.stream_idle(stream);
    access_.check_context(stream->device, "cudaStreamQuery");
    return idle;
  }
  void stream_wait_event(StreamHandle handle, EventHandle event_handle) override {
    SimStream* stream = handles_.resolve_stream(handle, "cudaStreamWaitEvent");
    SimEvent* event = handles_.resolve_event(event_handle, "cudaStreamWaitEvent");
    captures_.wait_or_run(stream, event,
                          [&] { scheduler_.wait(stream, event, traced(trace::Kind::EventWait, *stream)); });
  }
  void launch_host_function(StreamHandle handle, HostFunction function, void* user_data) override {
    SimStream* stream = handles_.resolve_stream(handle, "cudaLaunchHostFunc");
    captures_.capture_or_run(
        stream, "cudaLaunchHostFunc", [&] { return chain(HostNode{function, user_data}); },
        [&] { scheduler_.enqueue(stream, [function, user_data] { function(user_data); }); });
  }

  HostFlagHandle create_host_flag() override { return scheduler_.create_host_flag(); }
  void destroy_host_flag(HostFlagHandle flag) noexcept override {
    scheduler_.destroy_host_flag(static_cast<HostFlag*>(flag));
  }
  void stream_wait_host_flag(StreamHandle handle, HostFlagHandle flag) override {
    SimStream* stream = handles_.resolve_stream(handle, "cuStreamWaitValue32");
    if (captures_.state(stream).status != CaptureState::Status::None) {
      fail("cuStreamWaitValue32", kStreamCaptureUnsupported,
           "a wait for a host flag cannot be captured: its value is fixed when the graph is built");
    }
    scheduler_.wait_host_flag(stream, static_cast<HostFlag*>(flag));
  }
  void raise_host_flag(HostFlagHandle flag) noexcept override {
    scheduler_.raise_host_flag(static_cast<HostFlag*>(flag));
  }

  EventHandle create_event(int device, unsigned flags) override {
    return scheduler_.create_event(handles_.checked(device, "cudaEventCreateWithFlags"), flags);
  }
  void destroy_event(EventHandle event) noexcept override {
    captures_.forget(static_cast<SimEvent*>(event));
    scheduler_.destroy_event(static_cast<SimEvent*>(event));
  }
  void record_event(EventHandle event_handle, StreamHandle handle) override {
    SimEvent* event = handles_.resolve_event(event_handle, "cudaEventRecord");
    SimStream* stream = handles_.resolve_stream(handle, "cudaEventRecord");
    if (event->device != stream->device) {
      fail("cudaEventRecord", kInvalidResourceHandle,
           "the event belongs to device " + std::to_string(event->device) + " and the stream to device " +
               std::to_string(stream->device) + ": an event is recorded only on a stream of its own device");
    }
    captures_.record_or_run(event, stream,
                            [&] { scheduler_.record(event, stream, traced(trace::Kind::EventRecord, *stream)); });
  }
  bool event_complete(EventHandle event_handle) override {
    SimEvent* event = handles_.resolve_event(event_handle, "cudaEventQuery");
    captures_.check_event_query(event, "cudaEventQuery");
    const bool complete = scheduler_.event_complete(event);
    access_.check_context(event->device, "cudaEventQuery");
    return complete;
  }
  void synchronize_event(EventHandle event_handle) override {
    synchronize_event_until(event_handle, TimePoint::max());
  }
  bool synchronize_event_for(EventHandle event_handle, const WaitSlice& slice) override {
    return synchronize_event_until(event_handle, slice.until);
  }
  float elapsed_ms(EventHandle start, EventHandle end) override {
    SimEvent* first = handles_.resolve_event(start, "cudaEventElapsedTime");
    SimEvent* last = handles_.resolve_event(end, "cudaEventElapsedTime");
    if (!(first->flags & kEventTiming) || !(last->flags & kEventTiming)) {
      fail("cudaEventElapsedTime", kInvalidResourceHandle, "an event was created without timing");
    }
    captures_.check_event_query(first, "cudaEventElapsedTime");
    captures_.check_event_query(last, "cudaEventElapsedTime");
    return static_cast<float>(scheduler_.elapsed_ms(first, last));
  }
  std::string event_ipc_handle(EventHandle) override {
    fail_needs_gpu("cudaIpcGetEventHandle", "interprocess events need the CUDA backend and a GPU");
  }
  EventHandle open_event_ipc_handle(const std::string&) override {
    fail_needs_gpu("cudaIpcOpenEventHandle", "interprocess events need the CUDA backend and a GPU");
  }

 private:
  using TimePoint = Scheduler::TimePoint;

  // A synchronize, bounded (a wait slice) or not (until TimePoint::max()): whether the work completed in time.
  // The context is checked once the wait is over, as CUDA reports a lost one at the synchronize.
  bool synchronize_stream_until(StreamHandle handle, TimePoint until) {
    SimStream* stream = handles_.resolve_stream(handle, "cudaStreamSynchronize");
    captures_.check_stream_synchronize(stream, "cudaStreamSynchronize");
    return context_checked(stream->device, "cudaStreamSynchronize", scheduler_.synchronize_stream(stream, until));
  }
  bool synchronize_event_until(EventHandle handle, TimePoint until) {
    SimEvent* event = handles_.resolve_event(handle, "cudaEventSynchronize");
    captures_.check_event_synchronize(event, "cudaEventSynchronize");
    return context_checked(event->device, "cudaEventSynchronize", scheduler_.synchronize_event(event, until));
  }
  bool context_checked(int device, const char* call, bool done) {
    access_.check_context(device, call);
    return done;
  }

  Handles& handles_;
  Scheduler& scheduler_;
  CaptureBook& captures_;
  DeviceAccess& access_;
};

}  // namespace

std::unique_ptr<StreamBackend> make_stream_backend(SimState& sim) {
  return std::make_unique<SimStreamBackend>(sim.handles, sim.scheduler, sim.captures, sim.access);
}

}  // namespace cuweave::sim
