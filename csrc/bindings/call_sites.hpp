// Call sites read where the GIL is not held (bind_trace.cpp, Note [Call sites without the GIL]).
#pragma once

#include <cstdint>

namespace cuweave::bindings {

// The calling thread's Python call site, without the GIL, where it is one the thread met before and every frame
// inside it is one the thread found to be plumbing before (interned; 0: not so, or not on this Python: ask again
// with the GIL). The thread must be below its Python frames, in a call that released the GIL.
std::uint32_t call_site_without_gil() noexcept;

}  // namespace cuweave::bindings
