#include "cuweave/kernel.hpp"

#include <cxxabi.h>

#include <atomic>
#include <cstdlib>

#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/operation.hpp"
#include "cuweave/submission.hpp"

namespace cuweave {

namespace {
std::atomic<bool> leave_loaded{false};

std::string demangled(const std::string& name) {
  int status = 0;
  char* readable = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string result = status == 0 && readable ? readable : name;
  std::free(readable);
  return result;
}
}  // namespace

void LoadedModule::leave_loaded_from_now() noexcept { leave_loaded.store(true); }

LoadedModule::~LoadedModule() {
  // A graph captured or being captured may still launch the code; a module left loaded is harmless.
  const Capture::BeginFence fence;  // Note [Deciding beside a beginning capture]
  if (fence.any_active() || leave_loaded.load()) return;
  // Eager launches do not keep the module (that would cost a lifetime entry per launch): the backend
  // unloads it after all work queued so far, without making this thread wait.
  backend().kernels().unload_module(handle, device);
}

Kernel::Kernel(const std::string& binary, const std::string& lowered_name, int device)
    : device_(device), name_(lowered_name), operation_name_("kernel " + demangled(lowered_name)), kernel_(nullptr) {
  ModuleHandle module = backend().kernels().load_module(binary, device);
  try {
    kernel_ = backend().kernels().get_kernel(module, lowered_name);
    parameter_sizes_ = backend().kernels().kernel_parameter_sizes(kernel_);
  } catch (...) {
    backend().kernels().unload_module(module, device);
    throw;
  }
  module_ = std::make_shared<LoadedModule>(module, device);
  read_only_.assign(parameter_sizes_.size(), false);
}

std::vector<bool> Kernel::read_only() const {
  std::lock_guard<std::mutex> lock(read_only_mutex_);
  return read_only_;
}

void Kernel::set_read_only(std::vector<bool> flags) {
  CUWEAVE_EXPECTS(flags.size() == parameter_sizes_.size(),
                  "the kernel has " + std::to_string(parameter_sizes_.size()) + " parameters, got " +
                      std::to_string(flags.size()) + " read-only flags");
  std::uint64_t mask = 0;
  for (std::size_t i = 0; i < flags.size() && i < kMaskedParameters; ++i) {
    if (flags[i]) mask |= std::uint64_t{1} << i;
  }
  std::lock_guard<std::mutex> lock(read_only_mutex_);
  read_only_ = std::move(flags);
  read_only_mask_.store(mask, std::memory_order_release);
}

void Kernel::launch(Operation& operation, const std::shared_ptr<Stream>& stream, Dim3 grid, Dim3 block,
                    std::size_t shared_bytes, void** arguments) {
  if (stream->device() != device_) {
    throw InvalidArgument("this kernel is loaded on device " + std::to_string(device_) + " but the stream is on device " +
                          std::to_string(stream->device()) + "; compile it for the stream's device");
  }
  // A captured launch runs at every replay: the graph keeps the code loaded.
  if (Capture::any_active() && Capture::of(*stream)) operation.keep_alive(module_);
  queue(operation, stream, [&](StreamHandle handle) {
    backend().kernels().launch_kernel(kernel_, grid, block, shared_bytes, arguments, handle,
                                      programmatic_.load(std::memory_order_relaxed));
  });
}

}  // namespace cuweave
