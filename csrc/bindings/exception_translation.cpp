// Translates the core's C++ exceptions into the Python types documented in python/cuweave/errors.py.
#include "cuweave/errors.hpp"

#include <functional>

#include "cuweave/interruptible_wait.hpp"
#include "cuweave/sanitizer.hpp"

#include "bindings/exception_translation.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/races.hpp"

namespace cuweave::bindings {

namespace {
py::dict& error_types() {
  static auto* types = new py::dict;  // leaked: the translator may run during interpreter exit
  return *types;
}

PyObject* python_type(const char* name, PyObject* fallback) {
  py::dict& types = error_types();
  if (types.contains(name)) return types[name].ptr();
  return fallback;
}

void raise_backend_error(const BackendError& error, const char* type_name,
                         const std::function<void(py::object&)>& more_attributes = {}) {
  PyObject* type = python_type(type_name, PyExc_RuntimeError);
  py::object instance = py::reinterpret_borrow<py::object>(type)(error.what());
  instance.attr("code") = error.code();
  instance.attr("name") = error.name();
  instance.attr("call") = error.call();
  if (more_attributes) more_attributes(instance);
  PyErr_SetObject(type, instance.ptr());
}
}  // namespace

void set_error_types(py::dict types) { error_types() = std::move(types); }

namespace {
// Sets the Python error for one of the core's exception types; false if `pointer` is none of them.
bool translate_core_exception(std::exception_ptr pointer) {
  try {
    std::rethrow_exception(pointer);
  } catch (const DeviceUnavailable& error) {
    raise_backend_error(error, "DeviceUnavailableError");
  } catch (const ContextLost& error) {
    raise_backend_error(error, "ContextLostError", [&](py::object& instance) {
      instance.attr("first_call") = error.first_call();
      instance.attr("first_name") = error.first_name();
    });
  } catch (const BackendError& error) {
    const std::string& name = error.name();
    const bool capture = name.rfind("cudaErrorStreamCapture", 0) == 0 || name == "cudaErrorCapturedEvent";
    const bool nccl = name.rfind("nccl", 0) == 0 || name == "NCCL_NOT_FOUND" || name == "NCCL_SYMBOL_MISSING";
    raise_backend_error(error, name == "cudaErrorMemoryAllocation" ? "OutOfMemoryError"
                               : capture                          ? "CaptureError"
                               : nccl                             ? "NcclError"
                                                                  : "CudaError");
  } catch (const CompileError& error) {
    PyObject* type = python_type("CompileError", PyExc_RuntimeError);
    py::object instance = py::reinterpret_borrow<py::object>(type)(error.what());
    instance.attr("log") = error.log();
    PyErr_SetObject(type, instance.ptr());
  } catch (const sanitizer::RaceFound& error) {
    PyObject* type = python_type("RaceError", PyExc_RuntimeError);
    py::object instance = py::reinterpret_borrow<py::object>(type)(error.what());
    instance.attr("races") = races_to_python(error.conflicts());
    PyErr_SetObject(type, instance.ptr());
  } catch (const WrongType& error) {
    PyErr_SetString(PyExc_TypeError, error.what());
  } catch (const InvalidArgument& error) {
    PyErr_SetString(PyExc_ValueError, error.what());
  } catch (const Timeout& error) {
    PyErr_SetString(PyExc_TimeoutError, error.what());
  } catch (const OutOfBounds& error) {
    PyErr_SetString(PyExc_IndexError, error.what());
  } catch (...) {
    return false;
  }
  return true;
}
}  // namespace

void set_python_error_from_current_exception() noexcept {
  std::exception_ptr pointer = std::current_exception();
  try {
    if (translate_core_exception(pointer)) return;
    std::rethrow_exception(pointer);
  } catch (py::error_already_set& error) {
    error.restore();
  } catch (const py::builtin_exception& error) {
    error.set_error();
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_RuntimeError, error.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception in cuweave");
  }
}

namespace {
unsigned long main_thread_ident = 0;  // Python's main thread, the only one that runs signal handlers

// Note [Interruptible waits]: between slices of a wait, run Python's signal handlers on the main thread,
// so that Ctrl-C raises KeyboardInterrupt out of the wait.
void check_python_signals() {
  if (PyThread_get_thread_ident() != main_thread_ident) return;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}
}  // namespace

void bind_errors(py::module_& m) {
  main_thread_ident = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  set_interrupt_check(&check_python_signals);
  m.def("_set_error_types", &set_error_types);
  py::register_exception_translator([](std::exception_ptr pointer) {
    if (pointer && !translate_core_exception(pointer)) std::rethrow_exception(pointer);
  });
}

}  // namespace cuweave::bindings
