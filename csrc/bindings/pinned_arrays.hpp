// NumPy arrays on pinned pool blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>
#include "bindings/pybind.hpp"

namespace cuweave::bindings {

// A pinned pool block: a cached one without a GIL round trip, else a new one with the GIL released.
std::shared_ptr<PinnedBlock> take_pinned_block(std::size_t bytes);
// A C-contiguous NumPy array of `dtype` and `shape` on `block`, which the array keeps alive.
py::array numpy_on(std::shared_ptr<PinnedBlock> block, const py::dtype& dtype, const std::vector<std::int64_t>& shape);

}  // namespace cuweave::bindings
