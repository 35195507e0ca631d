#include "cuweave/stream.hpp"

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>

#include "cuweave/capture.hpp"
#include "cuweave/collective_failures.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event_pool.hpp"
#include "cuweave/host_callbacks.hpp"
#include "cuweave/interruptible_wait.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/services.hpp"
#include "cuweave/submission.hpp"
#include "cuweave/trace.hpp"

namespace cuweave {

namespace {
// Every Stream object alive, so that traces can name the lanes of streams by what cuweave knows of them.
struct LiveStreams {
  std::mutex mutex;
  std::unordered_set<Stream*> streams;  // LOCK: mutex
};

LiveStreams& live_streams() {
  static auto* instance = new LiveStreams;  // leaked: streams may outlive static destruction
  return *instance;
}
}  // namespace

Stream::Stream(StreamHandle handle, int device, int priority, bool blocking, Origin origin, std::string name)
    : handle_(handle), device_(device), priority_(priority), blocking_(blocking), default_(origin.default_stream),
      adopted_(origin.adopted), lent_by_pool_(origin.lent_by_pool), name_(std::move(name)) {
  LiveStreams& live = live_streams();
  std::lock_guard<std::mutex> lock(live.mutex);
  live.streams.insert(this);
}

Stream::~Stream() {
  retire();
  if (closing_event_) {
    if (sanitizer::ever_enabled()) sanitizer::event_destroyed(closing_event_);
    backend().streams().destroy_event(closing_event_);
  }
}

void Stream::retire() noexcept {
  if (std::exchange(retired_, true)) return;
  // A closed stream ended its part as it closed; its handle may be another stream's by now, whose record the
  // sanitizer must keep: only what is keyed by this object goes.
  if (sanitizer::ever_enabled()) {
    if (closed()) {
      sanitizer::closed_stream_gone(*this);
    } else {
      sanitizer::stream_destroyed(*this);
    }
  }
  {
    LiveStreams& live = live_streams();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.streams.erase(this);
  }
  if (trace::active() && !closed()) label_in_open_traces();
}

void Stream::label_in_open_traces() const noexcept {
  try {
    const Description d = describe();
    trace::label_stream(trace::StreamLabel{backend().tracer().stream_id(d.handle, d.device), d.device, d.origin,
                                           d.priority, d.blocking, d.name});
  } catch (...) {
    // Unnamed, its lane still shows its id.
  }
}

void Stream::for_each_live(const std::function<void(Stream&)>& visit) {
  LiveStreams& live = live_streams();
  std::lock_guard<std::mutex> lock(live.mutex);
  for (Stream* stream : live.streams) visit(*stream);
}

const char* Stream::origin() const noexcept {
  if (adopted_) return "external";
  switch (default_) {
    case Default::Legacy: return "legacy_default";
    case Default::PerThread: return "per_thread_default";
    case Default::None: break;
  }
  return lent_by_pool_ ? "pooled" : "owned";
}

void Stream::record_closing_event() noexcept {
  try {
    closing_event_ = backend().streams().create_event(device_, kEventDefault);
    {
      trace::Unobserved bookkeeping;
      backend().streams().record_event(closing_event_, handle_);
    }
    // What waits for the closed stream waits for this event (Stream::wait): the sanitizer orders it so too.
    if (sanitizer::enabled()) sanitizer::event_recorded(closing_event_, *this);
  } catch (...) {
    if (closing_event_) backend().streams().destroy_event(std::exchange(closing_event_, nullptr));
  }
}

Stream::Description Stream::describe() const {
  return Description{handle_, device_, origin(), priority_, blocking_, name_};
}

std::vector<Stream::Description> Stream::live() {
  LiveStreams& live = live_streams();
  std::lock_guard<std::mutex> lock(live.mutex);
  std::vector<Description> descriptions;
  descriptions.reserve(live.streams.size());
  for (const Stream* stream : live.streams) {
    if (!stream->closed()) descriptions.push_back(stream->describe());
  }
  return descriptions;
}

void Stream::throw_closed() const {
  throw InvalidArgument("this Stream is closed; create a new cuweave.Stream()");
}

void Stream::close() {
  throw InvalidArgument(std::string("cannot close a ") + origin() +
                        " stream: only streams created by cuweave.Stream() are closed by their user");
}

void Stream::synchronize() {
  Capture::refuse_wait(*this, "cudaStreamSynchronize", "stream.synchronize()");
  if (HostCallbacks::running_ordered() && HostCallbacks::running_stream() == this) {
    throw InvalidArgument(
        "a stream-ordered host callback cannot synchronize its own stream: the stream waits for the callback to "
        "return (launch it with ordered=False to let it wait)");
  }
  const StreamHandle stream = handle();
  HostCallbacks& callbacks = services().host_callbacks();
  const std::uint64_t launched = callbacks.launched_on(*this);
  const std::uint64_t collectives = collective_failures::numbered();
  on_device_of(*this, [&] {
    wait_interruptibly(
        [&](const WaitSlice& slice) { return backend().streams().synchronize_stream_for(stream, slice); });
    wait_interruptibly([&](const WaitSlice& slice) { return callbacks.wait_for(*this, launched, slice.until); });
  });
  if (sanitizer::enabled()) sanitizer::host_synchronized_stream(*this);
  services().lifetimes().collect();
  if (collective_failures::any()) collective_failures::report(*this, collectives);
}

bool Stream::closed_work_complete() {
  return !closing_event_ || backend().streams().event_complete(closing_event_);
}

bool Stream::idle() {
  Capture::refuse_wait(*this, "cudaStreamQuery", "asking whether the stream is idle");
  const std::uint64_t collectives = collective_failures::numbered();
  const bool done = on_device_of(*this, [&] { return backend().streams().stream_idle(handle()); });
  if (done && collective_failures::any()) collective_failures::report(*this, collectives);
  return done;
}

void Stream::record(EventHandle event) {
  // Note [The device follows the stream]: CUDA records on the stream's device whichever is current.
  ordering_on_device_of(*this, [&] { backend().streams().record_event(event, handle()); });
  if (sanitizer::enabled()) sanitizer::event_recorded(event, *this);
}

void Stream::record_unobserved(EventHandle event) {
  trace::Unobserved bookkeeping;
  on_device_of(*this, [&] { backend().streams().record_event(event, handle()); });
}

namespace {
// An event of `pool`'s, recorded by `record`; given back when the record throws.
template <typename Record>
EventHandle record_taken(EventPool& pool, int device, Record&& record) {
  EventHandle event = pool.acquire(device);
  try {
    record(event);
  } catch (...) {
    pool.release(device, event);
    throw;
  }
  return event;
}
}  // namespace

EventHandle Stream::record_pooled(EventPool& pool) {
  return record_taken(pool, device(), [this](EventHandle event) { record(event); });
}

EventHandle Stream::record_pooled_unobserved(EventPool& pool) {
  return record_taken(pool, device(), [this](EventHandle event) { record_unobserved(event); });
}

void Stream::wait(EventHandle event) {
  ordering_on_device_of(*this, [&] { backend().streams().stream_wait_event(handle(), event); });
  if (sanitizer::enabled()) sanitizer::stream_waited_event(*this, event);
}

std::size_t Stream::wait_for(const std::vector<std::shared_ptr<Stream>>& writers) {
  std::size_t waits = 0;
  for (const std::shared_ptr<Stream>& writer : writers) {
    if (writer->closed()) {
      // Its handle is gone (perhaps this stream's by now): the event it recorded as it closed stands for its work.
      if (EventHandle closing = writer->closing_event()) {
        wait(closing);
        ++waits;
      }
    } else if (!writer->same_queue(*this)) {
      wait(*writer);
      ++waits;
    }
  }
  return waits;
}

void Stream::wait(Stream& other) {
  if (&other == this) return;  // a stream is always ordered after its own work
  EventPool& pool = services().events();
  EventHandle event = pool.acquire(other.device());
  try {
    ordering_on_device_of(other, [&] { backend().streams().record_event(event, other.handle()); });
    ordering_on_device_of(*this, [&] { backend().streams().stream_wait_event(handle(), event); });
  } catch (...) {
    pool.release(other.device(), event);
    throw;
  }
  pool.release(other.device(), event);
  if (sanitizer::enabled()) sanitizer::stream_waited_stream(*this, other);
}

void Stream::hold(Holds holds) {
  if (!holds.empty()) services().lifetimes().hold_until_complete(*this, std::move(holds));
}

void Stream::copy_async(Operation& operation, void* destination, const void* source, std::size_t bytes, CopyBy by) {
  if (bytes == 0) return;
  queue(operation, *this, [&](StreamHandle stream) {
    // Note [Copies by kernel]
    if (by == CopyBy::CopyEngine || !backend().memory().copy_by_kernel(destination, source, bytes, device(), stream)) {
      backend().memory().copy_async(destination, source, bytes, stream);
    }
  });
}

void Stream::copy_between_devices(Operation& operation, void* destination, int destination_device,
                                  const void* source, int source_device, std::size_t bytes) {
  if (bytes == 0) return;
  queue(operation, *this, [&](StreamHandle stream) {
    backend().memory().copy_between_devices(destination, destination_device, source, source_device, bytes, stream);
  });
}

void Stream::memset_async(Operation& operation, void* destination, int value, std::size_t bytes) {
  if (bytes == 0) return;
  queue(operation, *this,
        [&](StreamHandle stream) { backend().memory().memset_async(destination, value, bytes, stream); });
}

void Stream::fill_async(Operation& operation, void* destination, std::size_t count, const void* pattern,
                        std::size_t pattern_bytes) {
  if (count == 0) return;
  queue(operation, *this,
        [&](StreamHandle stream) { backend().kernels().fill(destination, count, pattern, pattern_bytes, stream); });
}

void Stream::copy_strided_async(Operation& operation, const StridedCopy& copy) {
  if (copy.count() == 0) return;
  queue(operation, *this, [&](StreamHandle stream) { backend().kernels().copy_strided(copy, stream); });
}

void Stream::arithmetic_async(Operation& operation, const Arithmetic& arithmetic) {
  if (arithmetic.count == 0) return;
  queue(operation, *this, [&](StreamHandle stream) { backend().kernels().arithmetic(arithmetic, stream); });
}

void Stream::sum_async(Operation& operation, void* out, const void* x, std::size_t count, NumericType type,
                       void* scratch) {
  queue(operation, *this, [&](StreamHandle stream) { backend().kernels().sum(out, x, count, type, scratch, stream); });
}

void Stream::set_condition_async(Operation& operation, ConditionHandle condition, const ConditionRule& rule) {
  queue(operation, *this, [&](StreamHandle stream) { backend().capture().set_condition(condition, rule, stream); });
}

void Stream::spin_async(Operation& operation, std::uint64_t nanoseconds, unsigned blocks, std::uint64_t* start_time) {
  CUWEAVE_EXPECTS(blocks > 0, "spin needs at least one block");
  queue(operation, *this,
        [&](StreamHandle stream) { backend().kernels().spin(nanoseconds, blocks, start_time, stream); });
}

void Stream::store_callback_error(Hold error) {
  std::lock_guard<std::mutex> lock(callback_error_mutex_);
  // Keep the first; a later one is dropped here, and dropping an unreported error reports it
  // (the binding layer's Hold does that), so none is lost.
  if (!callback_error_) callback_error_ = std::move(error);
}

Hold Stream::take_callback_error() {
  std::lock_guard<std::mutex> lock(callback_error_mutex_);
  return std::exchange(callback_error_, nullptr);
}

}  // namespace cuweave
