// Runtime compilation with NVRTC, loaded on first use so that cuweave imports (and runs everything
// else) where NVRTC is not installed.
#pragma once

#include <string>
#include <vector>

#include "cuweave/backend.hpp"

namespace cuweave::cuda {

// Compiles `source` for compute capability major.minor to CUBIN. Throws CompileError with the log.
CompiledKernel nvrtc_compile(const std::string& source, const std::string& name_expression,
                             const std::vector<std::string>& options, int major, int minor);

}  // namespace cuweave::cuda
