// The simulator's built-in kernels, on host threads (KernelBackend); compiled CUDA kernels need a GPU.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuweave/backend.hpp"
#include "sim/capture_book.hpp"
#include "sim/device_access.hpp"
#include "sim/fault_plan.hpp"
#include "sim/freed_memory.hpp"
#include "sim/handles.hpp"
#include "sim/memory_registry.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_error.hpp"
#include "sim/sim_facets.hpp"
#include "sim/sim_graph.hpp"
#include "sim/sim_kernels.hpp"
#include "sim/sim_tracer.hpp"

namespace cuweave::sim {

namespace {

class SimKernelBackend final : public KernelBackend {
 public:
  SimKernelBackend(Handles& handles, Scheduler& scheduler, CaptureBook& captures, DeviceAccess& access,
                   MemoryRegistry& memory, FaultPlan& faults)
      : handles_(handles), scheduler_(scheduler), captures_(captures), access_(access), memory_(memory),
        faults_(faults) {}

  void fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
            StreamHandle handle) override {
    memory_.within_range(destination, count * pattern_bytes, "fill kernel");
    std::vector<unsigned char> value(static_cast<const unsigned char*>(pattern),
                                     static_cast<const unsigned char*>(pattern) + pattern_bytes);
    SimStream* stream = handles_.resolve_stream(handle, "cudaLaunchKernel");
    captures_.capture_or_run(
        stream, "cudaLaunchKernel", [&] { return chain(FillKernel{destination, count, value}); },
        [&] {
          launch(stream, "fill", {destination}, [destination, count, value] { run_fill(destination, count, value); });
        });
  }

  void copy_strided(const StridedCopy& copy, StreamHandle handle) override {
    const std::size_t itemsize = copy.itemsize;
    if (itemsize != 1 && itemsize != 2 && itemsize != 4 && itemsize != 8 && itemsize != 16) {
      fail("cudaLaunchKernel", kInvalidValue,
           "copy_strided copies elements of 1, 2, 4, 8 or 16 bytes, not " + std::to_string(itemsize));
    }
    if (copy.ndim < 0 || copy.ndim > StridedCopy::kMaxDims) {
      fail("cudaLaunchKernel", kInvalidValue,
           "copy_strided takes 0 to " + std::to_string(StridedCopy::kMaxDims) + " dimensions, not " +
               std::to_string(copy.ndim));
    }
    for (int d = 0; d < copy.ndim; ++d) {
      if (copy.shape[d] < 0) fail("cudaLaunchKernel", kInvalidValue, "copy_strided was given a negative extent");
    }
    if (copy.count() == 0) return;  // as the CUDA backend: nothing launched, nothing captured
    within_extent(copy.source, copy.source_strides, copy);
    within_extent(copy.destination, copy.destination_strides, copy);
    SimStream* stream = handles_.resolve_stream(handle, "cudaLaunchKernel");
    captures_.capture_or_run(
        stream, "cudaLaunchKernel", [&] { return chain(StridedCopyKernel{copy}); },
        [&] {
          launch(stream, "copy_strided", {copy.destination, copy.source}, [copy] { run_copy_strided(copy); });
        });
  }

  CompiledKernel compile(const std::string&, const std::string&, const std::vector<std::string>&, int) override {
    fail_needs_gpu("nvrtcCompileProgram",
                   "runtime-compiled CUDA kernels need the CUDA backend and a GPU: the simulator cannot run CUDA C++. "
                   "On the simulator use the built-in kernels (cuweave.ops)");
  }
  ModuleHandle load_module(const std::string&, int) override {
    fail_needs_gpu("cudaLibraryLoadData", kCompiledKernelsNeedGpu);
  }
  void unload_module(ModuleHandle, int) noexcept override {}
  KernelHandle get_kernel(ModuleHandle, const std::string&) override {
    fail_needs_gpu("cudaLibraryGetKernel", kCompiledKernelsNeedGpu);
  }
  std::vector<std::size_t> kernel_parameter_sizes(KernelHandle) override {
    fail_needs_gpu("cudaFuncGetParamInfo", kCompiledKernelsNeedGpu);
  }
  void launch_kernel(KernelHandle, Dim3, Dim3, std::size_t, void**, StreamHandle, bool) override {
    fail_needs_gpu("cudaLaunchKernel", kCompiledKernelsNeedGpu);
  }

  void arithmetic(const Arithmetic& operation, StreamHandle handle) override {
    const std::size_t bytes = operation.count * element_bytes(operation.type);
    memory_.within_range(operation.out, bytes, "cudaLaunchKernel");
    memory_.within_range(operation.x, bytes, "cudaLaunchKernel");
    if (operation.y) memory_.within_range(operation.y, bytes, "cudaLaunchKernel");
    SimStream* stream = handles_.resolve_stream(handle, "cudaLaunchKernel");
    captures_.capture_or_run(
        stream, "cudaLaunchKernel", [&] { return chain(ArithmeticKernel{operation}); },
        [&] {
          launch(stream, arithmetic_name(operation.op), {operation.out, operation.x, operation.y},
                 [operation] { run_arithmetic(operation); });
        });
  }

  std::size_t sum_scratch_bytes(std::size_t) override { return 0; }  // partial sums live on the host

