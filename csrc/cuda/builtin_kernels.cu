#include "cuda/builtin_kernels.hpp"

#include <cuda.h>

#include <array>
#include <atomic>
#include <cstring>
#include <type_traits>

#include "cuda/driver_api.hpp"
#include "cuda/own_launch.hpp"
#include "cuda/own_modules.hpp"

namespace cuweave::cuda {

namespace {

// Note [Built-in kernels through the driver]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A <<<>>> launch is a cudaLaunchKernel, which looks up the kernel's CUfunction for the current context on every
// call and then calls cuLaunchKernel: in raw C++ on an H200, 3.980 us per <<<>>> launch against 3.744 us through
// cuLaunchKernel (tools/probes/driver_vs_runtime_cost.cu). So each built-in kernel's CUfunction is looked up once
// per context (cudaGetFuncBySymbol) and launched through the driver, as cuweave.compile's kernels are (Note [Kernels
// through the driver], Note [cuweave's launches beside the launch watch]); its module is noted as cuweave's, for a
// launch a trace's callbacks see all the same.
// The parameters are the kernel's own types, so that each value handed to the driver has the size it reads.
template <auto Kernel>
struct Builtin;

// A built-in kernel's function in one context.
struct LoadedFunction {
  std::atomic<CUcontext> context{nullptr};
  std::atomic<CUfunction> function{nullptr};
};

template <typename... Parameters, void (*Kernel)(Parameters...)>
struct Builtin<Kernel> {
  // The kernel's CUfunction in the current context, looked up (and loaded) at its first use there. Found again by
  // the context, which the driver reads from the thread: the runtime's cudaGetDevice cost each launch about 0.14 us
  // (raw C++, one H200: tools/probes/cupti_launch_cost.cu). A context is its device's primary one, which lives as
  // long as the process: cuweave resets no device.
  static cudaError_t function(CUfunction* found) {
    static std::array<LoadedFunction, 64> per_context{};
    static std::atomic<std::size_t> next_slot{0};
    const auto known = [](CUcontext context) -> CUfunction {
      for (const LoadedFunction& loaded : per_context) {
        const CUcontext its = loaded.context.load(std::memory_order_acquire);
        if (its == nullptr) break;  // the rest are unused (or being filled: looked up again meanwhile)
        if (its == context) return loaded.function.load(std::memory_order_relaxed);
      }
      return nullptr;
    };
    CUcontext context = nullptr;
    if (driver().context_get_current(&context) == CUDA_SUCCESS && context != nullptr) {
      *found = known(context);
      if (*found != nullptr) return cudaSuccess;
    }
    cudaFunction_t looked_up = nullptr;  // (makes the runtime's context current on a thread that has none)
    const cudaError_t status = cudaGetFuncBySymbol(&looked_up, reinterpret_cast<const void*>(Kernel));
    if (status != cudaSuccess) return status;
    *found = reinterpret_cast<CUfunction>(looked_up);
    if (driver().context_get_current(&context) != CUDA_SUCCESS || context == nullptr || known(context) != nullptr) {
      return cudaSuccess;  // a thread's first launch in a context another thread has met
    }
    CUmodule module = nullptr;
    if (driver().function_module(&module, *found) == CUDA_SUCCESS && module != nullptr) note_module_loaded(module);
    const std::size_t slot = next_slot.fetch_add(1, std::memory_order_relaxed);
    if (slot < per_context.size()) {  // past the last, looked up at each launch
      per_context[slot].function.store(*found, std::memory_order_relaxed);
      per_context[slot].context.store(context, std::memory_order_release);
    }
    return cudaSuccess;
  }

  static cudaError_t launch(dim3 grid, dim3 block, cudaStream_t stream, Parameters... arguments) {
    OwnLaunch launch;
    if (const cudaError_t status = function(&launch.function); status != cudaSuccess) return status;
    launch.grid = {grid.x, grid.y, grid.z};
    launch.block = {block.x, block.y, block.z};
    launch.stream = reinterpret_cast<CUstream>(stream);
    void* values[] = {static_cast<void*>(&arguments)...};
    // The driver's codes equal the runtime's for a launch.
    return static_cast<cudaError_t>(launch_own_kernel(launch, values));
  }
};

struct Bytes16 {  // complex128 elements need only 8-byte alignment
  unsigned long long low, high;
};

template <typename T>
__global__ void fill_kernel(T* destination, std::size_t count, T value) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    destination[i] = value;
  }
}

