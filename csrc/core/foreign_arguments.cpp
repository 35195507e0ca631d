// Note [Another library's kernel arguments] in cuweave/foreign_arguments.hpp.
#include "cuweave/foreign_arguments.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cuweave/array_layout.hpp"

namespace cuweave::foreign_arguments {

namespace {

std::int64_t read_int64(const std::string& value, std::size_t offset) {
  std::int64_t result = 0;
  std::memcpy(&result, value.data() + offset, sizeof(result));  // little-endian, as the GPU's host is
  return result;
}

// The bytes of one CArray argument, or nothing for an empty array.
std::optional<sanitizer::Access> array_access(const Parameter& parameter, const std::string& value) {
  const auto data = static_cast<std::uintptr_t>(read_int64(value, 0));
  const std::int64_t size = read_int64(value, 8);
  if (size <= 0 || data == 0) return std::nullopt;
  std::vector<std::int64_t> shape(parameter.ndim), strides(parameter.ndim);
  for (std::size_t d = 0; d < parameter.ndim; ++d) {
    shape[d] = read_int64(value, 16 + 8 * d);
    strides[d] = read_int64(value, 16 + 8 * (parameter.ndim + d));
  }
  std::size_t itemsize = parameter.itemsize;
  if (itemsize == 0) {  // the smallest step between neighbours along an axis that has them
    std::int64_t step = 0;
    for (std::size_t d = 0; d < parameter.ndim; ++d) {
      const std::int64_t stride = std::llabs(strides[d]);
      if (shape[d] > 1 && stride != 0 && (step == 0 || stride < step)) step = stride;
    }
    itemsize = step != 0 ? static_cast<std::size_t>(step) : 1;
  }
  const auto [low, high] = byte_extent(shape, strides, itemsize);
  if (high <= low) return std::nullopt;
  return sanitizer::Access{data + static_cast<std::uintptr_t>(low), data + static_cast<std::uintptr_t>(high),
                           parameter.writes ? sanitizer::AccessKind::Write : sanitizer::AccessKind::Read};
}

}  // namespace

std::optional<std::vector<sanitizer::Access>> accesses(const std::vector<Parameter>& parameters,
                                                       const std::vector<std::string>& values) {
  if (values.size() != parameters.size()) return std::nullopt;
  std::vector<sanitizer::Access> touched;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Parameter& parameter = parameters[i];
    if (!parameter.array) continue;
    if (values[i].size() != array_bytes(parameter.ndim)) return std::nullopt;
    if (std::optional<sanitizer::Access> access = array_access(parameter, values[i])) touched.push_back(*access);
  }
  return touched;
}

}  // namespace cuweave::foreign_arguments
