#include "cuweave/stream.hpp"

#include <array>
#include <atomic>
#include <map>
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
#include "cuweave/sm_partition.hpp"
#include "cuweave/submission.hpp"
#include "cuweave/trace.hpp"

namespace cuweave {

const char* to_string(Stream::Kind kind) noexcept {
  switch (kind) {
    case Stream::Kind::Owned: return "owned";
    case Stream::Kind::Pooled: return "pooled";
    case Stream::Kind::LegacyDefault: return "legacy_default";
    case Stream::Kind::PerThreadDefault: return "per_thread_default";
    case Stream::Kind::External: return "external";
  }
  return "unknown";
}

namespace {
// Every Stream object alive, so that traces can name the lanes of streams by what cuweave knows of them.
struct LiveStreams {
  std::mutex mutex;
  std::unordered_set<const Stream*> streams;  // LOCK: mutex
};

LiveStreams& live_streams() {
  static auto* instance = new LiveStreams;  // leaked: streams may outlive static destruction
  return *instance;
}

// An open trace keeps the label of a stream that goes away before it closes.
void label_in_open_traces(const Stream& stream) noexcept {
  try {
    const Stream::Description d = stream.describe();
    trace::label_stream(trace::StreamLabel{backend().tracer().stream_id(d.handle, d.device), d.device,
                                           to_string(d.kind), d.priority, d.blocking, d.name});
  } catch (...) {
    // Unnamed, its lane still shows its id.
  }
}
}  // namespace

Stream::Stream(StreamHandle handle, int device, int priority, bool blocking, Kind kind, Hold owner, std::string name)
    : handle_(handle), device_(device), priority_(priority), blocking_(blocking), kind_(kind), name_(std::move(name)),
      external_owner_(std::move(owner)) {
  LiveStreams& live = live_streams();
  std::lock_guard<std::mutex> lock(live.mutex);
  live.streams.insert(this);
}

Stream::~Stream() {
  const bool destroys_handle = (kind_ == Kind::Owned || kind_ == Kind::Pooled) && !closed();
  if (destroys_handle) close_adoptions();
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
  if (trace::active() && !closed()) label_in_open_traces(*this);
  if (destroys_handle) {
    release_partition_after_work();
    backend().streams().destroy_stream(handle_);
  }
  if (closing_event_) {
    if (sanitizer::ever_enabled()) sanitizer::event_destroyed(closing_event_);
    backend().streams().destroy_event(closing_event_);
  }
}

// Note [Adoptions of a handle cuweave destroys]
// An adoption of a stream cuweave made (cuweave.Stream.from_external(int), or the PyTorch and CuPy hooks' adoption
// of a torch.cuda.ExternalStream or a CuPy wrapper over it) is an object of its own that keeps nothing of the
// handle alive. Once cuweave destroys the handle, any use of the adoption (an idle query by the sanitizer, a trace
// asking its lane's id, an event recorded on it) hands CUDA a destroyed handle, which CUDA does not refuse:
// cuptiGetStreamIdEx crashed on one at a trace's end on an H200, and CUDA may give the handle to the next stream
// made. So the adoptions close with the stream: each records its own closing event (work queued through it is
// over when that completes, as for the stream itself), the sanitizer ends its part, and a later use raises.
void Stream::close_adoptions() noexcept {
  LiveStreams& live = live_streams();
  std::lock_guard<std::mutex> lock(live.mutex);  // keeps each adoption from finishing its destructor meanwhile
  for (const Stream* stream : live.streams) {
    if (stream == this || stream->kind_ != Kind::External || stream->handle_ != handle_ || stream->closed()) continue;
    auto* adoption = const_cast<Stream*>(stream);  // NOLINT: the set names streams; this closes one
    adoption->record_closing_event();
    adoption->closed_.store(true);
    if (sanitizer::ever_enabled()) sanitizer::stream_destroyed(*adoption);
  }
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
  return Description{handle_, device_, kind_, priority_, blocking_, name_};
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

namespace {
void check_priority(int device, int priority) {
  const DeviceProperties props = backend().devices().device_properties(device);
  if (priority < props.highest_priority || priority > props.lowest_priority) {
    throw InvalidArgument("stream priority " + std::to_string(priority) + " is outside device " +
                          std::to_string(device) + "'s range " + std::to_string(props.highest_priority) +
                          " (highest) .. " + std::to_string(props.lowest_priority) +
                          " (lowest); pass an int in that range or \"low\", \"normal\" or \"high\"");
  }
}
}  // namespace

std::shared_ptr<Stream> Stream::create(int device, int priority, bool blocking, Kind kind, std::string name) {
  check_priority(device, priority);
  StreamHandle handle = backend().streams().create_stream(device, priority, blocking);
  try {
    return std::shared_ptr<Stream>(new Stream(handle, device, priority, blocking, kind, nullptr, std::move(name)));
  } catch (...) {
    backend().streams().destroy_stream(handle);
    throw;
  }
}

std::shared_ptr<Stream> Stream::create_on(std::shared_ptr<SmPartition> partition, int priority, std::string name) {
  const int device = partition->device();
  check_priority(device, priority);
  StreamHandle handle = backend().partitions().create_stream(partition->handle(), priority);
  // Unnamed, its trace lane and repr still say where its kernels run.
  if (name.empty()) name = "on " + std::to_string(partition->sms()) + " SMs";
  try {
    std::shared_ptr<Stream> stream(new Stream(handle, device, priority, false, Kind::Owned, nullptr, std::move(name)));
    stream->partition_ = std::move(partition);
    return stream;
  } catch (...) {
    backend().streams().destroy_stream(handle);
    throw;
  }
}

void Stream::release_partition_after_work() noexcept {
  if (!partition_) return;
  try {
    services().lifetimes().hold_until_complete(*this, Holds{partition_});
  } catch (...) {
    // No event could be recorded: the context is lost, and no work of the stream will run any more.
  }
}

namespace {
// A device's default stream of `kind`, made at the first call by `make(device)`. Asked by every operation that
// names no stream, so after the first call it is a lock-free read: each is made once and never replaced, and its
// slot in the leaked map keeps its address, which is published per device.
std::shared_ptr<Stream> default_stream_for(int device, Stream::Kind kind, std::shared_ptr<Stream> (*make)(int)) {
  constexpr int kPublishedDevices = 64;
  using Published = std::array<std::atomic<const std::shared_ptr<Stream>*>, kPublishedDevices>;
  static Published legacy{}, per_thread{};
  Published& published = kind == Stream::Kind::LegacyDefault ? legacy : per_thread;
  const bool publishable = device >= 0 && device < kPublishedDevices;
  if (publishable) {
    if (const std::shared_ptr<Stream>* made = published[device].load(std::memory_order_acquire)) return *made;
  }
  // Leaked on purpose: streams referenced from Python may outlive static destruction.
  static auto* mutex = new std::mutex;
  static auto* streams = new std::map<std::pair<int, int>, std::shared_ptr<Stream>>;
  std::lock_guard<std::mutex> lock(*mutex);
  auto& slot = (*streams)[{device, static_cast<int>(kind)}];
  if (!slot) slot = make(device);
  if (publishable) published[device].store(&slot, std::memory_order_release);
  return slot;
}
}  // namespace

std::shared_ptr<Stream> Stream::legacy_default(int device) {
  return default_stream_for(device, Kind::LegacyDefault, [](int d) {
    return std::shared_ptr<Stream>(
        new Stream(backend().streams().legacy_default_stream(), d, 0, true, Kind::LegacyDefault, nullptr));
  });
}

std::shared_ptr<Stream> Stream::per_thread_default(int device) {
  return default_stream_for(device, Kind::PerThreadDefault, [](int d) {
    return std::shared_ptr<Stream>(
        new Stream(backend().streams().per_thread_default_stream(), d, 0, true, Kind::PerThreadDefault, nullptr));
  });
}

std::shared_ptr<Stream> Stream::adopt(StreamHandle handle, Hold owner) {
  StreamInfo info;
  std::shared_ptr<Stream> origin = Capture::any_active() ? Capture::describing_capturing(handle) : nullptr;
  if (origin) {  // PyTorch's operators captured into a cuweave graph on a torch ExternalStream of its stream
    info = StreamInfo{origin->device(), origin->priority(), origin->blocking()};
  } else {
    info = backend().streams().stream_info(handle);
  }
  return std::shared_ptr<Stream>(
      new Stream(handle, info.device, info.priority, info.blocking, Kind::External, std::move(owner)));
}

void Stream::throw_closed() const {
  if (kind_ == Kind::External) {
    throw InvalidArgument(
        "this Stream adopted a stream that cuweave has since closed (its CUDA handle is gone, and may name the next "
        "stream made); adopt the stream you use now");
  }
  throw InvalidArgument("this Stream is closed; create a new cuweave.Stream()");
}

void Stream::close() {
  if (kind_ != Kind::Owned) {
    throw InvalidArgument(std::string("cannot close a ") + to_string(kind_) +
                          " stream: only streams created by cuweave.Stream() are closed by their user");
  }
  static std::mutex closing;  // closing the same stream from two threads: one records and destroys
  std::lock_guard<std::mutex> lock(closing);
  if (closed()) return;
  if (trace::active()) label_in_open_traces(*this);
  record_closing_event();
  close_adoptions();
  release_partition_after_work();
  closed_.store(true);
  // Its handle may be reused by a stream made next: to the sanitizer that is another stream.
  if (sanitizer::ever_enabled()) sanitizer::stream_destroyed(*this);
  backend().streams().destroy_stream(handle_);
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

void Stream::record_unobserved(EventHandle event) {
  trace::Unobserved bookkeeping;
  on_device_of(*this, [&] { backend().streams().record_event(event, handle()); });
}

EventHandle Stream::record_pooled_unobserved(EventPool& pool) {
  EventHandle event = pool.acquire(device());
  try {
    record_unobserved(event);
  } catch (...) {
    pool.release(device(), event);
    throw;
  }
  return event;
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
