// The modules cuweave itself loaded (cuweave.compile's kernels), so that the sanitizer's watch of kernels other
// libraries launch (Note [Kernels other libraries launch]) passes over cuweave's own.
#pragma once

#include <cuda.h>

namespace cuweave::cuda {

void note_module_loaded(CUmodule module);
void note_module_unloaded(CUmodule module) noexcept;
bool loaded_by_cuweave(CUmodule module);

}  // namespace cuweave::cuda
