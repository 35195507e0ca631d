#include <Python.h>

#include "bindings/pybind.hpp"
#include "bindings/python_callbacks.hpp"
#include "bindings/python_holds.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/host_callbacks.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

namespace {
bool interpreter_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

struct StoredError {
  py::object error;
  const char* context;
  bool reported = false;
};
}  // namespace

Hold hold_python(py::handle object) {
  PyObject* raw = object.inc_ref().ptr();
  return Hold(static_cast<const void*>(raw), [](const void* pointer) {
    if (!interpreter_alive()) return;
    py::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(const_cast<void*>(pointer)));
  });
}

Hold hold_python_error(py::error_already_set& error, const char* context) {
  auto* stored = new StoredError{error.value(), context};
  return Hold(static_cast<const void*>(stored), [](const void* pointer) {
    auto* stored = static_cast<StoredError*>(const_cast<void*>(pointer));
    if (!interpreter_alive()) return;  // leaked: nothing can be reported any more
    py::gil_scoped_acquire gil;
    if (!stored->reported) {
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(stored->error.ptr())), stored->error.ptr());
      PyObject* where = PyUnicode_FromString(stored->context);
      PyErr_WriteUnraisable(where);
      Py_XDECREF(where);
    }
    delete stored;
  });
}

void raise_stored_callback_error(const Hold& error, const char* where) {
  auto* stored = static_cast<StoredError*>(const_cast<void*>(error.get()));
  stored->reported = true;
  py::object callback_error_type = py::module_::import("cuweave.errors").attr("CallbackError");
  py::object raised = callback_error_type(std::string("a host callback raised ") +
                                          py::str(py::type::handle_of(stored->error).attr("__name__")).cast<std::string>() +
                                          ": " + py::str(stored->error).cast<std::string>() + " (reported by " +
                                          where + ")");
  raised.attr("__cause__") = stored->error;
  PyErr_SetObject(callback_error_type.ptr(), raised.ptr());
  throw py::error_already_set();
}

std::string callable_name(py::handle function) {
  for (const char* attribute : {"__qualname__", "__name__"}) {
    if (py::hasattr(function, attribute)) {
      py::object name = function.attr(attribute);
      if (py::isinstance<py::str>(name)) return name.cast<std::string>();
    }
  }
  return py::repr(function).cast<std::string>();
}

std::function<void()> python_host_callback(py::handle function, py::args args, const char* api, const char* context) {
  if (!PyCallable_Check(function.ptr())) throw WrongType(std::string(api) + " needs a callable");
  Hold callable = hold_python(function);
  Hold arguments = hold_python(args);
  return [callable, arguments, context]() {
    py::gil_scoped_acquire gil;
    auto* fn = static_cast<PyObject*>(const_cast<void*>(callable.get()));
    auto* argv = static_cast<PyObject*>(const_cast<void*>(arguments.get()));
    try {
      py::reinterpret_borrow<py::object>(fn)(*py::reinterpret_borrow<py::tuple>(argv));
    } catch (py::error_already_set& error) {
      Hold stored = hold_python_error(error, context);
      // The stream the callback was launched or replayed on: its synchronize() reports the error.
      if (Stream* running = HostCallbacks::running_stream()) running->store_callback_error(std::move(stored));
    }
  };
}

}  // namespace cuweave::bindings
