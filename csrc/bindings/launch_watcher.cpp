// The launch watch answered by Python (Note [Kernels other libraries launch] in cuweave/tracer.hpp).
#include "bindings/launch_watcher.hpp"

#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "cuweave/errors.hpp"
#include "cuweave/foreign_placement.hpp"
#include "cuweave/sanitizer.hpp"

namespace cuweave::bindings {

std::vector<foreign_arguments::Parameter> layout_from(py::handle layout) {
  std::vector<foreign_arguments::Parameter> parameters;
  try {
    for (py::handle item : layout) {
      const auto [array, writes, ndim, itemsize] = item.cast<std::tuple<bool, bool, std::size_t, std::size_t>>();
      parameters.push_back({array, writes, ndim, itemsize});
    }
  } catch (const py::cast_error&) {
    throw InvalidArgument("a kernel's layout is a list of (array, writes, ndim, itemsize) tuples, one per parameter, "
                          "as cuweave._cupy_hooks.layout() makes it; got " +
                          py::repr(layout).cast<std::string>());
  }
  return parameters;
}

namespace {

py::list ranges_to_python(sanitizer::AccessSpan accesses) {
  py::list ranges;
  for (const sanitizer::Access& access : accesses) {
    ranges.append(py::make_tuple(access.begin, access.end - access.begin, access.kind == sanitizer::AccessKind::Write));
  }
  return ranges;
}

}  // namespace

py::object ranges_of_launch(const std::vector<foreign_arguments::Parameter>& layout,
                            const std::vector<std::string>& values) {
  const std::optional<std::vector<sanitizer::Access>> accesses = foreign_arguments::accesses(layout, values);
  return accesses ? py::object(ranges_to_python(*accesses)) : py::object(py::none());
}

LaunchAnswer answer_launch(const char* kernel, StreamHandle stream, bool movable,
                           const std::vector<foreign_arguments::Parameter>& layout,
                           const std::vector<std::string>& values, const py::function& checked) {
  LaunchAnswer answer;
  const bool sanitizing = sanitizer::enabled();
  const std::optional<std::vector<sanitizer::Access>> accesses = foreign_arguments::accesses(layout, values);
  if (movable && accesses && !accesses->empty()) {
    answer.placed = ForeignPlacement::this_thread().place(stream, *accesses);
  }
  const bool told = accesses ? sanitizing && !accesses->empty() : sanitizing || movable;
  if (told) {
    py::gil_scoped_acquire gil;
    answer.exception = checked(kernel, reinterpret_cast<std::uintptr_t>(stream),
                               answer.placed ? py::cast(answer.placed) : py::none(),
                               accesses ? py::object(ranges_to_python(*accesses)) : py::object(py::none()));
  }
  return answer;
}

namespace {

// The backend's launch watch, answered by Python callables. They run on the launching thread, which may not hold
// the GIL (CuPy launches without it); a launch the weave places and the sanitizer does not check calls none of them.
// Nothing can cross the launch: what they raise is reported as unraisable, and what they find (a race) comes back as
// an exception class, set as the thread's asynchronous exception.
class PythonLaunchWatcher final : public ForeignLaunches {
 public:
  PythonLaunchWatcher(py::function wants, py::function checked, py::function copied, py::function ordered)
      : wants_(std::move(wants)),
        checked_(std::move(checked)),
        copied_(std::move(copied)),
        ordered_(std::move(ordered)) {}