__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void spin_kernel(std::uint64_t nanoseconds, std::uint64_t* start_time) {
  const std::uint64_t start = global_timer_ns();
  if (start_time != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *start_time = start;
  while (global_timer_ns() - start < nanoseconds) {
    __nanosleep(500);
  }
}

// Sets a conditional node's condition from one element (evaluate_condition, the simulator's rule too).
// One thread: CUDA leaves racing cudaGraphSetConditional calls undefined.
__global__ void set_condition_kernel(cudaGraphConditionalHandle condition, const void* element, NumericType type,
                                     Comparison comparison, Scalar threshold) {
  cudaGraphSetConditional(condition, evaluate_condition(element, type, comparison, threshold));
}

template <typename T>
cudaError_t launch_fill_as(void* destination, std::size_t count, const void* pattern, cudaStream_t stream) {
  T value;
  std::memcpy(&value, pattern, sizeof(T));
  constexpr unsigned kThreads = 256;
  const std::size_t wanted = (count + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 8192 ? wanted : 8192);
  return Builtin<fill_kernel<T>>::launch(blocks, kThreads, stream, static_cast<T*>(destination), count, value);
}

// Rounded exactly once per operation, like NumPy: the _rn intrinsics keep the compiler from fusing a
// product and a sum into one FMA. Integers wrap around (computed unsigned, where wrapping is defined).
template <typename T>
__device__ __forceinline__ T multiply(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}
template <>
__device__ __forceinline__ float multiply(float a, float b) { return __fmul_rn(a, b); }
template <>
__device__ __forceinline__ double multiply(double a, double b) { return __dmul_rn(a, b); }

template <typename T>
__device__ __forceinline__ T plus(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <>
__device__ __forceinline__ float plus(float a, float b) { return __fadd_rn(a, b); }
template <>
__device__ __forceinline__ double plus(double a, double b) { return __dadd_rn(a, b); }

template <typename T, ArithmeticOp Op>
__global__ void arithmetic_kernel(T* out, const T* x, const T* y, T alpha, std::size_t count) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    if constexpr (Op == ArithmeticOp::Scale) out[i] = multiply(alpha, x[i]);
    if constexpr (Op == ArithmeticOp::Axpy) out[i] = plus(multiply(alpha, x[i]), y[i]);
    if constexpr (Op == ArithmeticOp::Add) out[i] = plus(x[i], y[i]);
    if constexpr (Op == ArithmeticOp::AddScalar) out[i] = plus(x[i], alpha);
    if constexpr (Op == ArithmeticOp::Multiply) out[i] = multiply(x[i], y[i]);
  }
}

unsigned grid_for(std::size_t count, unsigned threads, unsigned most) {
  const std::size_t wanted = (count + threads - 1) / threads;
  return static_cast<unsigned>(wanted < most ? (wanted == 0 ? 1 : wanted) : most);
}

template <typename T>
cudaError_t launch_arithmetic_as(const Arithmetic& a, T alpha, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  const unsigned blocks = grid_for(a.count, kThreads, 8192);
  auto* out = static_cast<T*>(a.out);
  const auto* x = static_cast<const T*>(a.x);
  const auto* y = static_cast<const T*>(a.y);
  switch (a.op) {
    case ArithmeticOp::Scale: return Builtin<arithmetic_kernel<T, ArithmeticOp::Scale>>::launch(blocks, kThreads, stream, out, x, y, alpha, a.count);
    case ArithmeticOp::Axpy: return Builtin<arithmetic_kernel<T, ArithmeticOp::Axpy>>::launch(blocks, kThreads, stream, out, x, y, alpha, a.count);
    case ArithmeticOp::Add: return Builtin<arithmetic_kernel<T, ArithmeticOp::Add>>::launch(blocks, kThreads, stream, out, x, y, alpha, a.count);
    case ArithmeticOp::AddScalar: return Builtin<arithmetic_kernel<T, ArithmeticOp::AddScalar>>::launch(blocks, kThreads, stream, out, x, y, alpha, a.count);
    case ArithmeticOp::Multiply: return Builtin<arithmetic_kernel<T, ArithmeticOp::Multiply>>::launch(blocks, kThreads, stream, out, x, y, alpha, a.count);
  }
  return cudaErrorInvalidValue;
}

