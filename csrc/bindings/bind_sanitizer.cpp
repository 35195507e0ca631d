// The stream-race sanitizer's switch and reports (Note [What the sanitizer sees]).
#include "cuweave/sanitizer.hpp"

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "bindings/gil.hpp"
#include "bindings/launch_watcher.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/races.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/foreign_placement.hpp"
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

void bind_sanitizer(py::module_& parent) {
  sanitizer::set_reporter(&warn);
  py::module_ m = parent.def_submodule("sanitizer", "The stream-race sanitizer behind cuweave.sanitize().");
  py::module_ foreign = m.def_submodule(
      "foreign", "What another library did, told by its hooks (cuweave/_torch_hooks.py, cuweave/_cupy_hooks.py); "
      "call only while the sanitizer is enabled.");
  m.def(
      "enable",
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
  m.def("disable", &sanitizer::disable);
  m.def("enabled", &sanitizer::enabled);
  m.def("shadow_ranges", &sanitizer::shadow_ranges);
  m.def("clock_sizes", [] {
    const sanitizer::ClockSizes sizes = sanitizer::clock_sizes();
    return py::make_tuple(sizes.agents, sizes.largest_clock);
  }, "(agents not dropped, entries of the longest clock)");

  foreign.def(
      "operation",
      [](Stream& stream, std::string name, const std::vector<std::tuple<std::uintptr_t, std::size_t, bool>>& ranges,
         bool synchronizes_reported) {
        sanitizer::foreign_operation(stream, name, accesses_from(ranges), synchronizes_reported);
      },
      py::arg("stream"), py::arg("name"), py::arg("ranges"), py::arg("synchronizes_reported") = false,
      "Checks an operation another library queued on `stream` touching (address, bytes, writes) ranges "
      "(synchronizes_reported: that library reports all its synchronizes, so the stream is never found idle).");
  foreign.def(
      "host_operation",
      [](std::string name, const std::vector<std::tuple<std::uintptr_t, std::size_t, bool>>& ranges) {
        sanitizer::foreign_host_operation(std::move(name), accesses_from(ranges));
      },
      py::arg("name"), py::arg("ranges"),
      "Checks what the host reads and writes now through another library, (address, bytes, writes) ranges of "
      "memory that streams' copies also touch (pinned host memory).");
  m.def(
      "host_allocated",
      [](std::uintptr_t address, std::size_t bytes) {
        sanitizer::allocated(reinterpret_cast<const void*>(address), bytes);
      },
      py::arg("address"), py::arg("bytes"),
      "Host memory another library's allocator handed out once every earlier use was done (PyTorch's pinned "
      "blocks): its history is forgotten.");
  foreign.def(
      "event_recorded",
      [](std::uintptr_t event, Stream& stream) { sanitizer::event_recorded(reinterpret_cast<EventHandle>(event), stream); },
      py::arg("event"), py::arg("stream"));
  foreign.def(
      "stream_waited_event",
      [](Stream& stream, std::uintptr_t event) {
        sanitizer::stream_waited_event(stream, reinterpret_cast<EventHandle>(event));
      },
      py::arg("stream"), py::arg("event"));
  foreign.def(
      "event_synchronized",
      [](std::uintptr_t event) { sanitizer::host_synchronized_event(reinterpret_cast<EventHandle>(event)); },
      py::arg("event"));
  foreign.def(
      "stream_synchronized", [](Stream& stream) { sanitizer::host_synchronized_stream(stream); },
      py::arg("stream"));
  foreign.def(
      "synchronizes_reported",
      [](Stream& stream) { sanitizer::owner_reports_synchronizes(stream); }, py::arg("stream"),
      "The owner of the adopted `stream` reports its synchronizes: found idle, it is not taken as waited for.");
  foreign.def(
      "allocated",
      [](std::uintptr_t address, std::size_t bytes, Stream& stream, const std::string& allocator) {
        sanitizer::Allocator which = sanitizer::Allocator::PyTorch;
        if (allocator == "CuPy") {
          which = sanitizer::Allocator::CuPy;
        } else if (allocator != "PyTorch") {
          throw InvalidArgument("allocator must be \"PyTorch\" or \"CuPy\", not \"" + allocator + "\"");
        }
        sanitizer::foreign_handed_out(reinterpret_cast<const void*>(address), bytes, stream, which);
      },
      py::arg("address"), py::arg("bytes"), py::arg("stream"), py::arg("allocator") = "PyTorch",
      "Another library's allocator (\"PyTorch\" or \"CuPy\": whose fixes a report gives) handed out "
      "[address, address + bytes) for work on `stream`: its earlier users must be ordered before its new holder's "
      "first use.");
  foreign.def(
      "stream_recorded",
      [](std::uintptr_t address, Stream& stream) {
        sanitizer::foreign_stream_recorded(reinterpret_cast<const void*>(address), stream);
      },
      py::arg("address"), py::arg("stream"),
      "The block handed out at `address` is used on `stream` too, recorded with its allocator (record_stream).");
  foreign.def(
      "freed",
      [](std::uintptr_t address) { sanitizer::foreign_freed(reinterpret_cast<const void*>(address)); },
      py::arg("address"), "The block handed out at `address` was freed by its allocator.");
  foreign.def(
      "event_destroyed",
      [](std::uintptr_t event) { sanitizer::event_destroyed(reinterpret_cast<EventHandle>(event)); },
      py::arg("event"));
  foreign.def(
      "watch_launches",
      [](py::object wants, py::object checked, py::object copied, py::object ordered) {
        std::shared_ptr<ForeignLaunches> watcher;
        const auto optional = [](const py::object& callback) {
          return callback.is_none() ? py::function() : callback.cast<py::function>();
        };
        if (!wants.is_none()) {
          watcher = python_launch_watcher(wants.cast<py::function>(), checked.cast<py::function>(), optional(copied),
                                          optional(ordered));
        }
        py::gil_scoped_release release;  // ending the watch waits for a callback, which takes the GIL
        backend().tracer().watch_launches(std::move(watcher));
      },
      py::arg("wants"), py::arg("checked"), py::arg("copied") = py::none(), py::arg("ordered") = py::none(),
      "Watches kernels launched through the driver by other libraries: wants(kernel, module) is asked once per "
      "kernel, answering its parameters as (array, writes, ndim, itemsize) tuples, or None not to watch it. Inside a "
      "weave that places other libraries' work, a watched launch is placed by the bytes its arrays cover; while the "
      "sanitizer is on, checked(kernel, stream, placed stream or None, ranges or None: the values did not fit) is told "
      "each watched launch, answering None or an exception class to raise after the launch. copied(call, "
      "destination, destination_memory, source, source_memory, bytes, stream) is told each copy they make through the "
      "runtime (memory: 'device', 'pinned' or 'pageable'), and ordered(kind, event, stream) each event record "
      "('record'), stream wait ('wait') and synchronize ('synchronize stream', 'synchronize event', 'synchronize "
      "device': the device's index in place of the stream) they make through the runtime, both while the sanitizer is "
      "on; (None, None) stops.");
  foreign.def(
      "place_foreign_work",
      [](bool on, std::optional<std::uintptr_t> stream) {
        UnblockedEnqueue unblocked;
        ForeignPlacement& placement = ForeignPlacement::this_thread();
        backend().tracer().place_foreign_work(on);
        if (!on) return placement.end();
        placement.reset();
        return stream && placement.follow_into_capture(reinterpret_cast<StreamHandle>(*stream));
      },
      py::arg("on"), py::arg("stream") = py::none(),
      "Whether the watch places other libraries' launches on this thread (inside a weave). Turned on in a weave under "
      "a capture, the library's current `stream` joins the capture, so that its work in the block is captured; turned "
      "off, the weave's first stream waits for the streams that joined (call it before the weave ends). Returns "
      "whether a stream joined.");
  foreign.def(
      "launch",
      [](const std::string& kernel, py::handle layout, std::uintptr_t stream, bool movable,
         const std::vector<std::string>& values, py::function checked) {
        const std::vector<foreign_arguments::Parameter> parameters = layout_from(layout);
        LaunchAnswer answer;
        {
          UnblockedEnqueue unblocked;  // (checked() takes the GIL back)
          answer = answer_launch(kernel.c_str(), reinterpret_cast<StreamHandle>(stream), movable, parameters, values,
                                 checked);
        }
        return py::make_tuple(answer.placed ? py::cast(reinterpret_cast<std::uintptr_t>(answer.placed->raw_handle())) : py::none(),
                              answer.exception ? answer.exception : py::none());
      },
      py::arg("kernel"), py::arg("layout"), py::arg("stream"), py::arg("movable"), py::arg("values"), py::arg("checked"),
      "One launch of another library's kernel as the watch answers it (for a backend without the watch): returns "
      "(the stream handle the weave moved it to, or None; the exception class to raise after it, or None).");
  foreign.def(
      "launch_queued",
      [] {
        UnblockedEnqueue unblocked;
        ForeignPlacement::this_thread().launch_queued();
      },
      "The launch moved last is queued: the stream it was called on follows it.");
  foreign.def(
      "unmoved",
      [](std::uintptr_t stream) { ForeignPlacement::this_thread().unmoved(reinterpret_cast<StreamHandle>(stream)); },
      py::arg("stream"), "Work queued on `stream` that was not moved: launches moved off it later wait for it.");
  foreign.def(
      "argument_ranges",
      [](py::handle layout, const std::vector<std::string>& values) {
        return ranges_of_launch(layout_from(layout), values);
      },
      py::arg("layout"), py::arg("values"),
      "What a launch of a kernel of parameters `layout` with these argument values touches, as (address, bytes, "
      "writes) ranges; None where the values do not fit the parameters.");
  foreign.def(
      "device_synchronized", [](int device) { sanitizer::host_synchronized_device(device); },
      py::arg("device"));
}

}  // namespace cuweave::bindings
