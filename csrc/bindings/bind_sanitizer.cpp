// The stream-race sanitizer's switch and reports (Note [What the sanitizer sees]).
#include "cuweave/sanitizer.hpp"

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/races.hpp"
#include "cuweave/backend.hpp"
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

// The backend's launch watch, answered by two Python callables (cuweave/_cupy_hooks.py). They run on the
// launching thread, which may not hold the GIL (CuPy launches without it). Nothing can cross the launch: what
// they raise is reported as unraisable, and what they find (a race) comes back as an exception class, set as
// the thread's asynchronous exception.
class PythonLaunchWatcher final : public ForeignLaunches {
 public:
  PythonLaunchWatcher(py::function wants, py::function launched, py::function copied, py::function ordered,
                      py::function moved, py::function unmoved)
      : wants_(std::move(wants)),
        launched_(std::move(launched)),
        copied_(std::move(copied)),
        ordered_(std::move(ordered)),
        moved_(std::move(moved)),
        unmoved_(std::move(unmoved)) {}

  ~PythonLaunchWatcher() override {
    if (!Py_IsInitialized()) {  // at the interpreter's end: the objects are gone with it
      (void)wants_.release();
      (void)launched_.release();
      (void)copied_.release();
      (void)ordered_.release();
      (void)moved_.release();
      (void)unmoved_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    wants_ = py::function();
    launched_ = py::function();
    copied_ = py::function();
    ordered_ = py::function();
    moved_ = py::function();
    unmoved_ = py::function();
  }

  bool wants(const char* kernel, std::uintptr_t module) noexcept override {
    py::gil_scoped_acquire gil;
    try {
      const py::object answer = wants_(kernel, module);
      if (py::isinstance<py::bool_>(answer)) return answer.cast<bool>();
      raise_after_launch(answer);
    } catch (py::error_already_set& error) {
      rearm_or_report(error);
    } catch (const std::exception& error) {
      PyErr_WarnEx(PyExc_RuntimeWarning, error.what(), 1);
    }
    return false;
  }

  // `launched` answers None, an exception class to raise after the launch, or (stream handle, None or an
  // exception class) for a launch the weave moved.
  StreamHandle launched(const char* kernel, std::uintptr_t module, StreamHandle stream, bool movable,
                        const std::vector<std::string>& parameters) noexcept override {
    if (!movable && !sanitizer::enabled()) return nullptr;  // neither a weave's to place nor the sanitizer's to check
    py::gil_scoped_acquire gil;
    try {
      py::list values;
      for (const std::string& value : parameters) values.append(py::bytes(value));
      const py::object answer = launched_(kernel, module, reinterpret_cast<std::uintptr_t>(stream), movable, values);
      if (!py::isinstance<py::tuple>(answer)) {
        raise_after_launch(answer);
        return nullptr;
      }
      const py::tuple placed = answer.cast<py::tuple>();
      raise_after_launch(placed[1]);
      return reinterpret_cast<StreamHandle>(placed[0].cast<std::uintptr_t>());
    } catch (py::error_already_set& error) {
      rearm_or_report(error);
    } catch (const std::exception& error) {
      PyErr_WarnEx(PyExc_RuntimeWarning, error.what(), 1);
    }
    return nullptr;
  }

  void launch_moved(StreamHandle called, StreamHandle placed) noexcept override {
    call_back(moved_, reinterpret_cast<std::uintptr_t>(called), reinterpret_cast<std::uintptr_t>(placed));
  }

  void unmoved(StreamHandle stream) noexcept override {
    call_back(unmoved_, reinterpret_cast<std::uintptr_t>(stream));
  }

  void copied(const char* call, std::uintptr_t destination, Memory destination_memory, std::uintptr_t source,
              Memory source_memory, std::size_t bytes, StreamHandle stream) noexcept override {
    if (!sanitizer::enabled()) return;  // (the watch may be on for a weave alone)
    call_back(copied_, call, destination, memory_name(destination_memory), source, memory_name(source_memory), bytes,
              reinterpret_cast<std::uintptr_t>(stream));
  }

  void event_recorded(EventHandle event, StreamHandle stream) noexcept override { order("record", event, stream); }

  void stream_waited(StreamHandle stream, EventHandle event) noexcept override { order("wait", event, stream); }

  void stream_synchronized(StreamHandle stream) noexcept override {
    order("synchronize stream", nullptr, stream);
  }

  void event_synchronized(EventHandle event) noexcept override { order("synchronize event", event, nullptr); }

  void device_synchronized(int device) noexcept override {
    order("synchronize device", nullptr, reinterpret_cast<StreamHandle>(static_cast<std::uintptr_t>(device)));
  }

 private:
  // An exception class from a callback (a race, a warning made an error) is raised in this thread when it next
  // runs Python: after the launch has returned.
  static void raise_after_launch(const py::object& exception) {
    if (!exception.is_none()) PyThreadState_SetAsyncExc(PyThread_get_thread_ident(), exception.ptr());
  }

  // A race set to go off after a launch went off inside a callback of the next one instead (CuPy launches
  // again before returning to Python): set again. Any other error is reported as unraisable.
  static void rearm_or_report(py::error_already_set& error) {
    if (py::hasattr(error.type(), "_cuweave_deferred")) {
      raise_after_launch(error.type());
      return;
    }
    error.discard_as_unraisable("cuweave: the sanitizer's watch of other libraries' work");
  }

  void order(const char* kind, EventHandle event, StreamHandle stream) noexcept {
    if (!sanitizer::enabled()) return;  // (the watch may be on for a weave alone)
    call_back(ordered_, kind, reinterpret_cast<std::uintptr_t>(event), reinterpret_cast<std::uintptr_t>(stream));
  }

  // Calls an optional callback whose answer is None or an exception class to raise after the call.
  template <typename... Arguments>
  static void call_back(const py::function& callback, Arguments... arguments) noexcept {
    if (!callback) return;
    py::gil_scoped_acquire gil;
    try {
      raise_after_launch(callback(arguments...));
    } catch (py::error_already_set& error) {
      rearm_or_report(error);
    } catch (const std::exception& error) {
      PyErr_WarnEx(PyExc_RuntimeWarning, error.what(), 1);
    }
  }

  static const char* memory_name(Memory memory) {
    switch (memory) {
      case Memory::Device: return "device";
      case Memory::PinnedHost: return "pinned";
      case Memory::PageableHost: return "pageable";
    }
    return "pageable";
  }

  py::function wants_;
  py::function launched_;
  py::function copied_;   // none: copies are not reported
  py::function ordered_;  // none: records and waits are not reported
  py::function moved_;    // none: no launch is moved
  py::function unmoved_;  // none: unmoved work is not told
};

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
        sanitizer::foreign_operation(stream, std::move(name), accesses_from(ranges), synchronizes_reported);
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
      [](py::object wants, py::object launched, py::object copied, py::object ordered, py::object moved,
         py::object unmoved) {
        std::shared_ptr<ForeignLaunches> watcher;
        const auto optional = [](const py::object& callback) {
          return callback.is_none() ? py::function() : callback.cast<py::function>();
        };
        if (!wants.is_none()) {
          watcher = std::make_shared<PythonLaunchWatcher>(wants.cast<py::function>(), launched.cast<py::function>(),
                                                          optional(copied), optional(ordered), optional(moved),
                                                          optional(unmoved));
        }
        py::gil_scoped_release release;  // ending the watch waits for a callback, which takes the GIL
        backend().tracer().watch_launches(std::move(watcher));
      },
      py::arg("wants"), py::arg("launched"), py::arg("copied") = py::none(), py::arg("ordered") = py::none(),
      py::arg("moved") = py::none(), py::arg("unmoved") = py::none(),
      "Reports kernels launched through the driver by other libraries: wants(kernel, module) -> bool is asked once "
      "per kernel, launched(kernel, module, stream, movable, parameters) each launch of a wanted one (answering "
      "None, an exception class to raise after the launch, or (stream, exception class or None) to run a movable "
      "launch on that stream, after which moved(called stream, stream) is told; inside a weave whose placing is on, "
      "unmoved(stream) each launch, copy, memset and wait not moved), and copied(call, "
      "destination, destination_memory, source, source_memory, bytes, stream) each copy they make through the "
      "runtime (memory: 'device', 'pinned' or 'pageable'), and ordered(kind, event, stream) each event record "
      "('record'), stream wait ('wait') and synchronize ('synchronize stream', 'synchronize event', 'synchronize "
      "device': the device's index in place of the stream) they make through the runtime; (None, None) stops.");
  foreign.def(
      "place_foreign_work", [](bool on) { backend().tracer().place_foreign_work(on); }, py::arg("on"),
      "Whether the watch places other libraries' launches on this thread (inside a weave), telling what it does "
      "not move to unmoved().");
  foreign.def(
      "device_synchronized", [](int device) { sanitizer::host_synchronized_device(device); },
      py::arg("device"));
}

}  // namespace cuweave::bindings
