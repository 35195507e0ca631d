// The seam between the CUDA-free core and the code that talks to a device.
//
// Every device operation the core needs goes through Backend. The CUDA backend (csrc/cuda) is the
// only implementation that calls CUDA; a host simulator can implement the same interface. Handles are
// opaque pointers whose meaning belongs to the backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cuweave/arithmetic.hpp"

namespace cuweave {

using StreamHandle = void*;
using EventHandle = void*;
using HostFunction = void (*)(void* user_data);
using ModuleHandle = void*;
using KernelHandle = void*;

// Three extents of a launch grid or block.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// The result of compiling CUDA C++ at run time.
struct CompiledKernel {
  std::string binary;        // CUBIN for the device's architecture
  std::string lowered_name;  // the symbol of the requested kernel (mangled for C++ names)
  std::string log;           // the compiler's messages (warnings), possibly empty
};

struct DeviceProperties {
  int ordinal = 0;
  std::string name;
  int multiprocessor_count = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int async_engine_count = 0;
  int lowest_priority = 0;   // numerically greatest (CUDA: 0)
  int highest_priority = 0;  // numerically least (CUDA: e.g. -5)
  std::size_t total_memory = 0;
  std::string pci_bus_id;
};

struct StreamInfo {
  int device = 0;
  int priority = 0;
  bool blocking = true;
};

// Bit flags for Backend::create_event.
enum EventFlag : unsigned {
  kEventDefault = 0,
  kEventTiming = 1u << 0,
  kEventBlockingSync = 1u << 1,
  kEventInterprocess = 1u << 2,
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const noexcept = 0;

  // Devices. device_count() never throws: it answers 0 when no device or driver is usable, and
  // unavailable_reason() then says why.
  virtual int device_count() noexcept = 0;
  virtual std::string unavailable_reason() = 0;
  // Throws DeviceUnavailable, naming what is missing, unless at least one device is usable.
  virtual void require_device() = 0;
  virtual int current_device() = 0;
  virtual void set_current_device(int device) = 0;
  virtual DeviceProperties device_properties(int device) = 0;
  virtual void synchronize_device(int device) = 0;
  virtual std::pair<int, int> driver_version() = 0;
  virtual std::pair<int, int> runtime_version() = 0;

  // Streams. The two default streams are fixed handles valid on every device.
  virtual StreamHandle legacy_default_stream() const noexcept = 0;
  virtual StreamHandle per_thread_default_stream() const noexcept = 0;
  virtual StreamHandle create_stream(int device, int priority, bool blocking) = 0;
  virtual void destroy_stream(StreamHandle stream) noexcept = 0;
  virtual StreamInfo stream_info(StreamHandle stream) = 0;
  virtual void synchronize_stream(StreamHandle stream) = 0;
  virtual bool stream_idle(StreamHandle stream) = 0;
  virtual void stream_wait_event(StreamHandle stream, EventHandle event) = 0;
  // Calls function(user_data) once all prior work on the stream has completed; later work waits for it.
  virtual void launch_host_function(StreamHandle stream, HostFunction function, void* user_data) = 0;

  // Events.
  virtual EventHandle create_event(int device, unsigned flags) = 0;
  virtual void destroy_event(EventHandle event) noexcept = 0;
  virtual void record_event(EventHandle event, StreamHandle stream) = 0;
  virtual bool event_complete(EventHandle event) = 0;
  virtual void synchronize_event(EventHandle event) = 0;
  virtual float elapsed_ms(EventHandle start, EventHandle end) = 0;
  virtual std::string event_ipc_handle(EventHandle event) = 0;
  virtual EventHandle open_event_ipc_handle(const std::string& handle) = 0;

  // Memory. Device allocations are stream-ordered: usable on `stream` at once, freed after its prior work.
  virtual void* allocate_device(std::size_t bytes, int device, StreamHandle stream) = 0;
  virtual void free_device(void* pointer, StreamHandle stream) noexcept = 0;
  virtual void* allocate_pinned(std::size_t bytes) = 0;
  virtual void free_pinned(void* pointer) noexcept = 0;
  virtual void register_host(void* pointer, std::size_t bytes) = 0;
  virtual void unregister_host(void* pointer) = 0;
  virtual bool is_pinned(const void* pointer) = 0;
  // The device whose memory `pointer` points into, or -1 for host or unknown memory.
  virtual int pointer_device(const void* pointer) = 0;
  virtual void copy_async(void* destination, const void* source, std::size_t bytes, StreamHandle stream) = 0;
  virtual void memset_async(void* destination, int value, std::size_t bytes, StreamHandle stream) = 0;

  // Built-in kernels. `pattern` holds `pattern_bytes` (1, 2, 4, 8 or 16) bytes repeated `count` times.
  virtual void fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
                    StreamHandle stream) = 0;
  // Each of `blocks` blocks busy-waits `nanoseconds`; when start_time is given, block 0 writes the device
  // clock (ns) at its start there.
  virtual void spin(std::uint64_t nanoseconds, unsigned blocks, std::uint64_t* start_time, StreamHandle stream) = 0;
  // Runtime compilation and launch of user kernels. compile() throws CompileError with the compiler's
  // log; `name_expression` is an extern "C" name or a C++ name expression such as "scale<float>".
  virtual CompiledKernel compile(const std::string& source, const std::string& name_expression,
                                 const std::vector<std::string>& options, int device) = 0;
  virtual ModuleHandle load_module(const std::string& binary, int device) = 0;
  virtual void unload_module(ModuleHandle module) noexcept = 0;
  virtual KernelHandle get_kernel(ModuleHandle module, const std::string& lowered_name) = 0;
  // The size in bytes of each of the kernel's parameters, in order.
  virtual std::vector<std::size_t> kernel_parameter_sizes(KernelHandle kernel) = 0;
  // `arguments` points at one value per parameter, of that parameter's size.
  virtual void launch_kernel(KernelHandle kernel, Dim3 grid, Dim3 block, std::size_t shared_bytes, void** arguments,
                             StreamHandle stream) = 0;

  // Element-wise arithmetic (see arithmetic.hpp for the rounding every backend keeps).
  virtual void arithmetic(const Arithmetic& operation, StreamHandle stream) = 0;
  // *out = the sum of x[0..count), in sum_type(type); deterministic for a given count.
  virtual void sum(void* out, const void* x, std::size_t count, NumericType type, StreamHandle stream) = 0;
};

// The process-wide backend, chosen once, at first use: CUWEAVE_BACKEND=cuda|sim|auto (default auto:
// CUDA when a GPU is usable, else the simulator), unless select_backend() chose before.
Backend& backend();
// Chooses the backend by name ("cuda", "sim" or "auto") before first use. Choosing again is allowed
// only for the same backend; once objects exist their backend cannot change.
void select_backend(const std::string& name);
// The backends themselves (defined in csrc/cuda and csrc/sim).
Backend& cuda_backend();
Backend& sim_backend();

}  // namespace cuweave