// Sums: each block reduces a grid-stride share into one partial (double for floats, int64 for integers,
// wrapping), then one block adds the partials in a fixed order: the same result for the same input.
constexpr unsigned kSumThreads = 256;
constexpr unsigned kMostSumBlocks = 1024;

template <typename T, typename Acc>
__global__ void partial_sums_kernel(const T* x, std::size_t count, Acc* partial) {
  __shared__ Acc shared[kSumThreads];
  Acc acc = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    acc = plus(acc, static_cast<Acc>(x[i]));
  }
  shared[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned width = kSumThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) shared[threadIdx.x] = plus(shared[threadIdx.x], shared[threadIdx.x + width]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = shared[0];
}

template <typename Acc, typename Out>
__global__ void final_sum_kernel(const Acc* partial, unsigned count, Out* out) {
  __shared__ Acc shared[kSumThreads];
  Acc acc = 0;
  for (unsigned i = threadIdx.x; i < count; i += kSumThreads) acc = plus(acc, partial[i]);
  shared[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned width = kSumThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) shared[threadIdx.x] = plus(shared[threadIdx.x], shared[threadIdx.x + width]);
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = static_cast<Out>(shared[0]);
}

template <typename T, typename Acc, typename Out>
cudaError_t launch_sum_as(void* out, const void* x, std::size_t count, void* scratch, cudaStream_t stream) {
  const unsigned blocks = grid_for(count, kSumThreads, kMostSumBlocks);
  auto* partial = static_cast<Acc*>(scratch);
  const cudaError_t partials =
      Builtin<partial_sums_kernel<T, Acc>>::launch(blocks, kSumThreads, stream, static_cast<const T*>(x), count, partial);
  if (partials != cudaSuccess) return partials;
  return Builtin<final_sum_kernel<Acc, Out>>::launch(1, kSumThreads, stream, partial, blocks, static_cast<Out*>(out));
}

}  // namespace

cudaError_t launch_arithmetic(const Arithmetic& operation, cudaStream_t stream) {
  switch (operation.type) {
    case NumericType::Float32: return launch_arithmetic_as<float>(operation, static_cast<float>(operation.alpha.real), stream);
    case NumericType::Float64: return launch_arithmetic_as<double>(operation, operation.alpha.real, stream);
    case NumericType::Int32:
      return launch_arithmetic_as<std::int32_t>(operation, static_cast<std::int32_t>(operation.alpha.integer), stream);
    case NumericType::Int64: return launch_arithmetic_as<std::int64_t>(operation, operation.alpha.integer, stream);
  }
  return cudaErrorInvalidValue;
}

std::size_t sum_scratch_elements(std::size_t count) { return grid_for(count, kSumThreads, kMostSumBlocks); }

