// C++ exceptions as Python errors (exception_translation.cpp).
#pragma once

#include "bindings/pybind.hpp"

namespace cuweave::bindings {

// Sets the Python exception types used by the translator (called once by cuweave/__init__.py).
void set_error_types(py::dict types);
// Sets the Python error for the exception being handled (the same mapping pybind11 functions get);
// for functions bound without pybind11's dispatcher. Call inside a catch block.
void set_python_error_from_current_exception() noexcept;

}  // namespace cuweave::bindings
