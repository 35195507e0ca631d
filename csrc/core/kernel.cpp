#include "cuweave/kernel.hpp"

#include "cuweave/errors.hpp"
#include "cuweave/stream.hpp"

namespace cuweave {

Kernel::Kernel(const std::string& binary, const std::string& lowered_name, int device)
    : device_(device), name_(lowered_name), module_(backend().load_module(binary, device)), kernel_(nullptr) {
  try {
    kernel_ = backend().get_kernel(module_, lowered_name);
    parameter_sizes_ = backend().kernel_parameter_sizes(kernel_);
  } catch (...) {
    backend().unload_module(module_);
    throw;
  }
}

Kernel::~Kernel() { backend().unload_module(module_); }

void Kernel::launch(Stream& stream, Dim3 grid, Dim3 block, std::size_t shared_bytes, void** arguments, Holds holds) {
  if (stream.device() != device_) {
    throw InvalidArgument("this kernel is loaded on device " + std::to_string(device_) + " but the stream is on device " +
                          std::to_string(stream.device()) + "; compile it for the stream's device");
  }
  backend().launch_kernel(kernel_, grid, block, shared_bytes, arguments, stream.handle());
  stream.hold(std::move(holds));
}

}  // namespace cuweave
