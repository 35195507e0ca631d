// pybind11 as every binding file uses it, and the cuweave types the binding headers name.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace cuweave {
class Stream;
class DeviceArray;
class PinnedBlock;
struct DType;
namespace sanitizer {
struct Conflict;
}
}  // namespace cuweave

namespace cuweave::bindings {

namespace py = pybind11;

}  // namespace cuweave::bindings
