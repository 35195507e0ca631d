// The sanitizer's accesses and races, to and from Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <vector>
#include "bindings/pybind.hpp"
#include "cuweave/race_detector.hpp"

namespace cuweave::bindings {

// The sanitizer's races as Python tuples (bind_sanitizer.cpp): what RaceError.races and RaceWarning hold.
py::list races_to_python(const std::vector<sanitizer::Conflict>& conflicts);
// (address, bytes, writes) ranges from Python, as accesses.
std::vector<sanitizer::Access> accesses_from(const std::vector<std::tuple<std::uintptr_t, std::size_t, bool>>& ranges);

}  // namespace cuweave::bindings
