// Note [Hot methods without the dispatcher]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `with stream:`, stream.record(event), stream.wait(event), graph.replay(stream) and array.to_numpy(...) are
// called in tight loops, and pybind11's
// generic dispatcher (argument loaders, overload resolution, return-value lookup) costs more than the
// CUDA calls behind them (measured on an H200: record + wait 0.54 us through the dispatcher, 0.28 us
// in raw CUDA). These methods are therefore plain CPython method descriptors (METH_O /
// METH_FASTCALL, which CPython calls without building a bound method), installed on the pybind11
// class. They convert arguments with pybind11's casters and translate C++ exceptions with the same
// mapping as every other binding (set_python_error_from_current_exception).
#include "bindings/arrays.hpp"
#include "bindings/exception_translation.hpp"
#include "bindings/fast_arguments.hpp"
#include "bindings/gil.hpp"
#include "bindings/host_reads.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/streams.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event.hpp"
#include "cuweave/graph.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/weave.hpp"

namespace cuweave::bindings {

namespace {

PyTypeObject* event_type = nullptr;   // set once by install_fast_methods
PyTypeObject* stream_type = nullptr;
PyTypeObject* graph_type = nullptr;
const py::detail::type_info* event_info = nullptr;
const py::detail::type_info* stream_info = nullptr;
const py::detail::type_info* graph_info = nullptr;

// The C++ object inside a pybind11 instance whose type was checked already (the descriptor checks
// `self`; callers check arguments). Skips the caster's per-call type lookup, which is most of the cost.
template <typename T>
T& unwrap(PyObject* object, const py::detail::type_info* info) {
  auto* instance = reinterpret_cast<py::detail::instance*>(object);
  return *static_cast<T*>(instance->get_value_and_holder(info, /*throw_if_missing=*/true).value_ptr());
}

// The shared_ptr holding a checked pybind11 instance's C++ object.
template <typename T>
const std::shared_ptr<T>& unwrap_holder(PyObject* object, const py::detail::type_info* info) {
  auto* instance = reinterpret_cast<py::detail::instance*>(object);
  return instance->get_value_and_holder(info, /*throw_if_missing=*/true).template holder<std::shared_ptr<T>>();
}

Event& as_event(PyObject* object) { return unwrap<Event>(object, event_info); }
Stream& as_stream(PyObject* object) { return unwrap<Stream>(object, stream_info); }

// The one optional argument `name` of a METH_FASTCALL | METH_KEYWORDS method, by position or keyword;
// null when absent.
PyObject* optional_argument(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, const char* method,
                            const char* name) {
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nargs + nkw > 1) throw WrongType(std::string(method) + " takes at most one argument (" + name + ")");
  if (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), name) != 0) {
    throw WrongType(std::string(method) + " got an unexpected keyword argument");
  }
  return nargs + nkw == 1 ? args[0] : nullptr;
}

