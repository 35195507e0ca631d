// The backend's kernels: the built-in ones (fill, copy_strided, spin, arithmetic, sum) and user kernels compiled
// at run time, loaded as modules and launched (Note [Backend facets] in backend.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuweave/arithmetic.hpp"
#include "cuweave/backend_handles.hpp"
#include "cuweave/strided_copy.hpp"

namespace cuweave {

// The result of compiling CUDA C++ at run time.
struct CompiledKernel {
  std::string binary;        // CUBIN for the device's architecture
  std::string lowered_name;  // the symbol of the requested kernel (mangled for C++ names)
  std::string log;           // the compiler's messages (warnings), possibly empty
};

class KernelBackend {
 public:
  virtual ~KernelBackend() = default;

  // Built-in kernels. `pattern` holds `pattern_bytes` (1, 2, 4, 8 or 16) bytes repeated `count` times.
  virtual void fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
                    StreamHandle stream) = 0;
  // Copies copy.count() elements between two strided layouts (strided_copy.hpp); the caller skips empty copies.
  virtual void copy_strided(const StridedCopy& copy, StreamHandle stream) = 0;
  // Each of `blocks` blocks busy-waits `nanoseconds`; when start_time is given, block 0 writes the device
  // clock (ns) at its start there.
  virtual void spin(std::uint64_t nanoseconds, unsigned blocks, std::uint64_t* start_time, StreamHandle stream) = 0;
  // Element-wise arithmetic (see arithmetic.hpp for the rounding every backend keeps).
  virtual void arithmetic(const Arithmetic& operation, StreamHandle stream) = 0;
  // *out = the sum of x[0..count), in sum_type(type); deterministic for a given count. `scratch`, when
  // given, holds sum_scratch_bytes(count) bytes of device memory the caller keeps alive until the sum has
  // completed (at every replay, when captured); without it the backend uses stream-ordered scratch, which
  // a capture turns into allocation nodes (not allowed inside conditional bodies).
  virtual std::size_t sum_scratch_bytes(std::size_t count) = 0;
  virtual void sum(void* out, const void* x, std::size_t count, NumericType type, void* scratch,
                   StreamHandle stream) = 0;

  // Runtime compilation and launch of user kernels. compile() throws CompileError with the compiler's
  // log; `name_expression` is an extern "C" name or a C++ name expression such as "scale<float>".
  virtual CompiledKernel compile(const std::string& source, const std::string& name_expression,
                                 const std::vector<std::string>& options, int device) = 0;
  virtual ModuleHandle load_module(const std::string& binary, int device) = 0;
  // Unloads once the work queued on `device` so far has completed (a queued launch may still use the
  // code), without blocking the caller: a thread that holds the GIL must never wait for the device here,
  // where a paused stream may be waiting for Python (Note [Enqueueing behind a paused stream]). The module may
  // stay loaded until the device is next synchronized (a synchronize nobody asked for would fail captures).
  virtual void unload_module(ModuleHandle module, int device) noexcept = 0;
  virtual KernelHandle get_kernel(ModuleHandle module, const std::string& lowered_name) = 0;
  // The size in bytes of each of the kernel's parameters, in order.
  virtual std::vector<std::size_t> kernel_parameter_sizes(KernelHandle kernel) = 0;
  // `arguments` points at one value per parameter, of that parameter's size. `programmatic`: the launch may begin
  // before the stream's previous kernel has finished (Note [Programmatic dependent launch] in kernel.hpp).
  virtual void launch_kernel(KernelHandle kernel, Dim3 grid, Dim3 block, std::size_t shared_bytes, void** arguments,
                             StreamHandle stream, bool programmatic) = 0;
};

}  // namespace cuweave