cudaError_t launch_sum(void* out, const void* x, std::size_t count, NumericType type, void* scratch,
                       cudaStream_t stream) {
  switch (type) {
    case NumericType::Float32: return launch_sum_as<float, double, float>(out, x, count, scratch, stream);
    case NumericType::Float64: return launch_sum_as<double, double, double>(out, x, count, scratch, stream);
    case NumericType::Int32: return launch_sum_as<std::int32_t, std::int64_t, std::int64_t>(out, x, count, scratch, stream);
    case NumericType::Int64: return launch_sum_as<std::int64_t, std::int64_t, std::int64_t>(out, x, count, scratch, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_set_condition(ConditionHandle condition, const ConditionRule& rule, cudaStream_t stream) {
  return Builtin<set_condition_kernel>::launch(1, 1, stream, condition, rule.element, rule.type, rule.comparison,
                                               rule.threshold);
}

cudaError_t add_set_condition_kernel_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                          std::size_t count, ConditionHandle condition, const ConditionRule& rule) {
  cudaGraphConditionalHandle handle = condition;
  const void* element = rule.element;
  NumericType type = rule.type;
  Comparison comparison = rule.comparison;
  Scalar threshold = rule.threshold;
  void* arguments[] = {&handle, &element, &type, &comparison, &threshold};  // copied by the call
  cudaKernelNodeParams params{};
  params.func = reinterpret_cast<void*>(&set_condition_kernel);
  params.gridDim = dim3(1);
  params.blockDim = dim3(1);
  params.kernelParams = arguments;
  return cudaGraphAddKernelNode(node, graph, dependencies, count, &params);
}

cudaError_t launch_fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
                        cudaStream_t stream) {
  switch (pattern_bytes) {
    case 1: return launch_fill_as<unsigned char>(destination, count, pattern, stream);
    case 2: return launch_fill_as<unsigned short>(destination, count, pattern, stream);
    case 4: return launch_fill_as<unsigned int>(destination, count, pattern, stream);
    case 8: return launch_fill_as<unsigned long long>(destination, count, pattern, stream);
    case 16: return launch_fill_as<Bytes16>(destination, count, pattern, stream);
    default: return cudaErrorInvalidValue;
  }
}

namespace {

template <typename T>
__global__ void copy_kernel(T* destination, const T* source, std::size_t count) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    destination[i] = source[i];
  }
}

template <typename T>
cudaError_t launch_copy_as(void* destination, const void* source, std::size_t bytes, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  const std::size_t count = bytes / sizeof(T);
  return Builtin<copy_kernel<T>>::launch(grid_for(count, kThreads, 1024), kThreads, stream, static_cast<T*>(destination),
                                         static_cast<const T*>(source), count);
}

}  // namespace

cudaError_t launch_copy(void* destination, const void* source, std::size_t bytes, cudaStream_t stream) {
  // The widest element that both addresses and the size are multiples of: 16-byte accesses move the most
  // per PCIe transaction when one side is host memory.
  const auto alignment = reinterpret_cast<std::uintptr_t>(destination) | reinterpret_cast<std::uintptr_t>(source) | bytes;
  if (alignment % 16 == 0) return launch_copy_as<Bytes16>(destination, source, bytes, stream);
  if (alignment % 8 == 0) return launch_copy_as<unsigned long long>(destination, source, bytes, stream);
  if (alignment % 4 == 0) return launch_copy_as<unsigned int>(destination, source, bytes, stream);
  return launch_copy_as<unsigned char>(destination, source, bytes, stream);
}

namespace {

// Each element is itemsize / sizeof(Word) words: the widest word both sides' every element is aligned to, so that
// views at any byte offset copy correctly; 16-byte elements (complex128) move as two 8-byte words, since NumPy
// aligns them to 8 only.
template <typename Word>
__global__ void copy_strided_kernel(StridedCopy copy, std::size_t count) {
  const std::size_t words = copy.itemsize / sizeof(Word);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    std::int64_t source_offset = 0, destination_offset = 0;
    std::size_t rest = i;
    for (int d = copy.ndim - 1; d >= 0; --d) {  // C order: the innermost index varies fastest
      const auto extent = static_cast<std::size_t>(copy.shape[d]);
      const auto index = static_cast<std::int64_t>(rest % extent);
      rest /= extent;
      source_offset += index * copy.source_strides[d];
      destination_offset += index * copy.destination_strides[d];
    }
    const auto* from = reinterpret_cast<const Word*>(static_cast<const char*>(copy.source) + source_offset);
    auto* to = reinterpret_cast<Word*>(static_cast<char*>(copy.destination) + destination_offset);
    for (std::size_t w = 0; w < words; ++w) to[w] = from[w];
  }
}

template <typename Word>
cudaError_t launch_copy_strided_as(const StridedCopy& copy, std::size_t count, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  return Builtin<copy_strided_kernel<Word>>::launch(grid_for(count, kThreads, 8192), kThreads, stream, copy, count);
}

}  // namespace

