// cuweave's own kernel launches, built-in and compiled, through one driver call (Note [cuweave's launches beside
// the launch watch]).
#pragma once

#include <cuda.h>

#include "cuweave/backend_handles.hpp"

namespace cuweave::cuda {

// Note [cuweave's launches beside the launch watch]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The launch watch (CuPy's kernels under the sanitizer and in a weave) turns on CUPTI's callbacks for the driver's
// launch calls, process-wide: every launch then goes through CUPTI's callbacks at its entry and exit, cuweave's own
// included, although the watch passes them over (the core has told the sanitizer and the weave of them already).
// Measured on an H200 with CuPy imported, the watch alone added 0.23-0.39 us to each of cuweave's operations
// (tools/probes/sanitizer_cost_split.py), most of the sanitizer's budget. So cuweave launches through the one
// launch call the watch leaves off: cuLaunchKernelEx in its per-thread-default-stream form (cuLaunchKernelEx_ptsz),
// which costs what cuLaunchKernel does (0.995x on an H200: tools/probes/launch_call_forms.cu).
// CuPy launches through cuLaunchKernel and cuLaunchCooperativeKernel, and the runtime's launches are watched as
// runtime calls; a library's own call of that form (built for the per-thread default stream, calling the driver's
// extended launch itself) goes unwatched outside a trace. The form reads a null stream as the thread's own default
// stream, so cuweave's null stream (the legacy default stream) is named CU_STREAM_LEGACY. Inside a weave that places
// other libraries' work, the watch's callback told the placement of cuweave's launches (their streams' work stays
// put); the launch now tells it itself. A trace turns every callback on and sees them as before.

struct OwnLaunch {
  CUfunction function = nullptr;
  Dim3 grid;
  Dim3 block;
  unsigned shared_bytes = 0;
  CUstream stream = nullptr;  // null: the legacy default stream
  bool programmatic = false;  // may begin before the stream's previous kernel ends (programmatic dependent launch)
};

// Launches `launch` with `arguments` (one pointer per kernel parameter), making the runtime's context current
// first on a thread that has none. Returns the driver's status (errors name the call cuLaunchKernelEx).
CUresult launch_own_kernel(const OwnLaunch& launch, void** arguments);

}  // namespace cuweave::cuda
