// The parts of the extension module, each bound by its own file, in the order module.cpp calls them.
#pragma once

#include "bindings/pybind.hpp"

namespace cuweave::bindings {

// Errors, the backend and devices.
void bind_errors(py::module_& m);
void bind_backend(py::module_& m);
void bind_backend_calls(py::module_& m);
void bind_device(py::module_& m);
// Streams, events and what orders them.
void bind_stream(py::module_& m);
void bind_partition(py::module_& m);
void bind_event(py::module_& m);
void bind_host_latch(py::module_& m);
void bind_sanitizer(py::module_& m);
// Memory, arrays and copies.
void bind_pinned(py::module_& m);
void bind_array(py::module_& m);
void bind_array_views(py::module_& m);  // after bind_array
void bind_copy(py::module_& m);
void bind_ops(py::module_& m);
// Traces, kernels and graphs.
void bind_trace(py::module_& m);
void bind_kernel(py::module_& m);
void bind_graph(py::module_& m);
void bind_graph_function(py::module_& m);  // after bind_graph
void bind_conditional(py::module_& m);
// Several devices, and the weave.
void bind_collectives(py::module_& m);
void bind_weave(py::module_& m);
void bind_hook_table(py::module_& m);  // after bind_weave and bind_sanitizer
// Installs the hot methods of Stream, Graph and DeviceArray as raw CPython methods (after the classes).
void install_fast_methods(py::module_& m);

}  // namespace cuweave::bindings
