// What the backend's facets hand each other: opaque handles, whose meaning belongs to the backend, and the
// small values several facets take (Note [Backend facets] in backend.hpp).
#pragma once

#include <chrono>

namespace cuweave {

using StreamHandle = void*;
using EventHandle = void*;
using HostFunction = void (*)(void* user_data);
// A flag in host memory that streams can wait for (Note [Stream-ordered host callbacks]).
using HostFlagHandle = void*;
using ModuleHandle = void*;
using KernelHandle = void*;
using GraphHandle = void*;
using GraphExecHandle = void*;
using GraphNodeHandle = void*;

// Three extents of a launch grid or block.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// One slice of a wait that the core splits so that it can be interrupted (Note [Interruptible waits]).
struct WaitSlice {
  std::chrono::steady_clock::time_point began;  // when the whole wait began
  std::chrono::steady_clock::time_point until;  // give up at this time if the work has not completed
};

}  // namespace cuweave
