#include "cuweave/device_array.hpp"

#include <atomic>
#include <limits>
#include <mutex>
#include <string>

#include "cuweave/array_writers.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"
#include "cuweave/weave.hpp"

namespace cuweave {

DType DType::from_typestr(const std::string& typestr) {
  if (typestr.size() < 3) throw WrongType("unsupported dtype '" + typestr + "'");
  const char order = typestr[0];
  const char kind = typestr[1];
  const std::size_t itemsize = std::stoul(typestr.substr(2));
  const bool known_kind = kind == 'b' || kind == 'i' || kind == 'u' || kind == 'f' || kind == 'c';
  const bool known_size = itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8 || itemsize == 16;
  if (!known_kind || !known_size || order == '>') {
    throw WrongType("unsupported dtype '" + typestr +
                    "': cuweave arrays hold little-endian bool, integer, float or complex numbers");
  }
  return DType{kind, itemsize, typestr};
}

std::size_t DeviceArray::element_count(const std::vector<std::int64_t>& shape) {
  std::size_t count = 1;
  for (std::int64_t extent : shape) {
    CUWEAVE_EXPECTS(extent >= 0, "array dimensions must not be negative (got " + std::to_string(extent) + ")");
    const auto n = static_cast<std::size_t>(extent);
    CUWEAVE_EXPECTS(n == 0 || count <= std::numeric_limits<std::size_t>::max() / n, "array size overflows");
    count *= n;
  }
  return count;
}

std::vector<std::int64_t> DeviceArray::contiguous_strides(const std::vector<std::int64_t>& shape,
                                                         std::size_t itemsize) {
  std::vector<std::int64_t> strides(shape.size());
  std::int64_t stride = static_cast<std::int64_t>(itemsize);
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

namespace {
bool is_contiguous(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides,
                   std::size_t itemsize, std::size_t size) {
  if (size <= 1) return true;
  const auto expected = DeviceArray::contiguous_strides(shape, itemsize);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1 && strides[i] != expected[i]) return false;
  }
  return true;
}
}  // namespace

// Device memory allocated by cuweave; freed in the order of its free stream (Note [Memory follows its
// stream]).
struct DeviceAllocation : std::enable_shared_from_this<DeviceAllocation> {
  DeviceAllocation(void* data, std::size_t bytes, std::shared_ptr<Stream> stream) noexcept
      : data(data), bytes(bytes), follows(stream.get()), stream(std::move(stream)) {}
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;
  ~DeviceAllocation() {
    if (graph_made) {
      if (std::shared_ptr<Capture> capture = graph_capture.lock()) {
        if (capture->free_at_end(data)) return;  // a temporary: a free node as the capture ends (Note [Graph memory])
      }
      if (!graph_made->load(std::memory_order_acquire)) return;  // its graph never replayed: nothing to free
    }
    if (stream->closed()) {
      free_after_closing(data, bytes, stream);
      return;
    }
    const Capture::BeginFence fence;  // Note [Deciding beside a beginning capture]
    if (fence.any_active()) {
      if (stream->is_legacy_default()) {
        // Beside a blocking capturing stream, a free on the legacy stream would invalidate the capture.
        Capture::when_none_active([data = data, bytes = bytes, stream = stream] { free_on(data, bytes, *stream); });
        return;
      }
      if (std::shared_ptr<Capture> capture = Capture::of(*stream)) {
        // A free queued now would be captured: free after the capture (Note [Capture and lifetimes]).
        capture->defer([data = data, bytes = bytes, stream = stream] { free_on(data, bytes, *stream); });
        return;
      }
    }
    free_on(data, bytes, *stream);
  }
  // Note [Freeing memory whose stream was closed]
  // Work queued on the free stream uses its memory without holding it: the free is queued behind that work
  // (Note [Memory follows its stream]). A closed stream's handle is gone, so the free goes to the legacy
  // default stream instead, which waits for blocking streams only, and cuweave's streams are non-blocking:
  // queued there at once, the free could run while the closed stream's work still used the memory (the pool
  // then hands it out again or unmaps it under a kernel or a copy engine). So it waits for the event recorded
  // as the stream closed (the tracker polls it; at once when the stream had finished), and like any free on
  // the legacy stream it is queued when no capture is active.
  static void free_after_closing(void* data, std::size_t bytes, const std::shared_ptr<Stream>& stream) noexcept {
    const FreeOnLegacy free{bytes, stream};
    const EventHandle closing = stream->closing_event();
    if (!closing) {  // its recording failed as it closed: nothing to wait for
      free(data);
      return;
    }
    try {
      // From here the Hold frees the memory, once its last owner lets go (also if this throws).
      Hold free_later(static_cast<const void*>(data), free);
      services().lifetimes().hold_until_event(closing, stream->device(), {free_later, stream});
    } catch (...) {
      // The entry, or the Hold as it went, frees the memory.
    }
  }
  struct FreeOnLegacy {
    std::size_t bytes;
    std::shared_ptr<Stream> stream;  // closed
    void operator()(const void* pointer) const noexcept {
      void* data = const_cast<void*>(pointer);
      try {
        Capture::when_none_active([data, bytes = bytes, stream = stream] { free_on(data, bytes, *stream); });
      } catch (...) {
        free_on(data, bytes, *stream);  // out of memory to wait for the captures: now
      }
    }
  };
  static void free_on(void* data, std::size_t bytes, const Stream& stream) noexcept {
    if (sanitizer::enabled()) sanitizer::freed(data, bytes, stream);
    // A closed stream's handle is gone; the legacy default stream orders the free after blocking work.
    StreamHandle order = stream.closed() ? backend().streams().legacy_default_stream() : stream.raw_handle();
    try {
      on_device_of(stream, [&] { backend().memory().free_device(data, order); });
    } catch (...) {
      // Only switching devices can throw here, with a broken context: the memory goes with it.
    }
  }
  // Makes `next` the free stream; returns the previous one when it changed.
  std::shared_ptr<Stream> free_in_order_of(const std::shared_ptr<Stream>& next) {
    // The usual case, memory used again on the stream its free follows already, takes no lock (every eager
    // kernel launch asks, per array). `follows` cannot name a reused address: `stream` keeps it alive.
    if (follows.load(std::memory_order_acquire) == next.get()) return nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    if (stream == next) return nullptr;
    follows.store(next.get(), std::memory_order_release);
    return std::exchange(stream, next);
  }

