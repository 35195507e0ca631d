// Conditions of conditional graph nodes (if, while, switch), computed on the device from one element
// of device memory, described without CUDA so that every backend evaluates them alike: the CUDA backend's
// built-in kernel and the simulator call the same evaluate_condition().
#pragma once

#include <cstdint>

#include "cuweave/arithmetic.hpp"

#if defined(__CUDACC__)
#define CUWEAVE_HOST_DEVICE __host__ __device__
#else
#define CUWEAVE_HOST_DEVICE
#endif

namespace cuweave {

// The handle of a condition in a graph (CUDA's cudaGraphConditionalHandle); 0 is never a handle.
using ConditionHandle = std::uint64_t;

enum class ConditionalKind { If, While, Switch };

// "if", "while", "switch": how errors, labels and the Python API name the kinds.
inline const char* to_string(ConditionalKind kind) noexcept {
  switch (kind) {
    case ConditionalKind::If: return "if";
    case ConditionalKind::While: return "while";
    case ConditionalKind::Switch: return "switch";
  }
  return "conditional";
}

// How the element becomes the condition's value. Value: the element itself, as the case index of a
// switch (a negative, fractional-below-zero, NaN or too large value selects no case). The comparisons:
// 1 when `element <op> threshold` holds, else 0.
enum class Comparison { Value, Equal, NotEqual, Greater, GreaterEqual, Less, LessEqual };

// CUDA's rule for a conditional node's body count, and the error text when it is broken.
inline bool valid_body_count(ConditionalKind kind, unsigned bodies) {
  return kind == ConditionalKind::While ? bodies == 1
         : kind == ConditionalKind::If  ? bodies == 1 || bodies == 2
                                        : bodies > 0;
}
inline constexpr const char* kBodyCounts = "a while node has 1 body, an if node 1 or 2, a switch node at least 1";
// Ends the errors for what a body may not hold, on every backend and for both ways of building a graph.
inline constexpr const char* kNotInABody =
    " cannot be part of a conditional node's body (CUDA allows kernels, copies, memsets, empty nodes, child graphs "
    "and conditional nodes there)";

// What a switch's Value is when the element names no case (CUDA runs no body for a value >= the case count).
constexpr unsigned kNoCase = 0xFFFFFFFFu;

struct ConditionRule {
  const void* element = nullptr;  // one element of `type` in device memory
  NumericType type = NumericType::Float32;
  Comparison comparison = Comparison::NotEqual;
  Scalar threshold;  // `real` for float types, `integer` for integer types
};

namespace detail {
template <typename T>
CUWEAVE_HOST_DEVICE unsigned compare(T value, T threshold, Comparison comparison) {
  switch (comparison) {
    case Comparison::Equal: return value == threshold;
    case Comparison::NotEqual: return value != threshold;
    case Comparison::Greater: return value > threshold;
    case Comparison::GreaterEqual: return value >= threshold;
    case Comparison::Less: return value < threshold;
    case Comparison::LessEqual: return value <= threshold;
    case Comparison::Value: break;
  }
  return 0;
}
CUWEAVE_HOST_DEVICE inline unsigned case_of(double value) {
  // NaN fails both tests; 4294967295.0 itself is kNoCase.
  return value >= 0.0 && value < 4294967295.0 ? static_cast<unsigned>(value) : kNoCase;
}
CUWEAVE_HOST_DEVICE inline unsigned case_of(std::int64_t value) {
  return value >= 0 && value < static_cast<std::int64_t>(kNoCase) ? static_cast<unsigned>(value) : kNoCase;
}
}  // namespace detail

// The condition's value for the element at `element` (read by the caller from device memory).
CUWEAVE_HOST_DEVICE inline unsigned evaluate_condition(const void* element, NumericType type, Comparison comparison,
                                                       Scalar threshold) {
  switch (type) {
    case NumericType::Float32: {
      const float value = *static_cast<const float*>(element);
      if (comparison == Comparison::Value) return detail::case_of(static_cast<double>(value));
      return detail::compare(value, static_cast<float>(threshold.real), comparison);
    }
    case NumericType::Float64: {
      const double value = *static_cast<const double*>(element);
      if (comparison == Comparison::Value) return detail::case_of(value);
      return detail::compare(value, threshold.real, comparison);
    }
    case NumericType::Int32: {
      const std::int64_t value = *static_cast<const std::int32_t*>(element);
      if (comparison == Comparison::Value) return detail::case_of(value);
      return detail::compare(value, threshold.integer, comparison);
    }
    case NumericType::Int64: {
      const std::int64_t value = *static_cast<const std::int64_t*>(element);
      if (comparison == Comparison::Value) return detail::case_of(value);
      return detail::compare(value, threshold.integer, comparison);
    }
  }
  return 0;
}

}  // namespace cuweave
