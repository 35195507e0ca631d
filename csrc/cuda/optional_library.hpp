// Libraries that cuweave loads only when a feature needs them (NVRTC for compiled kernels, CUPTI for
// traces, NCCL for collectives), so that the module imports and runs without them.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
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

// The site-packages folder cuweave's module lives in (empty if unknown): NVIDIA's wheels (nvidia-cuda-cupti,
// nvidia-nccl-cu13) put their libraries below its nvidia/ folder.
inline std::string site_packages() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&open_first), &info) == 0 || info.dli_fname == nullptr) return {};
  std::string path = info.dli_fname;  // .../site-packages/cuweave/_core*.so
  for (int up = 0; up < 2; ++up) {
    const std::size_t slash = path.rfind('/');
    if (slash == std::string::npos) return {};
    path.resize(slash);
  }
  return path;
}

// What an optional library is and where to look for it.
struct OptionalLibrary {
  const char* what;        // "CUPTI": names errors (<WHAT>_NOT_FOUND) and messages
  const char* variable;    // environment variable naming the file to load instead of searching
  const char* file;        // e.g. "libcupti.so.13"
  const char* needed_for;  // e.g. "tracing on the GPU"
  const char* where;       // where it usually is, for the message
  const char* install;     // how to get it, e.g. "pip install nvidia-cuda-cupti"
};

// Loads `library`: the file its environment variable names when set (the only candidate then), else the
// first of `candidates` that loads. Throws BackendError (dlopen, <WHAT>_NOT_FOUND) saying what to do.
inline void* load_optional(const OptionalLibrary& library, const std::vector<std::string>& candidates) {
  const char* chosen = std::getenv(library.variable);
  const bool by_user = chosen != nullptr && *chosen != '\0';
  void* loaded = by_user ? open_first({chosen}) : open_first(candidates);
  if (loaded) return loaded;
  const std::string name = std::string(library.what) + "_NOT_FOUND";
  if (by_user) {
    const char* why = dlerror();
    throw BackendError("dlopen", -1, name,
                       std::string(library.needed_for) + " needs " + library.what + ", and " + library.variable +
                           " names " + chosen + ", which could not be loaded (" + (why ? why : "unknown reason") +
                           "); point it at " + library.file + " or unset it to search the usual places",
                       __FILE__, __LINE__);
  }
  throw BackendError("dlopen", -1, name,
                     std::string(library.needed_for) + " needs " + library.what + " (" + library.file + ", " +
                         library.where + "); none was found on the library path, beside cuweave in " +
                         "site-packages/nvidia, or in /usr/local/cuda. Install it (" + library.install + ") or set " +
                         library.variable + "=/path/to/" + library.file,
                     __FILE__, __LINE__);
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