  void* data;
  std::size_t bytes;
  // For graph memory (Note [Graph memory] in capture.hpp), null otherwise: set at its graph's first replay.
  std::shared_ptr<std::atomic<bool>> graph_made;
  std::weak_ptr<Capture> graph_capture;  // for graph memory: the capture whose graph allocates it
  std::mutex mutex;
  std::atomic<const Stream*> follows;  // stream.get(), read without the lock
  std::shared_ptr<Stream> stream;  // LOCK: mutex (the destructor runs when no one else can touch it)
};

namespace {
[[noreturn]] void refuse_before_made() {
  throw InvalidArgument(
      "this array is graph memory of a graph captured with graph_memory=True that has not replayed yet: its bytes "
      "exist only from the graph's first replay on; replay the graph before using the array");
}
}  // namespace

std::atomic<bool> DeviceArray::graph_memory_allocated_{false};

void DeviceArray::check_graph_memory_made(const Stream& stream) const {
  if (!allocation_ || !allocation_->graph_made || allocation_->graph_made->load(std::memory_order_acquire)) return;
  if (Capture::any_active() && Capture::of(stream)) return;  // captured: the graph's own use of its memory
  refuse_before_made();
}

Holds DeviceArray::uses_on(const std::shared_ptr<Stream>& stream) {
  if (!allocation_) return {memory_};
  // Captured work must not move the free stream onto a capturing stream: the graph holds the memory (graph
  // memory is the graph's own: Note [Graph memory]).
  if (Capture::any_active() && Capture::of(*stream)) return allocation_->graph_made ? Holds{} : Holds{allocation_};
  std::shared_ptr<Stream> previous = allocation_->free_in_order_of(stream);
  if (!previous) return {};
  // The free now follows `stream`, and the lifetime tracker keeps it after `previous`'s work so far.
  if (sanitizer::enabled()) sanitizer::free_follows(allocation_->data, *previous);
  if (previous->closed()) {
    // A destroyed stream's queued work still runs, but no event can be recorded on it any more: its work
    // is over once the event recorded as it closed is (a wait for the device instead could deadlock with
    // a stream-ordered callback that needs the GIL this thread holds).
    if (EventHandle closing = previous->closing_event()) {
      services().lifetimes().hold_until_event(closing, previous->device(), {allocation_, previous});
    } else {
      backend().devices().synchronize_device(previous->device());
    }
  } else {
    services().lifetimes().hold_until_complete(*previous, {allocation_});
  }
  return {};
}

void DeviceArray::held_by_peer_work(Stream& stream) {
  if (allocation_ && sanitizer::enabled()) sanitizer::free_follows(allocation_->data, stream);
}

