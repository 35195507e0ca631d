// Python objects and errors kept alive from C++ (Holds).
#pragma once

#include "bindings/pybind.hpp"
#include "cuweave/hold.hpp"

namespace cuweave::bindings {

// Keeps a Python object alive from C++; the reference is dropped under the GIL on any thread
// (or leaked once the interpreter is finalizing).
Hold hold_python(py::handle object);
// Keeps the exception being handled; if it is dropped without being reported, it goes to
// sys.unraisablehook, so that no callback error is ever lost.
Hold hold_python_error(py::error_already_set& error, const char* context);

}  // namespace cuweave::bindings
