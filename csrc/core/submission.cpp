#include "cuweave/submission.hpp"

#include <algorithm>

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
}  // namespace

std::shared_ptr<Stream> place(Operation& operation, std::shared_ptr<Stream> given) {
  if (Weave* weave = Weave::active()) {
    const int device = data_device(operation);
    std::vector<std::shared_ptr<Stream>> writers;
    if (device >= 0 && device != weave->device()) {  // Note [Weaving]: several devices
      for (const ArrayUse& use : operation.arrays()) {
        for (std::shared_ptr<Stream>& writer : use.array->writers()) {
          if (std::find(writers.begin(), writers.end(), writer) == writers.end()) writers.push_back(std::move(writer));
        }
      }
    }
    return weave->place(operation.accesses(), std::move(given), device, writers);
  }
  return given ? std::move(given) : current_stream::get();
}

namespace submission_detail {

void check(Operation& operation, Stream& stream) {
  sanitizer::operation(stream, std::string(operation.name()), operation.accesses());
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

void keep(Operation& operation, Stream& stream, const std::shared_ptr<Stream>& shared) {
  // `shared` is null exactly when the operation has no arrays.
  for (const ArrayUse& use : operation.arrays()) {
    if (use.kind != sanitizer::AccessKind::Read) use.array->written_on(shared, use.part_begin, use.part_end);
    if (use.array->device() != stream.device()) use.array->held_by_peer_work(stream);
  }
  stream.hold(std::move(operation.kept()));
}

}  // namespace submission_detail

}  // namespace cuweave
