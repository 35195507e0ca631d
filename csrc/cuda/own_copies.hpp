// Note [cuweave's own copies]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The launch watch reports the copies other libraries make through the runtime (Note [Kernels other libraries
// launch] in cuweave/tracer.hpp), seen by CUPTI on the calling thread; cuweave's own copies go through the same
// runtime calls, and the core tells the sanitizer of them itself. So the memory backend marks its copies, on its
// thread, for the watch to pass over.
#pragma once

namespace cuweave::cuda {

class OwnCopy {
 public:
  OwnCopy() noexcept { ++depth(); }
  OwnCopy(const OwnCopy&) = delete;
  OwnCopy& operator=(const OwnCopy&) = delete;
  ~OwnCopy() { --depth(); }

  // Whether the calling thread is inside one of cuweave's copies.
  static bool active() noexcept { return depth() > 0; }

 private:
  static int& depth() noexcept {
    thread_local int copies = 0;
    return copies;
  }
};

}  // namespace cuweave::cuda
