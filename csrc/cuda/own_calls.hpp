// Note [cuweave's own runtime calls]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The launch watch reports the copies, event records, stream waits and synchronizes that other libraries make
// through CUDA's runtime (Note [Kernels other libraries launch] in cuweave/tracer.hpp), seen by CUPTI on the
// calling thread. cuweave makes some of the same calls (its copies, its blocking synchronizes), and the core tells
// the sanitizer of those itself; a report of one would also take the GIL inside a wait that may run on a helper
// thread, or beside a lock the GIL's holder wants. So the backend marks its own, on their thread, for the watch
// to pass over. Its kernel launches are marked too: looking at each (a lock, the kernel's verdict) cost every
// launch host time under the sanitizer, for work the core has told of already.
#pragma once

namespace cuweave::cuda {

class OwnCall {
 public:
  OwnCall() noexcept { ++depth(); }
  OwnCall(const OwnCall&) = delete;
  OwnCall& operator=(const OwnCall&) = delete;
  ~OwnCall() { --depth(); }

  // Whether the calling thread is inside one of cuweave's own runtime calls.
  static bool active() noexcept { return depth() > 0; }

 private:
  static int& depth() noexcept {
    thread_local int calls = 0;
    return calls;
  }
};

}  // namespace cuweave::cuda
