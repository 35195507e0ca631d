#include "cuweave/submission.hpp"

#include "cuweave/backend.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/weave.hpp"

namespace cuweave {

namespace {
void* address(std::uintptr_t begin) { return reinterpret_cast<void*>(begin); }

// Where an operation's data lives (Note [Weaving]: several devices): what it writes, else what it reads; -1
// when it touches no device array.
int data_device(const Operation& operation) {
  int read = -1;
  for (const ArrayUse& use : operation.arrays()) {
    if (use.kind != sanitizer::AccessKind::Read) return use.array->device();
    if (read < 0) read = use.array->device();
  }
  return read;
}

// The weave's placement of `operation`, an operation of `device`.
std::shared_ptr<Stream> place_in(Weave& weave, Operation& operation, std::shared_ptr<Stream> given, int device) {
  return weave.place(operation.placement_accesses(), std::move(given), device, &operation);
}

// A copy of `source` on `device`, made by an operation the weave places (Note [Weaving]: several devices).
std::shared_ptr<DeviceArray> copy_for_device(Weave& weave, const std::shared_ptr<DeviceArray>& source, int device) {
  Operation copy("copy");
  copy.reads(source);
  const std::shared_ptr<Stream> stream = place_in(weave, copy, nullptr, device);
  std::shared_ptr<DeviceArray> made = DeviceArray::allocate(source->shape(), source->dtype(), stream);
  copy.writes(made);
  backend().memory().enable_peer_access(device, source->device());  // directly where the devices reach each other
  stream->copy_between_devices(copy, made->data(), device, source->data(), source->device(), source->nbytes());
  weave.keep_copy(source, made);
  return made;
}
}  // namespace

std::shared_ptr<Stream> place(Operation& operation, std::shared_ptr<Stream> given) {
  if (Weave* weave = Weave::active()) return place_in(*weave, operation, std::move(given), data_device(operation));
  return given ? std::move(given) : current_stream::get();
}

std::shared_ptr<Stream> place_on(Operation& operation, std::shared_ptr<Stream> given, int device) {
  if (Weave* weave = Weave::active()) return place_in(*weave, operation, std::move(given), device);
  return given ? std::move(given) : current_stream::get();
}

std::shared_ptr<Stream> place_reading_copies(Operation& operation, std::shared_ptr<Stream> given) {
  Weave* weave = Weave::active();
  if (!weave) return place(operation, std::move(given));
  const int device = data_device(operation);
  bool chooses = false;  // asked once, at the first read of another device's array: the usual operation has none
  for (std::size_t i = 0; i < operation.arrays().size() && !given; ++i) {
    const ArrayUse& use = operation.arrays()[i];
    if (use.kind != sanitizer::AccessKind::Read || use.array->device() == device || !use.array->contiguous() ||
        use.part_end != 0 || use.array->size() == 0) {
      continue;
    }
    if (!chooses && !(chooses = weave->chooses_streams())) break;
    std::shared_ptr<DeviceArray> copy = weave->copy_on(*use.array, device);
    operation.stand_in(i, copy ? std::move(copy) : copy_for_device(*weave, use.array, device));
  }
  return place_in(*weave, operation, std::move(given), device);
}

namespace submission_detail {

void check(Operation& operation, Stream& stream) {
  sanitizer::operation(stream, operation.name(), operation.accesses());
  // Note [Host writes under a copy]: before the write is queued, the copies reading those host bytes before
  // it are checked while it cannot have written them yet.
  for (const sanitizer::Access& access : operation.bytes()) {
    if (access.kind != sanitizer::AccessKind::Read && backend().memory().is_pinned(address(access.begin))) {
      sanitizer::copy_writes_host(stream, address(access.begin), access.end - access.begin);
    }
  }
}

void checked_call_queued(Operation& operation, Stream& stream) {
  // After the call: the sanitizer reading the host bytes (a checksum) overlaps the work reading them instead
  // of delaying it; this thread writes nothing there meanwhile.
  for (const sanitizer::Access& access : operation.bytes()) {
    if (access.kind == sanitizer::AccessKind::Read && backend().memory().is_pinned(address(access.begin))) {
      sanitizer::copy_reads_host(stream, address(access.begin), access.end - access.begin);
    }
  }
}

void follow(Operation& operation, const std::shared_ptr<Stream>& stream) {
  if (DeviceArray::graph_memory_allocated()) {
    for (const ArrayUse& use : operation.arrays()) use.array->check_graph_memory_made(*stream);
  }
  Holds& kept = operation.kept();
  for (const ArrayUse& use : operation.arrays()) {
    DeviceArray& array = *use.array;
    if (array.device() != stream->device()) {
      // A peer's array (Note [Copies between devices], Note [Kernels on a peer's arrays]): held, its free
      // staying in its own device's order.
      kept.push_back(array.memory_hold());
      continue;
    }
    for (Hold& hold : array.uses_on(stream)) kept.push_back(std::move(hold));
  }
}

void CapturedCall::begin() noexcept {
  try {
    capture_ = Capture::of(stream_);
  } catch (...) {
    return;  // Capture::of asks the backend; a stream it cannot describe takes part in no capture of cuweave's
  }
  if (capture_) capture_->calling(stream_);
}

void mark_written(const Operation& operation, const std::shared_ptr<Stream>& stream) {
  for (const ArrayUse& use : operation.arrays()) {
    if (use.kind != sanitizer::AccessKind::Read) use.array->written_on(stream, use.part_begin, use.part_end);
  }
}

void hold_after_failed_call(Operation& operation, Stream& stream) noexcept {
  try {
    stream.hold(std::move(operation.kept()));
  } catch (...) {
    // No event could be recorded: the tracker keeps the Holds for good; the call's own error is the one to report.
  }
}

void keep(Operation& operation, Stream& stream, const std::shared_ptr<Stream>& shared) {
  // `shared` is null exactly when the operation has no arrays.
  mark_written(operation, shared);
  for (const ArrayUse& use : operation.arrays()) {
    if (use.array->device() != stream.device()) use.array->held_by_peer_work(stream);
  }
  stream.hold(std::move(operation.kept()));
}

}  // namespace submission_detail

}  // namespace cuweave
