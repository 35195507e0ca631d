// Element-wise arithmetic and reductions for the built-in kernels, described without CUDA so that every
// backend implements the same operations with the same rounding.
//
// Rounding: each operation rounds exactly as NumPy does in the array's own type (a product, then a sum,
// never a fused multiply-add), so results equal NumPy's bit for bit. Integers wrap around as in NumPy.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuweave {

enum class NumericType { Float32, Float64, Int32, Int64 };

// A scalar operand: `real` for float types, `integer` for integer types (exact beyond 2^53).
struct Scalar {
  double real = 0;
  std::int64_t integer = 0;
};

enum class ArithmeticOp {
  Scale,      // out = alpha * x
  Axpy,       // out = alpha * x + y
  Add,        // out = x + y
  AddScalar,  // out = x + alpha
  Multiply,   // out = x * y (by a scalar: Scale)
};

// What traces and sanitizer reports call an operation.
inline const char* arithmetic_name(ArithmeticOp op) noexcept {
  switch (op) {
    case ArithmeticOp::Scale: return "scale";
    case ArithmeticOp::Axpy: return "axpy";
    case ArithmeticOp::Add: return "add";
    case ArithmeticOp::AddScalar: return "add_scalar";
    case ArithmeticOp::Multiply: return "multiply";
  }
  return "arithmetic";
}

// What sanitizer reports call a built-in arithmetic kernel's launch.
inline const char* arithmetic_operation_name(ArithmeticOp op) noexcept {
  switch (op) {
    case ArithmeticOp::Scale: return "ops.scale";
    case ArithmeticOp::Axpy: return "ops.axpy";
    case ArithmeticOp::Add: return "ops.add";
    case ArithmeticOp::AddScalar: return "ops.add_scalar";
    case ArithmeticOp::Multiply: return "ops.multiply";
  }
  return "ops.arithmetic";
}

struct Arithmetic {
  ArithmeticOp op = ArithmeticOp::Add;
  NumericType type = NumericType::Float32;
  void* out = nullptr;
  const void* x = nullptr;
  const void* y = nullptr;  // Axpy, Add and Multiply only
  Scalar alpha;             // Scale, Axpy and AddScalar
  std::size_t count = 0;
};

// The type a sum of `type` is returned in: integers widen to int64, as NumPy's sum does on 64-bit Linux.
inline NumericType sum_type(NumericType type) {
  return type == NumericType::Int32 ? NumericType::Int64 : type;
}

}  // namespace cuweave
