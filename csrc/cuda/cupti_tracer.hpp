// The CUDA backend's Tracer, through CUPTI (Note [Tracing with CUPTI] in cupti_tracer.cpp).
#pragma once

#include "cuweave/backend.hpp"

namespace cuweave::cuda {

Tracer& cupti_tracer();

// cuweave's own kernel launch on `stream`, about to be queued. While this thread's weave places other libraries' work
// under the launch watch, that stream's work stays where it is: the placement orders the launches it moves after it,
// as the watch's callbacks do for other work they see (Note [cuweave's launches beside the launch watch]).
void tell_own_launch(StreamHandle stream) noexcept;

}  // namespace cuweave::cuda