  void sum(void* out, const void* x, std::size_t count, NumericType type, void*, StreamHandle handle) override {
    memory_.within_range(x, count * element_bytes(type), "cudaLaunchKernel");
    memory_.within_range(out, element_bytes(sum_type(type)), "cudaLaunchKernel");
    SimStream* stream = handles_.resolve_stream(handle, "cudaLaunchKernel");
    captures_.capture_or_run(
        stream, "cudaLaunchKernel",
        [&] {  // two kernels, as the CUDA backend launches them
          return std::vector<NodeParams>{SumPartialsKernel{x, count, type}, SumFinalKernel{out, type}};
        },
        [&] {
          launch(stream, "sum", {out, x},
                 [out, x, count, type] { run_sum_final(out, run_sum_partials(x, count, type), type); });
        });
  }

  void spin(std::uint64_t nanoseconds, unsigned, std::uint64_t* start_time, StreamHandle handle) override {
    SimStream* stream = handles_.resolve_stream(handle, "cudaLaunchKernel");
    captures_.capture_or_run(
        stream, "cudaLaunchKernel", [&] { return chain(SpinKernel{nanoseconds, start_time}); },
        [&] {
          // When exploring schedules nothing takes time: only the order of work matters.
          const bool take_time = !scheduler_.seed().has_value();
          launch(stream, "spin", {start_time}, [=] { run_spin(nanoseconds, start_time, take_time); });
        });
  }

 private:
  // Refuses a strided side some of whose elements lie outside the allocation holding `base`: its extent runs from
  // the lowest element's first byte to the highest element's last (strides may be negative, so either may be base).
  void within_extent(const void* base, const std::int64_t* strides, const StridedCopy& copy) {
    std::int64_t lowest = 0, highest = 0;
    for (int d = 0; d < copy.ndim; ++d) {
      const std::int64_t span = (copy.shape[d] - 1) * strides[d];
      (span < 0 ? lowest : highest) += span;
    }
    const auto* first = static_cast<const unsigned char*>(base) + lowest;
    const std::optional<MemoryRange> range = memory_.find(base);
    if (range && reinterpret_cast<std::uintptr_t>(first) < range->start) {
      fail("cudaLaunchKernel", kInvalidValue, "the access starts before its allocation");
    }
    memory_.within_range(first, static_cast<std::size_t>(highest - lowest) + copy.itemsize, "cudaLaunchKernel");
  }

  // Queues the kernel `kernel` touching `pointers` on `stream`: its fault in its place where it faults as it runs
  // (queued_fault), else `work`, run only while that memory exists (Note [Work on freed memory]).
  void launch(SimStream* stream, const char* kernel, std::initializer_list<const void*> pointers,
              std::function<void()> work) {
    if (queued_fault(stream, kernel, pointers)) return;
    scheduler_.enqueue(stream, faulting_if_freed(memory_, access_, stream->device, pointers, std::move(work)), {}, {},
                       traced(trace::Kind::Kernel, *stream, kernel));
  }

  // Whether a kernel on `stream` reaches every pointer given (null ones are not touched).
  bool kernel_reaches(const SimStream& stream, std::initializer_list<const void*> pointers) const {
    if (handles_.devices() == 1) return true;  // all device memory is the stream's device's
    for (const void* pointer : pointers) {
      if (pointer == nullptr) continue;
      const std::optional<MemoryRange> range = memory_.find(pointer);
      if (range && !access_.kernel_reaches(stream.device, *range)) return false;
    }
    return true;
  }

  // A kernel that touches memory its device cannot reach faults when it runs: the device's context is lost,
  // which the next call on it reports (Note [Simulated device access]).
  void queue_fault(SimStream* stream, const char* kernel, std::string cause = {}) {
    scheduler_.enqueue(stream,
                       [&access = access_, device = stream->device, cause = std::move(cause)] {
                         access.lose_context(device, cause);
                       },
                       {}, {}, traced(trace::Kind::Kernel, *stream, kernel));
  }

  // Whether a launch of `kernel` on `stream`, touching `pointers`, faults as it runs, its fault then queued in its
  // place: by an injected fault (Note [Injected faults], which may also refuse the launch: it throws), or by
  // touching memory its device cannot reach.
  bool queued_fault(SimStream* stream, const char* kernel, std::initializer_list<const void*> pointers) {
    FaultPlan& plan = faults_;
    if (plan.strikes(FaultKind::Launch, "cudaLaunchKernel")) FaultPlan::fail(FaultKind::Launch, "cudaLaunchKernel");
    if (plan.strikes(FaultKind::StickyFault, kernel)) {
      queue_fault(stream, kernel, "faulted as it ran (an injected fault, CUWEAVE_SIM_FAULTS)");
      return true;
    }
    for (const void* pointer : pointers) {
      if (memory_.graph_memory_missing(pointer)) {
        queue_fault(stream, kernel, kGraphMemoryMissing);
        return true;
      }
    }
    if (kernel_reaches(*stream, pointers)) return false;
    queue_fault(stream, kernel);
    return true;
  }

  Handles& handles_;
  Scheduler& scheduler_;
  CaptureBook& captures_;
  DeviceAccess& access_;
  MemoryRegistry& memory_;
  FaultPlan& faults_;
};

}  // namespace

std::unique_ptr<KernelBackend> make_kernel_backend(SimState& sim) {
  return std::make_unique<SimKernelBackend>(sim.handles, sim.scheduler, sim.captures, sim.access,
                                            sim.memory, sim.faults);
}

}  // namespace cuweave::sim
