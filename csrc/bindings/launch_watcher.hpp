// The launch watch answered by Python (cuweave/_cupy_hooks.py), and its answer to one launch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bindings/pybind.hpp"
#include "cuweave/foreign_arguments.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/tracer.hpp"

namespace cuweave::bindings {

// A kernel's parameters from Python: (array, writes, ndim, itemsize) for each.
std::vector<foreign_arguments::Parameter> layout_from(py::handle layout);

// What a launch with these argument values touches, as (address, bytes, writes) tuples; None where the values do
// not fit the parameters.
py::object ranges_of_launch(const std::vector<foreign_arguments::Parameter>& layout,
                            const std::vector<std::string>& values);

// One launch of another library's kernel of parameters `layout` on `stream`, on the launching thread, with or
// without the GIL: placed in the thread's weave when `movable` (Note [Other libraries' kernels in a weave]), and
// told to Python only for the sanitizer's check or to warn that the values do not fit: `checked(kernel, stream,
// placed stream or None, ranges or None)` answers None or an exception class to raise after the launch.
struct LaunchAnswer {
  std::shared_ptr<Stream> placed;  // null: the launch stays on its stream
  py::object exception;            // set and released under the GIL
};
LaunchAnswer answer_launch(const char* kernel, StreamHandle stream, bool movable,
                           const std::vector<foreign_arguments::Parameter>& layout,
                           const std::vector<std::string>& values, const py::function& checked);

// The watch: wants(kernel, module) answers a kernel's layout, or None for a kernel not to watch; copied and
// ordered are told what other libraries copy and order (Tracer::watch_launches) while the sanitizer is on.
std::shared_ptr<ForeignLaunches> python_launch_watcher(py::function wants, py::function checked, py::function copied,
                                                       py::function ordered);

}  // namespace cuweave::bindings
