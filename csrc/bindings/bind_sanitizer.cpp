// The stream-race sanitizer's switch and reports (Note [What the sanitizer sees]).
#include "cuweave/sanitizer.hpp"

#include <tuple>
#include <vector>

#include "bindings/common.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/stream.hpp"
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

std::vector<sanitizer::Access> accesses_from(
    const std::vector<std::tuple<std::uintptr_t, std::size_t, bool>>& ranges) {
  std::vector<sanitizer::Access> accesses;
  accesses.reserve(ranges.size());
  for (const auto& [begin, bytes, write] : ranges) {
    accesses.push_back({begin, begin + bytes, write ? sanitizer::AccessKind::Write : sanitizer::AccessKind::Read});
  }
  return accesses;
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

  // What another library did, told by its hooks (cuweave/_torch_hooks.py); call only while enabled.
  m.def(
      "sanitizer_foreign_operation",
      [](Stream& stream, std::string name, const std::vector<std::tuple<std::uintptr_t, std::size_t, bool>>& ranges) {
        sanitizer::operation(stream, std::move(name), accesses_from(ranges));
      },
      py::arg("stream"), py::arg("name"), py::arg("ranges"),
      "Checks an operation another library queued on `stream` touching (address, bytes, writes) ranges.");
  m.def(
      "sanitizer_foreign_event_recorded",
      [](std::uintptr_t event, Stream& stream) { sanitizer::event_recorded(reinterpret_cast<EventHandle>(event), stream); },
      py::arg("event"), py::arg("stream"));
  m.def(
      "sanitizer_foreign_stream_waited_event",
      [](Stream& stream, std::uintptr_t event) {
        sanitizer::stream_waited_event(stream, reinterpret_cast<EventHandle>(event));
      },
      py::arg("stream"), py::arg("event"));
  m.def(
      "sanitizer_foreign_event_synchronized",
      [](std::uintptr_t event) { sanitizer::host_synchronized_event(reinterpret_cast<EventHandle>(event)); },
      py::arg("event"));
  m.def(
      "sanitizer_foreign_stream_synchronized", [](Stream& stream) { sanitizer::host_synchronized_stream(stream); },
      py::arg("stream"));
  m.def(
      "sanitizer_foreign_synchronizes_reported",
      [](Stream& stream) { sanitizer::owner_reports_synchronizes(stream); }, py::arg("stream"),
      "The owner of the adopted `stream` reports its synchronizes: found idle, it is not taken as waited for.");
  m.def(
      "sanitizer_foreign_allocated",
      [](std::uintptr_t address, std::size_t bytes) {
        sanitizer::allocated(reinterpret_cast<const void*>(address), bytes);
      },
      py::arg("address"), py::arg("bytes"),
      "Another library's allocator handed out [address, address + bytes) anew: its history is forgotten.");
  m.def(
      "sanitizer_foreign_event_destroyed",
      [](std::uintptr_t event) { sanitizer::event_destroyed(reinterpret_cast<EventHandle>(event)); },
      py::arg("event"));
  m.def(
      "sanitizer_foreign_device_synchronized", [](int device) { sanitizer::host_synchronized_device(device); },
      py::arg("device"));
}

}  // namespace cuweave::bindings
