// Note [Another library's kernel arguments]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// What a launch of another library's kernel touches, read from the bytes of its arguments as the launch passes
// them (CUPTI's view of cuLaunchKernel). The kernel's source says which parameters are arrays, which of them it
// writes, and their element types (cuweave/_cupy_hooks.py reads the sources CuPy compiles); an array parameter is
// CuPy's CArray<T, ndim>: the data pointer (8 bytes), the element count (8), then ndim extents and ndim byte
// strides (8 each). An array counts from its lowest element's first byte to its highest element's last.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "cuweave/race_detector.hpp"

namespace cuweave::foreign_arguments {

// One parameter as the kernel's source declares it.
struct Parameter {
  bool array = false;         // a CArray; otherwise a value (a scalar, an indexer) that touches no memory
  bool writes = false;        // an array the kernel writes (not const)
  std::size_t ndim = 0;       // an array's dimensions
  std::size_t itemsize = 0;   // an array's element bytes; 0: not known from the source, taken from the strides
};

// The bytes a CArray argument of `ndim` dimensions takes.
constexpr std::size_t array_bytes(std::size_t ndim) { return 16 + 16 * ndim; }

// What a launch with these argument values touches: one access per non-empty array. Nothing (std::nullopt)
// where the values do not fit the parameters (their count, or an array's size): then nothing can be said.
std::optional<std::vector<sanitizer::Access>> accesses(const std::vector<Parameter>& parameters,
                                                       const std::vector<std::string>& values);

}  // namespace cuweave::foreign_arguments
