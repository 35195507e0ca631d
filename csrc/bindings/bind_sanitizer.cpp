// The stream-race sanitizer's switch and reports (Note [What the sanitizer sees]).
#include "cuweave/sanitizer.hpp"

#include "bindings/common.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/trace.hpp"

namespace cuweave::bindings {

namespace {

py::object site_tuple(std::uint32_t id) {
  if (id == 0) return py::none();
  const trace::CallSite site = trace::call_site(id);
  return py::make_tuple(site.file, site.line, site.function);
}

py::tuple operation_tuple(const sanitizer::OperationInfo& operation, const std::string& agent,
                          sanitizer::AccessKind kind) {
  return py::make_tuple(operation.name, agent, sanitizer::to_string(kind), site_tuple(operation.call_site));
}

// Mode::Warn: each race becomes a cuweave.RaceWarning (raised as an exception where warnings are errors).
void warn(const std::vector<sanitizer::Conflict>& conflicts) {
  py::gil_scoped_acquire gil;
  py::object category = py::module_::import("cuweave.errors").attr("RaceWarning");
  if (PyErr_WarnEx(category.ptr(), sanitizer::describe(conflicts).c_str(), 1) != 0) throw py::error_already_set();
}

}  // namespace

py::list races_to_python(const std::vector<sanitizer::Conflict>& conflicts) {
  py::list races;
  for (const sanitizer::Conflict& c : conflicts) {
    races.append(py::make_tuple(operation_tuple(c.earlier, c.earlier_agent, c.earlier_kind),
                                operation_tuple(c.later, c.later_agent, c.later_kind), c.begin, c.end));
  }
  return races;
}

void bind_sanitizer(py::module_& m) {
  sanitizer::set_reporter(&warn);
  m.def(
      "sanitizer_enable",
      [](const std::string& mode) {
        if (mode != "raise" && mode != "warn" && mode != "ignore") {
          throw InvalidArgument("sanitize(on_race=...) takes \"raise\", \"warn\" or \"ignore\", not \"" + mode +
                                "\"");
        }
        sanitizer::enable(mode == "raise"  ? sanitizer::Mode::Raise
                          : mode == "warn" ? sanitizer::Mode::Warn
                                           : sanitizer::Mode::Ignore);
      },
      py::arg("mode"));
  m.def("sanitizer_disable", &sanitizer::disable);
  m.def("sanitizer_enabled", &sanitizer::enabled);
  m.def("sanitizer_shadow_ranges", &sanitizer::shadow_ranges);
}

}  // namespace cuweave::bindings