PyObject* stream_enter(PyObject* self, PyObject*) {
  try {
    auto stream = py::handle(self).cast<std::shared_ptr<Stream>>();
    stream->handle();  // a closed stream raises here rather than becoming current
    current_stream::push(std::move(stream));
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
  Py_INCREF(self);
  return self;
}

PyObject* stream_exit(PyObject* self, PyObject* const*, Py_ssize_t) {
  try {
    current_stream::pop(&as_stream(self));  // never hides the body's exception: returns None
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* stream_record(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  try {
    PyObject* event = optional_argument(args, nargs, kwnames, "Stream.record()", "event");
    Stream& stream = as_stream(self);
    if (event == nullptr || event == Py_None) {
      std::shared_ptr<Event> created = Event::pooled(stream.device());
      {
        UnblockedEnqueue unblocked;
        created->record(stream);
      }
      return py::cast(std::move(created)).release().ptr();
    }
    if (Py_TYPE(event) != event_type && !PyObject_TypeCheck(event, event_type)) {
      throw WrongType(std::string("Stream.record() takes a cuweave.Event or None, not ") + Py_TYPE(event)->tp_name);
    }
    {
      UnblockedEnqueue unblocked;
      as_event(event).record(stream);
    }
    Py_INCREF(event);
    return event;
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

PyObject* stream_wait(PyObject* self, PyObject* target) {
  try {
    Stream& stream = as_stream(self);
    if (Py_TYPE(target) == event_type || PyObject_TypeCheck(target, event_type)) {
      const EventHandle event = as_event(target).handle();
      UnblockedEnqueue unblocked;
      stream.wait(event);
    } else if (Py_TYPE(target) == stream_type || PyObject_TypeCheck(target, stream_type)) {
      Stream& other = as_stream(target);
      UnblockedEnqueue unblocked;
      stream.wait(other);
    } else {
      stream.wait(*adopt_foreign_stream(target));
    }
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* graph_replay(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  try {
    PyObject* target = optional_argument(args, nargs, kwnames, "Graph.replay()", "stream");
    Graph& graph = unwrap<Graph>(self, graph_info);
    if (Weave* weave = Weave::active()) {  // Note [Weaving]: placed by what the graph touches
      std::shared_ptr<Stream> given = target == nullptr || target == Py_None ? nullptr : resolve_stream(target);
      std::shared_ptr<Stream> stream = weave->place(graph.touches(), std::move(given), graph.device());
      UnblockedEnqueue unblocked;
      graph.launch(stream);
      Py_RETURN_NONE;
    }
    if (target != nullptr && (Py_TYPE(target) == stream_type || PyObject_TypeCheck(target, stream_type))) {
      const std::shared_ptr<Stream>& stream = unwrap_holder<Stream>(target, stream_info);
      UnblockedEnqueue unblocked;
      graph.launch(stream);
    } else if (target == nullptr || target == Py_None) {
      std::shared_ptr<Stream> stream = current_stream::get();
      UnblockedEnqueue unblocked;
      graph.launch(stream);
    } else {
      graph.launch(adopt_foreign_stream(target));
    }
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
  Py_RETURN_NONE;
}

// A small result read in a loop (a convergence check, a counter) pays this call every round.
FastSignature to_numpy_signature("to_numpy()", {"stream", "out", "pinned"}, 0, 0);

PyObject* array_to_numpy(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  try {
    py::detail::loader_life_support temporaries;  // as in pybind11's dispatcher: casts inside may keep temporaries
    PyObject* bound[FastSignature::kMostParameters];
    to_numpy_signature.bind(args, nargs, kwnames, bound);
    const std::shared_ptr<DeviceArray>* held = exact_device_array(self);
    const std::shared_ptr<DeviceArray> array = held ? *held : py::handle(self).cast<std::shared_ptr<DeviceArray>>();
    return device_to_numpy(array, bound[0], bound[1], bound[2]).release().ptr();
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

PyMethodDef enter_def = {"__enter__", stream_enter, METH_NOARGS,
                         "__enter__($self, /)\n--\n\nMakes this stream the thread's current stream until the block ends (nestable)."};
PyMethodDef exit_def = {"__exit__", as_method<stream_exit>(),
                        METH_FASTCALL, "__exit__($self, exc_type, exc, traceback, /)\n--\n\nRestores the previous current stream; never hides the body's exception."};
PyMethodDef record_def = {
    "record", as_method<stream_record>(), METH_FASTCALL | METH_KEYWORDS,
    "record($self, /, event=None)\n--\n\nRecords `event` (a new timing-free Event if None) after the work queued so far "
    "on this stream; returns it. Does not block."};
PyMethodDef wait_def = {
    "wait", stream_wait, METH_O,
    "wait($self, event_or_stream, /)\n--\n\nMakes later work on this stream wait for an Event, or for the work queued so far on "
    "another stream (a Stream or anything with __cuda_stream__). The host does not wait."};

PyMethodDef replay_def = {
    "replay", as_method<graph_replay>(), METH_FASTCALL | METH_KEYWORDS,
    "replay($self, /, stream=None)\n--\n\nLaunches the graph on `stream` (default: the current stream), after the work "
    "queued there; instantiates it first, or applies pending changes. Does not block."};

PyMethodDef to_numpy_def = {
    "to_numpy", as_method<array_to_numpy>(), METH_FASTCALL | METH_KEYWORDS,
    "to_numpy($self, /, *, stream=None, out=None, pinned=None)\n--\n\n"
    "Copies to a NumPy array (`out`, or a new one) ordered on `stream` (default: the current stream, or the array's "
    "device's default stream when the current stream is another device's; after the streams that wrote the array) "
    "and waits for the copy; the GIL is released while waiting. A new array is on pooled pinned memory, which the copy engine fills at the "
    "link's speed, when pinned=True, or by default when its size recurs (from the second result of a size class on, "
    "and whenever the pool holds a free block of that class); pinned=False always gives ordinary memory. Large "
    "copies into ordinary memory go through pinned staging on several threads."};

void install(PyTypeObject* type, PyMethodDef* def) {
  py::object descriptor = py::reinterpret_steal<py::object>(PyDescr_NewMethod(type, def));
  if (!descriptor) throw py::error_already_set();
  if (PyObject_SetAttrString(reinterpret_cast<PyObject*>(type), def->ml_name, descriptor.ptr()) != 0) {
    throw py::error_already_set();
  }
}

}  // namespace

void install_fast_methods(py::module_& m) {
  stream_type = reinterpret_cast<PyTypeObject*>(m.attr("Stream").ptr());
  event_type = reinterpret_cast<PyTypeObject*>(m.attr("Event").ptr());
  graph_type = reinterpret_cast<PyTypeObject*>(m.attr("Graph").ptr());
  stream_info = py::detail::get_type_info(typeid(Stream));
  event_info = py::detail::get_type_info(typeid(Event));
  graph_info = py::detail::get_type_info(typeid(Graph));
  for (PyMethodDef* def : {&enter_def, &exit_def, &record_def, &wait_def}) install(stream_type, def);
  install(graph_type, &replay_def);
  install(reinterpret_cast<PyTypeObject*>(m.attr("DeviceArray").ptr()), &to_numpy_def);
}

}  // namespace cuweave::bindings
