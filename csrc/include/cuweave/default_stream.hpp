// DefaultStream: a device's legacy or per-thread default stream. CUDA made it and nobody destroys it; there is one
// object of each per device, made at its first use.
#pragma once

#include <memory>

#include "cuweave/stream.hpp"

namespace cuweave {

class DefaultStream final : public Stream {
 public:
  // The legacy default stream of `device`, which synchronizes with the device's blocking streams.
  static std::shared_ptr<Stream> legacy(int device);
  // The per-thread default stream of `device`: its handle means "the calling thread's own default stream"
  // wherever it is used.
  static std::shared_ptr<Stream> per_thread(int device);

 private:
  DefaultStream(StreamHandle handle, int device, Default which);
  // The default stream of `device` named by `which`, made at the first call.
  static std::shared_ptr<Stream> of(int device, Default which);
};

}  // namespace cuweave
