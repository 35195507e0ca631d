#include "cuda/own_modules.hpp"

#include <mutex>
#include <unordered_set>

namespace cuweave::cuda {

namespace {

std::mutex mutex;
std::unordered_set<CUmodule>& modules() {
  static auto* loaded = new std::unordered_set<CUmodule>;  // LOCK: mutex; leaked, as the driver's modules are
  return *loaded;
}

}  // namespace

void note_module_loaded(CUmodule module) {
  std::lock_guard<std::mutex> lock(mutex);
  modules().insert(module);
}

void note_module_unloaded(CUmodule module) noexcept {
  std::lock_guard<std::mutex> lock(mutex);
  modules().erase(module);
}

bool loaded_by_cuweave(CUmodule module) {
  std::lock_guard<std::mutex> lock(mutex);
  return modules().count(module) != 0;
}

}  // namespace cuweave::cuda
