#include "sim/sim_kernels.hpp"

#include <chrono>
#include <cstring>
#include <thread>
#include <type_traits>

namespace cuweave::sim {

namespace {

template <typename T>
T wrap_multiply(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename T>
T wrap_plus(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
void run_typed_arithmetic(const Arithmetic& a, T alpha) {
  auto* out = static_cast<T*>(a.out);
  const auto* x = static_cast<const T*>(a.x);
  const auto* y = static_cast<const T*>(a.y);
  for (std::size_t i = 0; i < a.count; ++i) {
    switch (a.op) {
      case ArithmeticOp::Scale: out[i] = wrap_multiply(alpha, x[i]); break;
      case ArithmeticOp::Axpy: out[i] = wrap_plus(wrap_multiply(alpha, x[i]), y[i]); break;
      case ArithmeticOp::Add: out[i] = wrap_plus(x[i], y[i]); break;
      case ArithmeticOp::AddScalar: out[i] = wrap_plus(x[i], alpha); break;
      case ArithmeticOp::Multiply: out[i] = wrap_multiply(x[i], y[i]); break;
    }
  }
}

template <typename T, typename Acc>
Acc accumulate(const void* x, std::size_t count) {
  Acc total = 0;
  const auto* in = static_cast<const T*>(x);
  for (std::size_t i = 0; i < count; ++i) total = wrap_plus(total, static_cast<Acc>(in[i]));
  return total;
}

}  // namespace

std::size_t element_bytes(NumericType type) {
  return type == NumericType::Float32 || type == NumericType::Int32 ? 4 : 8;
}

void run_fill(void* destination, std::size_t count, const std::vector<unsigned char>& pattern) {
  auto* out = static_cast<unsigned char*>(destination);
  for (std::size_t i = 0; i < count; ++i) std::memcpy(out + i * pattern.size(), pattern.data(), pattern.size());
}

void run_copy_strided(const StridedCopy& copy) {
  const std::size_t count = copy.count();
  if (count == 0) return;
  // An odometer over the indices, innermost first: each step adds one stride and, at a carry, takes back the
  // strides the finished dimension added. Offsets, not pointers: midway they may point outside the allocation.
  std::int64_t index[StridedCopy::kMaxDims] = {};
  std::int64_t from = 0, to = 0;
  const auto* source = static_cast<const unsigned char*>(copy.source);
  auto* destination = static_cast<unsigned char*>(copy.destination);
  for (std::size_t i = 0; i < count; ++i) {
    std::memcpy(destination + to, source + from, copy.itemsize);
    for (int d = copy.ndim - 1; d >= 0; --d) {
      from += copy.source_strides[d];
      to += copy.destination_strides[d];
      if (++index[d] < copy.shape[d]) break;
      index[d] = 0;
      from -= copy.shape[d] * copy.source_strides[d];
      to -= copy.shape[d] * copy.destination_strides[d];
    }
  }
}

void run_arithmetic(const Arithmetic& operation) {
  switch (operation.type) {
    case NumericType::Float32: run_typed_arithmetic<float>(operation, static_cast<float>(operation.alpha.real)); break;
    case NumericType::Float64: run_typed_arithmetic<double>(operation, operation.alpha.real); break;
    case NumericType::Int32:
      run_typed_arithmetic<std::int32_t>(operation, static_cast<std::int32_t>(operation.alpha.integer));
      break;
    case NumericType::Int64: run_typed_arithmetic<std::int64_t>(operation, operation.alpha.integer); break;
  }
}

SumPartial run_sum_partials(const void* x, std::size_t count, NumericType type) {
  SumPartial partial;
  switch (type) {
    case NumericType::Float32: partial.real = accumulate<float, double>(x, count); break;
    case NumericType::Float64: partial.real = accumulate<double, double>(x, count); break;
    case NumericType::Int32: partial.integer = accumulate<std::int32_t, std::int64_t>(x, count); break;
    case NumericType::Int64: partial.integer = accumulate<std::int64_t, std::int64_t>(x, count); break;
  }
  return partial;
}

void run_sum_final(void* out, const SumPartial& partial, NumericType type) {
  switch (type) {
    case NumericType::Float32: *static_cast<float*>(out) = static_cast<float>(partial.real); break;
    case NumericType::Float64: *static_cast<double*>(out) = partial.real; break;
    case NumericType::Int32:
    case NumericType::Int64: *static_cast<std::int64_t*>(out) = partial.integer; break;
  }
}

std::uint64_t host_clock_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

void run_spin(std::uint64_t nanoseconds, std::uint64_t* start_time, bool take_time) {
  if (start_time) *start_time = host_clock_ns();
  if (take_time) std::this_thread::sleep_for(std::chrono::nanoseconds(nanoseconds));
}

}  // namespace cuweave::sim
