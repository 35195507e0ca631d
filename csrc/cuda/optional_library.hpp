// Libraries of the CUDA toolkit that cuweave loads only when a feature needs them (NVRTC for compiled
// kernels, CUPTI for traces), so that the module imports and runs without them.
#pragma once

#include <dlfcn.h>

#include <string>
#include <vector>

#include "cuweave/errors.hpp"

namespace cuweave::cuda {

// The first of `candidates` (file names or paths) that dlopen loads; null if none does.
inline void* open_first(const std::vector<std::string>& candidates) {
  for (const std::string& candidate : candidates) {
    if (void* library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) return library;
  }
  return nullptr;
}

// Sets `function` to `symbol` of `library`; throws BackendError named `<WHAT>_SYMBOL_MISSING` if absent.
template <typename F>
void bind(void* library, const char* symbol, F& function, const char* what) {
  function = reinterpret_cast<F>(dlsym(library, symbol));
  if (!function) {
    throw BackendError("dlsym", -1, std::string(what) + "_SYMBOL_MISSING", std::string(what) + " lacks " + symbol,
                       __FILE__, __LINE__);
  }
}

}  // namespace cuweave::cuda
