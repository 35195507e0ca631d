// The built-in strided copy's description, shared by both backends (no CUDA here: the simulator and the core
// include it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuweave {

// An element-wise copy between two strided layouts of the same shape (a gather into contiguous memory, a scatter
// out of it, or any two views): element i of `shape` (C order) goes from source + sum(index_d * source_strides[d])
// to destination + sum(index_d * destination_strides[d]). Strides are in bytes and may be negative or zero.
// Passed by value to the CUDA kernel: keep it trivially copyable.
struct StridedCopy {
  static constexpr int kMaxDims = 8;
  void* destination = nullptr;
  const void* source = nullptr;
  std::size_t itemsize = 0;  // 1, 2, 4, 8 or 16
  int ndim = 0;              // 0..kMaxDims (0: one element)
  std::int64_t shape[kMaxDims] = {};
  std::int64_t source_strides[kMaxDims] = {};
  std::int64_t destination_strides[kMaxDims] = {};

  // The product of shape (1 for ndim 0). Reads no further than kMaxDims, so that it is safe to ask before the
  // backend has refused an ndim out of range.
  std::size_t count() const noexcept {
    std::size_t product = 1;
    for (int d = 0; d < ndim && d < kMaxDims; ++d) product *= static_cast<std::size_t>(shape[d]);
    return product;
  }
};

}  // namespace cuweave
