// Named ranges of host time: `with cuweave.range("step"):`.
//
// Each range is an NVTX range (NVIDIA's header-only tools extension: it does nothing unless a tool such
// as Nsight Systems injects itself, so Nsight shows cuweave's ranges), and, while a trace takes the
// thread's operations, a range activity on the thread's lane of that trace (Note [Tracing]).
#pragma once

#include <string>

namespace cuweave::trace {

// Opens a range on the calling thread (ranges nest).
void push_range(const std::string& name);
// Closes the innermost range the calling thread opened; InvalidArgument if none is open.
void pop_range();
// How many ranges the calling thread has open.
std::size_t open_ranges() noexcept;

}  // namespace cuweave::trace