  ~PythonLaunchWatcher() override {
    if (!Py_IsInitialized()) {  // at the interpreter's end: the objects are gone with it
      (void)wants_.release();
      (void)checked_.release();
      (void)copied_.release();
      (void)ordered_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    wants_ = py::function();
    checked_ = py::function();
    copied_ = py::function();
    ordered_ = py::function();
  }

  bool wants(const char* kernel, std::uintptr_t module) noexcept override {
    py::gil_scoped_acquire gil;
    try {
      const py::object answer = wants_(kernel, module);
      if (!py::isinstance<py::list>(answer)) return false;  // None: a kernel not to watch
      std::vector<foreign_arguments::Parameter> layout = layout_from(answer);
      std::lock_guard<std::mutex> lock(mutex_);
      layouts_.try_emplace({module, kernel}, std::move(layout));  // (two threads' first launches may both ask)
      return true;
    } catch (py::error_already_set& error) {
      rearm_or_report(error);
    } catch (const std::exception& error) {
      PyErr_WarnEx(PyExc_RuntimeWarning, error.what(), 1);
    }
    return false;
  }

  StreamHandle launched(const char* kernel, std::uintptr_t module, StreamHandle stream, bool movable,
                        const std::vector<std::string>& parameters) noexcept override {
    if (!movable && !sanitizer::enabled()) return nullptr;  // neither a weave's to place nor the sanitizer's to check
    const std::vector<foreign_arguments::Parameter>* layout = layout_of(module, kernel);
    if (layout == nullptr) return nullptr;
    try {
      LaunchAnswer answer = answer_launch(kernel, stream, movable, *layout, parameters, checked_);
      if (answer.exception) {
        py::gil_scoped_acquire gil;
        raise_after_launch(answer.exception);
        answer.exception = py::object();
      }
      return answer.placed ? answer.placed->raw_handle() : nullptr;
    } catch (py::error_already_set& error) {
      py::gil_scoped_acquire gil;
      rearm_or_report(error);
    } catch (const std::exception& error) {
      py::gil_scoped_acquire gil;
      PyErr_WarnEx(PyExc_RuntimeWarning, error.what(), 1);
    }
    return nullptr;
  }

  void launch_queued() noexcept override {
    warning_on_failure([] { ForeignPlacement::this_thread().launch_queued(); });
  }

  void unmoved(StreamHandle stream) noexcept override {
    warning_on_failure([stream] { ForeignPlacement::this_thread().unmoved(stream); });
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
  // The layout wants() was answered for a kernel; null for one it was not.
  const std::vector<foreign_arguments::Parameter>* layout_of(std::uintptr_t module, const char* kernel) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = layouts_.find({module, kernel});
    return found != layouts_.end() ? &found->second : nullptr;  // entries stay for the watcher's life
  }

  // Runs placement bookkeeping that may fail (a stream wait CUDA refused) inside a launch: nothing may cross it, so
  // a failure becomes a RuntimeWarning naming it.
  template <typename Action>
  static void warning_on_failure(Action action) noexcept {
    try {
      action();
    } catch (const std::exception& error) {
      py::gil_scoped_acquire gil;
      PyErr_WarnEx(PyExc_RuntimeWarning, error.what(), 1);
    }
  }

  // An exception class from a callback (a race, a warning made an error) is raised in this thread when it next
  // runs Python: after the launch has returned.
  static void raise_after_launch(const py::object& exception) {
    if (!exception.is_none()) PyThreadState_SetAsyncExc(PyThread_get_thread_ident(), exception.ptr());
  }

  // A race set to go off after a launch went off inside a callback of the next one instead (CuPy launches
  // again before returning to Python): set again. Any other error is reported as unraisable.
  static void rearm_or_report(py::error_already_set& error) {
    if (py::hasattr(error.type(), "_cuweave_deferred")) {
      error.type().attr("_cuweave_raised") = false;  // pending again (cuweave.errors._deferred)
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
  py::function checked_;
  py::function copied_;   // none: copies are not reported
  py::function ordered_;  // none: records and waits are not reported
  std::mutex mutex_;
  std::map<std::pair<std::uintptr_t, std::string>, std::vector<foreign_arguments::Parameter>> layouts_;  // LOCK: mutex_
};

}  // namespace

std::shared_ptr<ForeignLaunches> python_launch_watcher(py::function wants, py::function checked, py::function copied,
                                                       py::function ordered) {
  return std::make_shared<PythonLaunchWatcher>(std::move(wants), std::move(checked), std::move(copied),
                                               std::move(ordered));
}

}  // namespace cuweave::bindings
