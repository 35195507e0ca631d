// The CUDA backend's Tracer, through CUPTI (Note [Tracing with CUPTI] in cupti_tracer.cpp).
#pragma once

#include "cuweave/backend.hpp"

namespace cuweave::cuda {

Tracer& cupti_tracer();

}  // namespace cuweave::cuda
