#include "cuweave/adopted_stream.hpp"

#include <utility>

#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/sanitizer.hpp"

namespace cuweave {

AdoptedStream::AdoptedStream(StreamHandle handle, int device, int priority, bool blocking, Hold owner)
    : Stream(handle, device, priority, blocking, Origin{Default::None, true, false}), owner_(std::move(owner)) {}

std::shared_ptr<Stream> AdoptedStream::adopt(StreamHandle handle, Hold owner) {
  StreamInfo info;
  std::shared_ptr<Stream> origin = Capture::any_active() ? Capture::describing_capturing(handle) : nullptr;
  if (origin) {  // PyTorch's operators captured into a cuweave graph on a torch ExternalStream of its stream
    info = StreamInfo{origin->device(), origin->priority(), origin->blocking()};
  } else {
    info = backend().streams().stream_info(handle);
  }
  return std::shared_ptr<Stream>(new AdoptedStream(handle, info.device, info.priority, info.blocking,
                                                   std::move(owner)));
}

// Before the owner goes: it may be what keeps the handle alive, which an open trace asks about.
AdoptedStream::~AdoptedStream() { retire(); }

void AdoptedStream::close_with_its_stream() noexcept {
  record_closing_event();
  mark_closed();
  if (sanitizer::ever_enabled()) sanitizer::stream_destroyed(*this);
}

void AdoptedStream::throw_closed() const {
  throw InvalidArgument(
      "this Stream adopted a stream that cuweave has since closed (its CUDA handle is gone, and may name the next "
      "stream made); adopt the stream you use now");
}

}  // namespace cuweave
