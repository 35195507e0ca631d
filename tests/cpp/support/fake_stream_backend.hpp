// A StreamBackend of counters, no simulator behind it, for core code that needs streams and events only
// (Note [Backend facets]): it hands out events, remembers which device each was made for and counts what was
// created and destroyed. Every call that such code should not make fails the test.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include <gtest/gtest.h>

#include "cuweave/stream_backend.hpp"

namespace cuweave::testing {

class FakeStreamBackend final : public StreamBackend {
 public:
  int events_created = 0;
  int events_destroyed = 0;
  std::unordered_map<EventHandle, int> event_devices;     // live events -> device
  std::unordered_map<EventHandle, unsigned> event_flags;  // live events -> flags

  EventHandle create_event(int device, unsigned flags) override {
    auto* event = reinterpret_cast<EventHandle>(next_handle_++);
    ++events_created;
    event_devices[event] = device;
    event_flags[event] = flags;
    return event;
  }
  void destroy_event(EventHandle event) noexcept override {
    ++events_destroyed;
    event_devices.erase(event);
    event_flags.erase(event);
  }

  StreamHandle legacy_default_stream() const noexcept override { return nullptr; }
  StreamHandle per_thread_default_stream() const noexcept override { return nullptr; }
  StreamHandle create_stream(int, int, bool) override {
    unexpected("create_stream");
    return nullptr;
  }
  void destroy_stream(StreamHandle) noexcept override { unexpected("destroy_stream"); }
  StreamInfo stream_info(StreamHandle) override {
    unexpected("stream_info");
    return StreamInfo{};
  }
  void synchronize_stream(StreamHandle) override { unexpected("synchronize_stream"); }
  bool synchronize_stream_for(StreamHandle, const WaitSlice&) override {
    unexpected("synchronize_stream_for");
    return true;
  }
  bool stream_idle(StreamHandle) override {
    unexpected("stream_idle");
    return true;
  }
  void stream_wait_event(StreamHandle, EventHandle) override { unexpected("stream_wait_event"); }
  void launch_host_function(StreamHandle, HostFunction, void*) override { unexpected("launch_host_function"); }
  HostFlagHandle create_host_flag() override {
    unexpected("create_host_flag");
    return nullptr;
  }
  void destroy_host_flag(HostFlagHandle) noexcept override { unexpected("destroy_host_flag"); }
  void stream_wait_host_flag(StreamHandle, HostFlagHandle) override { unexpected("stream_wait_host_flag"); }
  void raise_host_flag(HostFlagHandle) noexcept override { unexpected("raise_host_flag"); }
  void record_event(EventHandle, StreamHandle) override { unexpected("record_event"); }
  bool event_complete(EventHandle) override {
    unexpected("event_complete");
    return true;
  }
  void synchronize_event(EventHandle) override { unexpected("synchronize_event"); }
  bool synchronize_event_for(EventHandle, const WaitSlice&) override {
    unexpected("synchronize_event_for");
    return true;
  }
  float elapsed_ms(EventHandle, EventHandle) override {
    unexpected("elapsed_ms");
    return 0.0f;
  }
  std::string event_ipc_handle(EventHandle) override {
    unexpected("event_ipc_handle");
    return std::string();
  }
  EventHandle open_event_ipc_handle(const std::string&) override {
    unexpected("open_event_ipc_handle");
    return nullptr;
  }

 private:
  static void unexpected(const char* call) noexcept { ADD_FAILURE() << "unexpected call to " << call; }

  std::uintptr_t next_handle_ = 0x1000;
};

}  // namespace cuweave::testing
