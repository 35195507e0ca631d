// AdoptedStream: a stream someone else made (another library's, or a handle given as an int), as cuweave queues
// work into it. It keeps its owner's object alive and never destroys the handle; the user cannot close it.
//
// Note [Adoptions of a handle cuweave destroys]
// An adoption of a stream cuweave made (cuweave.Stream.from_external(int), or the PyTorch and CuPy hooks' adoption
// of a torch.cuda.ExternalStream or a CuPy wrapper over it) is an object of its own that keeps nothing of the
// handle alive. Once cuweave destroys the handle, any use of the adoption (an idle query by the sanitizer, a trace
// asking its lane's id, an event recorded on it) hands CUDA a destroyed handle, which CUDA does not refuse:
// cuptiGetStreamIdEx crashed on one at a trace's end on an H200, and CUDA may give the handle to the next stream
// made. So the adoptions close with the stream (OwnedStream::close_adoptions): each records its own closing event
// (work queued through it is over when that completes, as for the stream itself), the sanitizer ends its part, and
// a later use raises.
#pragma once

#include <memory>

#include "cuweave/hold.hpp"
#include "cuweave/stream.hpp"

namespace cuweave {

class AdoptedStream final : public Stream {
 public:
  // Refers to `handle`, made by someone else; `owner` (the foreign object, or null) is kept alive.
  static std::shared_ptr<Stream> adopt(StreamHandle handle, Hold owner);

  ~AdoptedStream() override;

 private:
  friend class OwnedStream;  // closes the adoptions of the handles it destroys
  AdoptedStream(StreamHandle handle, int device, int priority, bool blocking, Hold owner);
  // The cuweave stream this names is closing or going (see the Note).
  void close_with_its_stream() noexcept;
  [[noreturn]] void throw_closed() const override;

  Hold owner_;
};

}  // namespace cuweave
