// Note [Default streams of other devices]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A default stream's handle (legacy or per-thread) means the default stream of the calling thread's
// *current* device, in CUDA and in the simulator alike. A cuweave Stream for the default stream of device d
// (cw.default_stream(d), a collective's default stream, the free stream of memory allocated there) therefore
// names d's stream only while d is current. Whatever the core queues on such a stream (work, event records,
// waits, frees) it queues inside a DefaultStreamScope, which makes d current for the call. Without it, work,
// a free or the event that ends a lifetime would land on the current device's default stream: a free could
// then run before device d's work on the memory had completed.
#pragma once

#include "cuweave/backend.hpp"
#include "cuweave/stream.hpp"

namespace cuweave {

class DefaultStreamScope {
 public:
  // Nothing to do (one comparison) for streams with handles of their own.
  explicit DefaultStreamScope(const Stream& stream) {
    if (stream.kind() != Stream::Kind::LegacyDefault && stream.kind() != Stream::Kind::PerThreadDefault) return;
    previous_ = backend().current_device();
    if (previous_ != stream.device()) {
      backend().set_current_device(stream.device());
      changed_ = true;
    }
  }
  DefaultStreamScope(const DefaultStreamScope&) = delete;
  DefaultStreamScope& operator=(const DefaultStreamScope&) = delete;
  ~DefaultStreamScope() {
    if (!changed_) return;
    try {
      backend().set_current_device(previous_);
    } catch (...) {
      // Making current again a device that was current a moment ago fails only with a broken context, which
      // every later call reports.
    }
  }

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace cuweave
