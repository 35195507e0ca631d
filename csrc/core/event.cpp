#include "cuweave/event.hpp"

#include "cuweave/collective_failures.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event_pool.hpp"
#include "cuweave/interruptible_wait.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"

namespace cuweave {

namespace {
unsigned backend_flags(const EventOptions& options) {
  unsigned flags = kEventDefault;
  if (options.timing) flags |= kEventTiming;
  if (options.blocking) flags |= kEventBlockingSync;
  if (options.interprocess) flags |= kEventInterprocess;
  return flags;
}
}  // namespace

void EventOptions::validate() const {
  CUWEAVE_EXPECTS(!(interprocess && timing),
                  "an interprocess Event cannot have timing; pass cuweave.Event(interprocess=True, timing=False)");
}

Event::Event(int device, EventOptions options) : handle_(nullptr), device_(device), options_(options) {
  options.validate();
  handle_ = backend().streams().create_event(device, backend_flags(options));
}

Event::Event(EventHandle handle, int device, EventOptions options)
    : handle_(handle), device_(device), options_(options), recorded_(true) {}

std::shared_ptr<Event> Event::from_ipc_handle(const std::string& handle, int device) {
  EventOptions options;
  options.interprocess = true;
  return std::shared_ptr<Event>(new Event(backend().streams().open_event_ipc_handle(handle), device, options));
}

std::shared_ptr<Event> Event::pooled(int device) {
  std::shared_ptr<Event> event(new Event(services().events().acquire(device), device, EventOptions{}));
  event->recorded_ = false;
  event->pooled_ = true;
  return event;
}

Event::~Event() { close(); }

void Event::close() noexcept {
  if (!handle_) return;
  if (sanitizer::ever_enabled()) sanitizer::event_destroyed(handle_);
  if (pooled_) {
    services().events().release(device_, handle_);
  } else {
    backend().streams().destroy_event(handle_);
  }
  handle_ = nullptr;
}

EventHandle Event::handle() const {
  if (!handle_) throw InvalidArgument("this Event is closed; create a new cuweave.Event()");
  return handle_;
}

void Event::record(Stream& stream) {
  if (stream.device() != device_) {
    throw InvalidArgument("this Event belongs to device " + std::to_string(device_) + " but the stream is on device " +
                          std::to_string(stream.device()) + ": CUDA records an event only on a stream of its own "
                          "device; use cuweave.Event(device=" + std::to_string(stream.device()) +
                          ") or stream.record(), which makes one there");
  }
  stream.record(handle());
  recorded_ = true;
  recorded_on_ = &stream;
  collectives_before_ = collective_failures::numbered();
}

bool Event::complete() {
  const bool done = backend().streams().event_complete(handle());
  // A query that found the work done orders the host after it, as a synchronize does.
  if (done && sanitizer::enabled()) sanitizer::host_synchronized_event(handle_);
  if (done && recorded_on_ && collective_failures::any()) {
    collective_failures::report_recorded(recorded_on_, collectives_before_);
  }
  return done;
}

void Event::synchronize() {
  const EventHandle event = handle();
  wait_interruptibly([&](const WaitSlice& slice) { return backend().streams().synchronize_event_for(event, slice); });
  if (sanitizer::enabled()) sanitizer::host_synchronized_event(event);
  if (recorded_on_ && collective_failures::any()) {
    collective_failures::report_recorded(recorded_on_, collectives_before_);
  }
}

float Event::elapsed_ms(const Event& end) const {
  CUWEAVE_EXPECTS(options_.timing && end.options_.timing,
                  "elapsed time needs two events created with timing; pass cuweave.Event(timing=True)");
  CUWEAVE_EXPECTS(recorded_ && end.recorded_, "elapsed time needs both events recorded on a stream first");
  return backend().streams().elapsed_ms(handle(), end.handle());
}

std::string Event::ipc_handle() const {
  CUWEAVE_EXPECTS(options_.interprocess,
                  "this Event is not shareable; create it with cuweave.Event(interprocess=True)");
  return backend().streams().event_ipc_handle(handle());
}

}  // namespace cuweave
