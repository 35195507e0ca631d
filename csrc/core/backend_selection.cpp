// Which backend the process uses: chosen once, at first use (Note in backend.hpp).
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"

namespace cuweave {

namespace {

std::mutex selection_mutex;
std::atomic<Backend*> selected{nullptr};  // written once under selection_mutex

Backend* resolve(const std::string& name) {
  if (name == "cuda") return &cuda_backend();
  if (name == "sim") return &sim_backend();
  if (name == "auto") {
    return cuda_backend().devices().device_count() > 0 ? &cuda_backend() : &sim_backend();
  }
  throw InvalidArgument("unknown cuweave backend '" + name + "'; use \"cuda\", \"sim\" or \"auto\"");
}

std::string requested_name() {
  const char* value = std::getenv("CUWEAVE_BACKEND");
  return value && *value ? value : "auto";
}

// Before `selected` is published, so that whoever sees the backend sees the count too.
Backend* chosen_counting_devices(Backend* chosen) {
  detail::several_devices.store(chosen->devices().device_count() > 1, std::memory_order_relaxed);
  return chosen;
}

}  // namespace

namespace detail {
std::atomic<bool> several_devices{false};
}

Backend& backend() {
  if (Backend* chosen = selected.load(std::memory_order_acquire)) return *chosen;
  std::lock_guard<std::mutex> lock(selection_mutex);
  if (!selected.load(std::memory_order_relaxed)) {
    selected.store(chosen_counting_devices(resolve(requested_name())), std::memory_order_release);
  }
  return *selected.load(std::memory_order_relaxed);
}

void select_backend(const std::string& name) {
  std::lock_guard<std::mutex> lock(selection_mutex);
  Backend* wanted = resolve(name);
  Backend* chosen = selected.load(std::memory_order_relaxed);
  if (chosen && chosen != wanted) {
    throw InvalidArgument(std::string("cannot switch to the '") + wanted->name() + "' backend: cuweave already uses the '" +
                          chosen->name() + "' backend; choose the backend before the first cuweave call, or set "
                          "CUWEAVE_BACKEND");
  }
  selected.store(chosen_counting_devices(wanted), std::memory_order_release);
}

}  // namespace cuweave