std::shared_ptr<DeviceArray> DeviceArray::allocate(std::vector<std::int64_t> shape, DType dtype,
                                                   std::shared_ptr<Stream> stream) {
  std::shared_ptr<DeviceArray> array(new DeviceArray);
  array->size_ = element_count(shape);
  array->device_ = stream->device();
  array->strides_ = contiguous_strides(shape, dtype.itemsize);
  array->shape_ = std::move(shape);
  array->dtype_ = std::move(dtype);
  const std::size_t bytes = array->nbytes();
  if (bytes > 0) {
    void* data = nullptr;
    // Note [Graph memory]: not in a conditional body, where CUDA allows no memory nodes.
    std::shared_ptr<Capture> capture = Capture::any_active() ? Capture::of(*stream) : nullptr;
    if (capture && (!capture->graph_memory() || capture->captures_body(*stream))) capture.reset();
    on_device_of(*stream, [&] {
      data = capture ? backend().memory().allocate_in_capture(bytes, array->device_, stream->handle())
                     : backend().memory().allocate_device(bytes, array->device_, stream->handle());
    });
    if (sanitizer::enabled()) sanitizer::allocated(data, bytes);  // the allocator orders its own reuse
    if (Weave* weave = Weave::active()) weave->allocated(data, bytes, *stream);  // users elsewhere wait for it
    auto allocation = std::make_shared<DeviceAllocation>(data, bytes, stream);
    if (capture) {
      graph_memory_allocated_.store(true, std::memory_order_release);
      allocation->graph_capture = capture;
      allocation->graph_made = capture->graph_memory_made();
      capture->allocated_graph_memory(allocation);
    }
    array->data_ = data;
    array->memory_ = allocation;
    array->allocation_ = std::move(allocation);
  }
  array->stream_ = std::move(stream);
  // Contiguous by construction: its bytes are its allocation's (settle_layout() would work that out per array).
  array->contiguous_ = true;
  const auto begin = reinterpret_cast<std::uintptr_t>(array->data_);
  array->span_ = {begin, begin + bytes};
  return array;
}

std::shared_ptr<DeviceArray> DeviceArray::view(void* data, int device, std::vector<std::int64_t> shape,
                                               std::vector<std::int64_t> strides, DType dtype, Hold owner,
                                               std::shared_ptr<Stream> stream, bool readonly) {
  std::shared_ptr<DeviceArray> array(new DeviceArray);
  array->size_ = element_count(shape);
  if (strides.empty()) strides = contiguous_strides(shape, dtype.itemsize);
  CUWEAVE_EXPECTS(strides.size() == shape.size(), "strides and shape differ in length");
  array->data_ = data;
  array->device_ = device;
  array->shape_ = std::move(shape);
  array->strides_ = std::move(strides);
  array->dtype_ = std::move(dtype);
  array->memory_ = std::move(owner);
  array->stream_ = std::move(stream);
  array->readonly_ = readonly;
  array->settle_layout();
  return array;
}

std::shared_ptr<DeviceArray> DeviceArray::view_of(const std::shared_ptr<DeviceArray>& base, const ArrayLayout& layout,
                                                  DType dtype) {
  std::shared_ptr<DeviceArray> array(new DeviceArray);
  array->size_ = element_count(layout.shape);
  CUWEAVE_EXPECTS(layout.strides.size() == layout.shape.size(), "strides and shape differ in length");
  if (array->size_ > 0) {
    const auto [low, high] = byte_extent(layout, dtype.itemsize);
    const auto [base_low, base_high] = base->byte_span();
    const auto data = reinterpret_cast<std::intptr_t>(base->data_);
    CUWEAVE_EXPECTS(base->size_ > 0 && data + low >= static_cast<std::intptr_t>(base_low) &&
                        data + high <= static_cast<std::intptr_t>(base_high),
                    "a view must lie inside the bytes of the array it is taken from");
  }
  array->data_ = static_cast<char*>(base->data_) + layout.offset;
  array->device_ = base->device_;
  array->shape_ = layout.shape;
  array->strides_ = layout.strides;
  array->dtype_ = std::move(dtype);
  array->readonly_ = base->readonly_;
  array->settle_layout();
  array->stream_ = base->stream_;
  array->memory_ = base->memory_;
  array->allocation_ = base->allocation_;
  array->base_ = base->base_ ? base->base_ : base;
  if (!base->writers_) {
    const auto [begin, end] = base->byte_span();
    base->writers_ = std::make_shared<ArrayWriters>(begin, end, base->stream_);
  }
  array->writers_ = base->writers_;
  return array;
}

void DeviceArray::settle_layout() {
  contiguous_ = is_contiguous(shape_, strides_, dtype_.itemsize, size_);
  const auto [low, high] = byte_extent(shape_, strides_, dtype_.itemsize);
  const auto data = reinterpret_cast<std::uintptr_t>(data_);
  span_ = {data + static_cast<std::uintptr_t>(low), data + static_cast<std::uintptr_t>(high)};
}

void DeviceArray::record_writer(const std::shared_ptr<Stream>& stream, std::uintptr_t part_begin,
                                std::uintptr_t part_end) {
  if (part_end != 0) {
    writers_->wrote(part_begin, part_end, stream, /*every_byte=*/true);
  } else {
    const auto [begin, end] = byte_span();
    writers_->wrote(begin, end, stream, /*every_byte=*/contiguous_);
  }
}

std::vector<std::shared_ptr<Stream>> DeviceArray::writers() const {
  if (writers_) {
    const auto [begin, end] = byte_span();
    return writers_->overlapping(begin, end);
  }
  if (stream_) return {stream_};
  return {};
}

}  // namespace cuweave
