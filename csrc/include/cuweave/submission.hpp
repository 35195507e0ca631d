// The one path every stream-ordered operation takes (Note [One operation, one path] in operation.hpp).
#pragma once

#include <memory>
#include <utility>

#include "cuweave/capture.hpp"
#include "cuweave/operation.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/stream_device_scope.hpp"

namespace cuweave {

// Placement: the stream `operation` runs on. Inside cuweave.weave(), the weave's choice after queuing the
// waits its accesses need (`given`, when not null, is a stream the caller named: a strand the weave tracks but
// never chooses); else `given`, else this thread's current stream.
std::shared_ptr<Stream> place(Operation& operation, std::shared_ptr<Stream> given);
// As place(), for an operation that runs on `device` whatever device its arrays live on (a compiled kernel is
// loaded on one device and reaches other devices' arrays through peer access): inside a weave, a strand of
// `device`.
std::shared_ptr<Stream> place_on(Operation& operation, std::shared_ptr<Stream> given, int device);
// As place(); inside a weave that chooses the stream (no capture), the operation's reads of whole contiguous
// arrays of another device than its own become reads of copies on its device (Note [Weaving]: several devices).
// The caller takes its pointers from operation.standing_for() afterwards.
std::shared_ptr<Stream> place_reading_copies(Operation& operation, std::shared_ptr<Stream> given);

namespace submission_detail {
void follow(Operation& operation, const std::shared_ptr<Stream>& stream);
void check(Operation& operation, Stream& stream);
void checked_call_queued(Operation& operation, Stream& stream);
void keep(Operation& operation, Stream& stream, const std::shared_ptr<Stream>& shared);
// A call of several steps may fail at a later one with the earlier ones queued: what `operation` keeps stays alive
// until `stream`'s work completes (for good if the context is lost). Never throws.
void hold_after_failed_call(Operation& operation, Stream& stream) noexcept;
// The arrays `operation` writes take `stream` as their writer: readers of their memory, through any view, wait for it.
void mark_written(const Operation& operation, const std::shared_ptr<Stream>& stream);

// One of cuweave's calls on `stream`: inside one of cuweave's captures, the capture counts the nodes of its graph
// around it, and learns what it touched (Note [Footprints of captures] in capture.hpp). One atomic load outside.
class CapturedCall {
 public:
  explicit CapturedCall(const Stream& stream) : stream_(stream) {
    if (Capture::any_active()) begin();
  }
  CapturedCall(const CapturedCall&) = delete;
  CapturedCall& operator=(const CapturedCall&) = delete;
  ~CapturedCall() {
    if (capture_) capture_->called(stream_);
  }
  // `operation` was queued by this call (its accesses are worked out only inside a capture).
  void queued(Operation& operation) const {
    if (capture_) capture_->touched(operation.accesses());
  }

 private:
  void begin() noexcept;
  const Stream& stream_;
  std::shared_ptr<Capture> capture_;
};
}  // namespace submission_detail

// The path's device scope alone (Note [The device follows the stream]), for a call bound to `stream` that is no
// operation the sanitizer checks: a synchronize or a query, a capture's steps, an allocation or a free, a wait on a
// host flag, a graph's upload or replay. `stream`'s device is current while `call()` runs. Returns what it returns.
template <typename Call>
decltype(auto) on_device_of(const Stream& stream, Call&& call) {
  const StreamDeviceScope on_device(stream);
  const submission_detail::CapturedCall captured(stream);
  return std::forward<Call>(call)();
}

// As on_device_of(), for an event's record or a stream's wait: CUDA takes their device from the stream, so only a
// default stream's handle, which means the current device's default stream, needs its device current (the hot
// paths pay nothing more on a stream of their own).
template <typename Call>
decltype(auto) ordering_on_device_of(const Stream& stream, Call&& call) {
  const StreamDeviceScope on_device(stream, StreamDeviceScope::Needs::DefaultStreamHandle);
  return std::forward<Call>(call)();
}

namespace submission_detail {
// queue()'s steps; `owner`: `stream`'s owner where the caller holds it (a placement's result), else null.
template <typename Call>
void queue_owned(Operation& operation, Stream& stream, const std::shared_ptr<Stream>* owner, Call&& call) {
  // The arrays' memory follows the stream before the check: the sanitizer records even an operation it then
  // refuses (Mode::Raise), and a later free must still follow that record.
  // The stream's owner is needed only for an operation with arrays, and looked up only where the caller has none.
  std::shared_ptr<Stream> looked_up;
  const std::shared_ptr<Stream>* shared = &looked_up;  // null for an operation without arrays
  if (!operation.arrays().empty()) {
    if (owner != nullptr) {
      shared = owner;
    } else {
      looked_up = stream.shared_from_this();
    }
    follow(operation, *shared);
  }
  {
    const StreamDeviceScope on_device(stream);
    const CapturedCall captured(stream);
    const bool sanitized = sanitizer::enabled();
    if (sanitized) check(operation, stream);
    try {
      call(stream.handle());
    } catch (...) {
      hold_after_failed_call(operation, stream);
      throw;
    }
    if (sanitized) checked_call_queued(operation, stream);
    captured.queued(operation);
  }
  if (!operation.arrays().empty() || !operation.kept().empty()) keep(operation, stream, *shared);
}
}  // namespace submission_detail

// The steps after placement, on `stream` (placed, or a stream the core orders its own work on): the device
// scope, the sanitizer's check, `call(handle)` (the backend call), what a capture's footprint gains (Note
// [Footprints of captures]), lifetimes. Throws what the check or the call throws, with nothing queued, nothing
// kept, and no array's producing stream changed.
template <typename Call>
void queue(Operation& operation, Stream& stream, Call&& call) {
  submission_detail::queue_owned(operation, stream, nullptr, std::forward<Call>(call));
}

// As queue(), on a stream whose owner the caller holds (a placement's result): not looked up again.
template <typename Call>
void queue(Operation& operation, const std::shared_ptr<Stream>& stream, Call&& call) {
  submission_detail::queue_owned(operation, *stream, &stream, std::forward<Call>(call));
}

// Every step: placement, then queue(). Returns the stream the operation went to.
template <typename Call>
std::shared_ptr<Stream> submit(Operation& operation, std::shared_ptr<Stream> given, Call&& call) {
  std::shared_ptr<Stream> stream = place(operation, std::move(given));
  queue(operation, stream, std::forward<Call>(call));
  return stream;
}

}  // namespace cuweave
