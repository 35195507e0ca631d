// Kernel: a compiled kernel loaded on a device, ready to launch on its streams.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/hold.hpp"

namespace cuweave {

class Operation;
class Stream;

// A loaded module. It is unloaded after the work queued on its device so far (queued launches may still
// use it), without the destroying thread waiting; graphs that captured a launch hold it (Note [Capture and
// lifetimes]).
struct LoadedModule {
  LoadedModule(ModuleHandle handle, int device) : handle(handle), device(device) {}
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;
  ~LoadedModule();
  // From now on modules are left loaded (the driver frees them with the process): at interpreter exit no
  // helper thread may start a CUDA call while the runtime shuts down.
  static void leave_loaded_from_now() noexcept;
  ModuleHandle handle;
  int device;
};

class Kernel {
 public:
  // Loads `binary` (CUBIN) on `device` and finds `lowered_name` in it.
  Kernel(const std::string& binary, const std::string& lowered_name, int device);
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
  ~Kernel() = default;

  int device() const noexcept { return device_; }
  const std::string& name() const noexcept { return name_; }
  // What a sanitizer report calls a launch: "kernel " and the demangled name.
  const std::string& operation_name() const noexcept { return operation_name_; }
  const std::vector<std::size_t>& parameter_sizes() const noexcept { return parameter_sizes_; }
  // Which parameters the kernel only reads through (Note [Kernel accesses]): one flag per parameter,
  // all false until declared.
  std::vector<bool> read_only() const;
  // Calls `use(read_only)`, where read_only(parameter) says whether that parameter is read-only, all read as one
  // setting of the flags (a launch reads them). Every launch asks: a kernel of up to 64 parameters (nearly every
  // kernel) pays one atomic load for it, others the lock.
  template <typename Use>
  void with_read_only(Use&& use) const {
    if (parameter_sizes_.size() <= kMaskedParameters) {
      const std::uint64_t mask = read_only_mask_.load(std::memory_order_acquire);
      use([mask](std::size_t parameter) { return parameter < kMaskedParameters && ((mask >> parameter) & 1U) != 0; });
      return;
    }
    std::lock_guard<std::mutex> lock(read_only_mutex_);
    use([this](std::size_t parameter) { return parameter < read_only_.size() && read_only_[parameter]; });
  }
  // Throws InvalidArgument unless there is one flag per parameter.
  void set_read_only(std::vector<bool> flags);
  // Note [Programmatic dependent launch]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A kernel launched programmatically may start while the previous kernel on its stream is still running
  // (compute capability 9.0): its blocks get SMs and run their prologue early, and wait with
  // cudaGridDependencySynchronize() (PTX griddepcontrol.wait) until that kernel has finished or triggered. A
  // chain of short dependent kernels so hides each launch's ramp-up. Captured (CUDA 12.3), such launches become
  // programmatic edges of the graph. The kernel must wait before it reads what the previous one writes: the
  // ordering the sanitizer and the weave assume (stream order) holds only from that wait on.
  bool programmatic() const noexcept { return programmatic_.load(std::memory_order_relaxed); }
  void set_programmatic(bool on) noexcept { programmatic_.store(on, std::memory_order_relaxed); }
  KernelHandle handle() const noexcept { return kernel_; }
  // What keeps the kernel's code loaded (graphs that use the kernel hold it).
  Hold module_hold() const noexcept { return module_; }

  // Launches on `stream` with one value per parameter (pointers into `arguments`, each the parameter's
  // size), through the submission path for `operation` (the arrays passed, what to keep alive). Does not
  // synchronize the stream.
  void launch(Operation& operation, const std::shared_ptr<Stream>& stream, Dim3 grid, Dim3 block,
              std::size_t shared_bytes, void** arguments);

 private:
  int device_;
  std::string name_;
  std::string operation_name_;
  std::shared_ptr<LoadedModule> module_;
  KernelHandle kernel_;
  std::vector<std::size_t> parameter_sizes_;
  static constexpr std::size_t kMaskedParameters = 64;
  mutable std::mutex read_only_mutex_;
  std::vector<bool> read_only_;  // LOCK: read_only_mutex_
  std::atomic<std::uint64_t> read_only_mask_{0};  // read_only_'s first kMaskedParameters flags, bit i parameter i
  std::atomic<bool> programmatic_{false};
};

}  // namespace cuweave
