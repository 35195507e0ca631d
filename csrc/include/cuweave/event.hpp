// Event: the owner of a backend event, created with explicit options.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cuweave/backend.hpp"

namespace cuweave {

class Stream;

struct EventOptions {
  bool timing = false;
  bool blocking = false;       // a waiting host thread sleeps instead of spinning
  bool interprocess = false;   // shareable with other processes; requires timing = false

  // Throws InvalidArgument for combinations CUDA refuses (checked before any device is touched).
  void validate() const;
};

class Event {
 public:
  Event(int device, EventOptions options);
  static std::shared_ptr<Event> from_ipc_handle(const std::string& handle, int device);
  // A timing-free event taken from the EventPool and given back there when closed, for the completions cuweave
  // records for its callers (a copy's Transfer.event, stream.record() without an event, to_numpy's wait): a
  // record then costs a record, not also an event's creation and destruction.
  static std::shared_ptr<Event> pooled(int device);
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  EventHandle handle() const;
  int device() const noexcept { return device_; }
  const EventOptions& options() const noexcept { return options_; }
  bool recorded() const noexcept { return recorded_; }
  bool closed() const noexcept { return handle_ == nullptr; }
  void close() noexcept;

  // Captures the work queued on `stream` so far; complete() turns true once it has run.
  void record(Stream& stream);
  // complete() and synchronize() throw the failure of a collective queued before the record on that stream
  // (Note [Collective failures reach the waits]).
  bool complete();
  // Blocks until the recorded work completes. Callers release the GIL.
  void synchronize();
  // Milliseconds from this event to `end`; both need timing = true and to have been recorded.
  float elapsed_ms(const Event& end) const;
  std::string ipc_handle() const;

 private:
  Event(EventHandle handle, int device, EventOptions options);

  EventHandle handle_;
  int device_;
  EventOptions options_;
  bool recorded_ = false;
  bool pooled_ = false;  // closing gives the handle back to the EventPool
  // The last record's stream (compared, never used) and the collectives numbered before it (Note [Collective
  // failures reach the waits]).
  const Stream* recorded_on_ = nullptr;
  std::uint64_t collectives_before_ = 0;
};

}  // namespace cuweave
