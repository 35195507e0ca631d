#include "cuweave/owned_stream.hpp"

#include <mutex>
#include <string>
#include <utility>

#include "cuweave/adopted_stream.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/services.hpp"
#include "cuweave/sm_partition.hpp"
#include "cuweave/trace.hpp"

namespace cuweave {

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

OwnedStream::OwnedStream(StreamHandle handle, int device, int priority, bool blocking, bool lent_by_pool,
                         std::string name)
    : Stream(handle, device, priority, blocking, Origin{Default::None, false, lent_by_pool}, std::move(name)) {}

std::shared_ptr<Stream> OwnedStream::make(int device, int priority, bool blocking, bool lent_by_pool,
                                          std::string name) {
  check_priority(device, priority);
  return own(backend().streams().create_stream(device, priority, blocking), device, priority, blocking, lent_by_pool,
             std::move(name));
}

std::shared_ptr<Stream> OwnedStream::own(StreamHandle handle, int device, int priority, bool blocking,
                                         bool lent_by_pool, std::string name, std::shared_ptr<SmPartition> partition) {
  std::unique_ptr<OwnedStream> stream;
  try {
    stream.reset(new OwnedStream(handle, device, priority, blocking, lent_by_pool, std::move(name)));
  } catch (...) {
    backend().streams().destroy_stream(handle);
    throw;
  }
  stream->partition_ = std::move(partition);
  return std::shared_ptr<Stream>(std::move(stream));  // on failure the unique_ptr, still the owner, destroys it
}

std::shared_ptr<Stream> OwnedStream::create(int device, int priority, bool blocking, std::string name) {
  return make(device, priority, blocking, false, std::move(name));
}

std::shared_ptr<Stream> OwnedStream::create_lent_by_pool(int device, int priority, bool blocking, std::string name) {
  return make(device, priority, blocking, true, std::move(name));
}

std::shared_ptr<Stream> OwnedStream::create_on(std::shared_ptr<SmPartition> partition, int priority,
                                               std::string name) {
  const int device = partition->device();
  check_priority(device, priority);
  StreamHandle handle = backend().partitions().create_stream(partition->handle(), priority);
  // Unnamed, its trace lane and repr still say where its kernels run.
  if (name.empty()) name = "on " + std::to_string(partition->sms()) + " SMs";
  return own(handle, device, priority, false, false, std::move(name), std::move(partition));
}

OwnedStream::~OwnedStream() {
  const bool destroys_handle = !closed();
  if (destroys_handle) close_adoptions();
  retire();  // before the handle goes: an open trace asks for its lane's id
  if (destroys_handle) {
    release_partition_after_work();
    backend().streams().destroy_stream(raw_handle());
  }
}

void OwnedStream::close_adoptions() noexcept {
  const StreamHandle handle = raw_handle();
  for_each_live([&](Stream& stream) {
    if (&stream == this || !stream.adopted() || stream.raw_handle() != handle || stream.closed()) return;
    static_cast<AdoptedStream&>(stream).close_with_its_stream();
  });
}

void OwnedStream::release_partition_after_work() noexcept {
  if (!partition_) return;
  try {
    services().lifetimes().hold_until_complete(*this, Holds{partition_});
  } catch (...) {
    // No event could be recorded: the context is lost, and no work of the stream will run any more.
  }
}

void OwnedStream::close() {
  if (!closable()) return Stream::close();  // refused: lent by a pool, which destroys it
  static std::mutex closing;  // closing the same stream from two threads: one records and destroys
  std::lock_guard<std::mutex> lock(closing);
  if (closed()) return;
  if (trace::active()) label_in_open_traces();
  record_closing_event();
  close_adoptions();
  release_partition_after_work();
  mark_closed();
  // Its handle may be reused by a stream made next: to the sanitizer that is another stream.
  if (sanitizer::ever_enabled()) sanitizer::stream_destroyed(*this);
  backend().streams().destroy_stream(raw_handle());
}

}  // namespace cuweave
