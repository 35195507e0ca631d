// Element types, shapes and scalars from Python.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include "bindings/pybind.hpp"
#include "cuweave/arithmetic.hpp"

namespace cuweave::bindings {

DType dtype_from_python(py::handle dtype);
py::dtype dtype_to_python(const DType& dtype);
std::vector<std::int64_t> shape_from_python(py::handle shape);
// Throws TypeError unless `typestr` equals `expected_typestr` and ValueError unless the shapes are equal,
// naming `what` and both sides (cuweave never converts or broadcasts).
void check_same_layout(const char* what, const std::vector<std::int64_t>& shape, const std::string& typestr,
                       const std::vector<std::int64_t>& expected_shape, const std::string& expected_typestr);

// The element type of a built-in kernel's array (TypeError for types other than float32, float64, int32, int64).
NumericType numeric_type(const DeviceArray& array);
// A Python (or NumPy) real number as a scalar of `type`; ValueError for a value the type cannot hold exactly.
Scalar scalar_for(py::handle value, NumericType type);

}  // namespace cuweave::bindings