cudaError_t launch_copy_strided(const StridedCopy& copy, cudaStream_t stream) {
  const std::size_t itemsize = copy.itemsize;
  const bool known_size = itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8 || itemsize == 16;
  if (!known_size || copy.ndim < 0 || copy.ndim > StridedCopy::kMaxDims) return cudaErrorInvalidValue;
  for (int d = 0; d < copy.ndim; ++d) {
    if (copy.shape[d] < 0) return cudaErrorInvalidValue;
  }
  const std::size_t count = copy.count();
  if (count == 0) return cudaSuccess;
  // Every element's address is its base plus a sum of strides (of the dimensions it moves along).
  auto alignment = reinterpret_cast<std::uintptr_t>(copy.destination) | reinterpret_cast<std::uintptr_t>(copy.source);
  for (int d = 0; d < copy.ndim; ++d) {
    if (copy.shape[d] > 1) {
      alignment |= static_cast<std::uintptr_t>(copy.source_strides[d]) |
                   static_cast<std::uintptr_t>(copy.destination_strides[d]);
    }
  }
  const std::size_t word = itemsize < 8 ? itemsize : 8;
  if (word >= 8 && alignment % 8 == 0) return launch_copy_strided_as<unsigned long long>(copy, count, stream);
  if (word >= 4 && alignment % 4 == 0) return launch_copy_strided_as<unsigned int>(copy, count, stream);
  if (word >= 2 && alignment % 2 == 0) return launch_copy_strided_as<unsigned short>(copy, count, stream);
  return launch_copy_strided_as<unsigned char>(copy, count, stream);
}

cudaError_t launch_spin(std::uint64_t nanoseconds, unsigned blocks, std::uint64_t* start_time,
                        cudaStream_t stream) {
  return Builtin<spin_kernel>::launch(blocks, 1, stream, nanoseconds, start_time);
}

namespace {

// cudaFuncGetAttributes loads a kernel that lazy loading has not loaded yet; its CUfunction is looked up too.
template <auto Kernel>
cudaError_t load() {
  cudaFuncAttributes attributes{};
  const cudaError_t status = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(Kernel));
  if (status != cudaSuccess) return status;
  CUfunction function = nullptr;
  return Builtin<Kernel>::function(&function);
}

template <typename T>
cudaError_t load_arithmetic() {
  for (cudaError_t status : {load<arithmetic_kernel<T, ArithmeticOp::Scale>>(), load<arithmetic_kernel<T, ArithmeticOp::Axpy>>(),
                             load<arithmetic_kernel<T, ArithmeticOp::Add>>(), load<arithmetic_kernel<T, ArithmeticOp::AddScalar>>(),
                             load<arithmetic_kernel<T, ArithmeticOp::Multiply>>()}) {
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

}  // namespace

// Every kernel the launchers above can launch: keep in step with them.
cudaError_t load_builtin_kernels() {
  for (cudaError_t status :
       {load<fill_kernel<unsigned char>>(), load<fill_kernel<unsigned short>>(), load<fill_kernel<unsigned int>>(),
        load<fill_kernel<unsigned long long>>(), load<fill_kernel<Bytes16>>(), load<spin_kernel>(),
        load_arithmetic<float>(), load_arithmetic<double>(), load_arithmetic<std::int32_t>(),
        load_arithmetic<std::int64_t>(), load<partial_sums_kernel<float, double>>(),
        load<partial_sums_kernel<double, double>>(), load<partial_sums_kernel<std::int32_t, std::int64_t>>(),
        load<partial_sums_kernel<std::int64_t, std::int64_t>>(), load<final_sum_kernel<double, float>>(),
        load<final_sum_kernel<double, double>>(), load<final_sum_kernel<std::int64_t, std::int64_t>>(),
        load<set_condition_kernel>(), load<copy_kernel<Bytes16>>(), load<copy_kernel<unsigned long long>>(),
        load<copy_kernel<unsigned int>>(), load<copy_kernel<unsigned char>>(),
        load<copy_strided_kernel<unsigned long long>>(), load<copy_strided_kernel<unsigned int>>(),
        load<copy_strided_kernel<unsigned short>>(), load<copy_strided_kernel<unsigned char>>()}) {
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

}  // namespace cuweave::cuda
