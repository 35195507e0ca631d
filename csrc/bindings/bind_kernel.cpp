// Runtime-compiled kernels: compile (NVRTC), load, and launch with arguments checked against the
// kernel's parameter sizes. Caching lives in the Python layer (cuweave/kernels.py).
//
// Note [Kernel launches without the dispatcher]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// kernel(grid, block, args, shared_mem=0, stream=None) is called in tight loops, and through pybind11
// it cost about 1 us more than the CUDA launch behind it (H200: 3.39 us per launch, raw CUDA 2.43):
// CPython's slot_tp_call looked __call__ up and bound a method, the call went through a tuple, and the
// dispatcher built its argument vectors and ran a caster per argument. As Stream's hot methods do (Note
// [Hot stream methods without the dispatcher]), Kernel's call skips all of that:
//  - Kernel instances speak CPython's vectorcall protocol. py::custom_type_setup gives the type room for
//    a vectorcall pointer after pybind11's instance layout (before PyType_Ready, so nothing is patched on
//    a live type) and an allocator that stores `kernel_vectorcall` there; `kernel(...)` then goes from
//    the interpreter to kernel_vectorcall with no tuple, dict or bound method.
//  - kernel_vectorcall binds the well-formed calls itself: grid, block and args by position or name,
//    shared_mem and stream by name (names compared by pointer first: call sites intern them), shared_mem
//    an exact int that fits size_t. Anything else (a wrong count, an unknown or repeated keyword, a
//    shared_mem that needs converting, an instance without a kernel) goes to the same launch bound
//    through pybind11 (`launch_through_pybind11`), so every conversion and every error message stays
//    exactly what pybind11 gave. C++ exceptions from the launch are translated as the dispatcher does.
//  - tp_call (CPython's fallback: instances of Python subclasses, whose memory CPython allocates, and
//    explicit kernel.__call__(...)) unpacks into the same function. Kernel.__call__ is a wrapper
//    descriptor for that tp_call carrying pybind11's docstring; CPython recognizes its own wrapper
//    descriptors (update_slot), so assigning it keeps the slot on our function and vectorcall enabled.
//    bind_kernel checks both after the assignment (and restores CPython's own descriptor otherwise).
// The argument packing itself is kernel_arguments.cpp's (exact-type checks first, inline storage).
#include <cstddef>
#include <string>
#include <typeinfo>

#include "bindings/arrays.hpp"
#include "bindings/devices.hpp"
#include "bindings/exception_translation.hpp"
#include "bindings/gil.hpp"
#include "bindings/kernel_arguments.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/streams.hpp"
#include "cuweave/sanitizer.hpp"
#if __has_include(<pybind11/detail/exception_translation.h>)
#include <pybind11/detail/exception_translation.h>
#define CUWEAVE_HAS_PYBIND11_TRANSLATION 1
#endif
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/kernel.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"

namespace cuweave::bindings {

namespace {

const char* const kCallDoc =
    "Launches on `stream` (default: current). grid and block: an int or 1 to 3 ints. args: one per kernel "
    "parameter: device arrays (any GPU array; passed as pointers and kept alive until the kernel is done), "
    "NumPy scalars (must match the parameter's size), Python ints (checked against the parameter's size) "
    "and floats (float for 4-byte, double for 8-byte parameters).";

// Set once by bind_kernel (module import, under the GIL) and kept for good.
const py::detail::type_info* kernel_info = nullptr;
PyObject* launch_through_pybind11 = nullptr;  // the pybind11-bound launch (a function taking self first)
Py_ssize_t vectorcall_offset = 0;              // where a Kernel instance keeps its vectorcall pointer
PyObject* keyword_names[5] = {};               // interned: grid, block, args, shared_mem, stream
enum Parameter { kGrid, kBlock, kArgs, kSharedMem, kStream, kParameters };

// Note [Casts off the launch's fast path]
// pybind11's dispatcher opens a loader_life_support frame around every call: a cast that makes a temporary (an
// implicit conversion, a string_view of a str) keeps it there until the call returns, and fails with no frame
// open. The launch's usual arguments (exact ints and floats, cuweave's own arrays and streams) are read without
// casts, so the frame, a tenth of a tiny launch's own work, is opened only where a cast may happen: the general
// paths for extents, arguments and streams. Each keeps nothing past its own return (values are copied into the
// parameter slots, arrays and streams held by their shared_ptrs).
// The launch, whichever way the call was bound.
void launch(Kernel& self, py::handle grid, py::handle block, py::handle args, std::size_t shared_mem,
            py::handle stream_arg) {
  const Dim3 grid_dims = dim3_from(grid, "grid");
  const Dim3 block_dims = dim3_from(block, "block");
  Operation operation(self.operation_name());
  PackedArguments packed = pack(self, args, operation);
  // Note [One operation, one path]
  std::shared_ptr<Stream> stream = place_on(operation, named_stream(stream_arg), self.device());
  UnblockedEnqueue unblocked;
  self.launch(operation, stream, grid_dims, block_dims, shared_mem, packed.pointers.data());
}

// Sets the Python error for the exception being handled as pybind11's dispatcher does (registered
// translators, then pybind11's own mapping of std exceptions). Call inside a catch block.
void set_error_as_dispatcher_does() noexcept {
#ifdef CUWEAVE_HAS_PYBIND11_TRANSLATION
  py::detail::try_translate_exceptions();
#else
  set_python_error_from_current_exception();
#endif
}

// Which parameter a keyword names; -1 for none. Call sites pass interned names, so a pointer compare
// finds them; a name built at run time (kernel(**options)) is compared by value.
int keyword_parameter(PyObject* name) {
  for (int i = 0; i < kParameters; ++i) {
    if (name == keyword_names[i]) return i;
  }
  if (!PyUnicode_Check(name)) return -1;
  for (int i = 0; i < kParameters; ++i) {
    if (PyUnicode_Compare(name, keyword_names[i]) == 0) return i;
  }
  return -1;
}

// The Kernel in `self`, read without a caster; null when the instance holds none (pybind11 then raises).
Kernel* held_kernel(PyObject* self) {
  auto* instance = reinterpret_cast<py::detail::instance*>(self);
  py::detail::value_and_holder held = instance->get_value_and_holder(kernel_info, /*throw_if_missing=*/false);
  return held ? static_cast<Kernel*>(held.value_ptr()) : nullptr;
}

// Hands the call to the pybind11-bound launch, `self` first.
PyObject* call_through_pybind11(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
  PyObject* small[8];
  PyObject** stack = total + 1 <= 8 ? small : PyMem_New(PyObject*, total + 1);
  if (!stack) return PyErr_NoMemory();
  stack[0] = self;
  for (Py_ssize_t i = 0; i < total; ++i) stack[i + 1] = args[i];
  PyObject* result = PyObject_Vectorcall(launch_through_pybind11, stack, static_cast<std::size_t>(nargs + 1), kwnames);
  if (stack != small) PyMem_Free(stack);
  return result;
}

PyObject* kernel_vectorcall(PyObject* self, PyObject* const* args, std::size_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject* bound[kParameters] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  bool simple = nargs <= kArgs + 1;
  for (Py_ssize_t i = 0; simple && i < nargs; ++i) bound[i] = args[i];
  const Py_ssize_t keywords = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; simple && k < keywords; ++k) {
    const int parameter = keyword_parameter(PyTuple_GET_ITEM(kwnames, k));
    simple = parameter >= 0 && bound[parameter] == nullptr;
    if (simple) bound[parameter] = args[nargs + k];
  }
  std::size_t shared_mem = 0;
  if (simple && bound[kSharedMem] != nullptr) {
    simple = PyLong_CheckExact(bound[kSharedMem]);
    if (simple) {
      shared_mem = PyLong_AsSize_t(bound[kSharedMem]);
      if (shared_mem == static_cast<std::size_t>(-1) && PyErr_Occurred()) {
        PyErr_Clear();  // negative or too large: pybind11's caster refuses it with its own message
        simple = false;
      }
    }
  }
  Kernel* kernel = simple ? held_kernel(self) : nullptr;
  if (kernel == nullptr || !bound[kGrid] || !bound[kBlock] || !bound[kArgs]) {
    return call_through_pybind11(self, args, nargs, kwnames);
  }
  try {
    launch(*kernel, bound[kGrid], bound[kBlock], bound[kArgs], shared_mem,
           bound[kStream] ? bound[kStream] : Py_None);
  } catch (py::error_already_set& error) {
    error.restore();
    return nullptr;
  } catch (...) {
    set_error_as_dispatcher_does();
    return nullptr;
  }
  Py_RETURN_NONE;
}

// tp_call: a tuple and a dict, flattened into the vectorcall form (references held for the call).
PyObject* kernel_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  const Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  if (kwargs == nullptr || PyDict_GET_SIZE(kwargs) == 0) {
    return kernel_vectorcall(self, &PyTuple_GET_ITEM(args, 0), static_cast<std::size_t>(nargs), nullptr);
  }
  const Py_ssize_t keywords = PyDict_GET_SIZE(kwargs);
  py::object names = py::reinterpret_steal<py::object>(PyTuple_New(keywords));
  py::object values = py::reinterpret_steal<py::object>(PyTuple_New(nargs + keywords));  // owns the stack's references
  if (!names || !values) return nullptr;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    PyObject* item = PyTuple_GET_ITEM(args, i);
    Py_INCREF(item);
    PyTuple_SET_ITEM(values.ptr(), i, item);
  }
  Py_ssize_t position = 0;
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  for (Py_ssize_t k = 0; k < keywords; ++k) {
    PyDict_Next(kwargs, &position, &key, &value);  // the dict does not change meanwhile: no Python code runs
    Py_INCREF(key);
    PyTuple_SET_ITEM(names.ptr(), k, key);
    Py_INCREF(value);
    PyTuple_SET_ITEM(values.ptr(), nargs + k, value);
  }
  return kernel_vectorcall(self, &PyTuple_GET_ITEM(values.ptr(), 0), static_cast<std::size_t>(nargs), names.ptr());
}

// tp_alloc of Kernel: CPython's allocator, then the instance's vectorcall pointer.
PyObject* kernel_alloc(PyTypeObject* type, Py_ssize_t items) {
  PyObject* object = PyType_GenericAlloc(type, items);
  if (object != nullptr) {
    *reinterpret_cast<vectorcallfunc*>(reinterpret_cast<char*>(object) + vectorcall_offset) = kernel_vectorcall;
  }
  return object;
}

// Runs before PyType_Ready (py::custom_type_setup): room for the vectorcall pointer, and the call slots.
void set_up_kernel_type(PyHeapTypeObject* heap_type) {
  PyTypeObject* type = &heap_type->ht_type;
  vectorcall_offset = type->tp_basicsize;
  type->tp_basicsize += static_cast<Py_ssize_t>(sizeof(vectorcallfunc));
  type->tp_vectorcall_offset = vectorcall_offset;
  type->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
  type->tp_call = kernel_call;
  type->tp_alloc = kernel_alloc;
}

// Replaces the __call__ wrapper descriptor PyType_Ready made ("Call self as a function.") by one with the
// docstring pybind11 gave __call__ (signature line first, as pybind11-stubgen reads it). The wrapperbase
// is CPython's own for __call__, copied with that doc: CPython recognizes it by its name and wrapper
// function, and keeps tp_call on kernel_call.
void document_call(PyTypeObject* type, const std::string& pybind11_doc) {
  static wrapperbase call_base;  // kept for good: the descriptor points at it and at doc
  static std::string doc;
  py::object made = py::handle(reinterpret_cast<PyObject*>(type)).attr("__dict__")["__call__"];
  if (!Py_IS_TYPE(made.ptr(), &PyWrapperDescr_Type)) return;
  auto* descriptor = reinterpret_cast<PyWrapperDescrObject*>(made.ptr());
  if (descriptor->d_wrapped != reinterpret_cast<void*>(kernel_call)) return;
  call_base = *descriptor->d_base;
  doc = pybind11_doc;
  call_base.doc = doc.c_str();
  py::object documented = py::reinterpret_steal<py::object>(
      PyDescr_NewWrapper(type, &call_base, reinterpret_cast<void*>(kernel_call)));
  if (!documented) throw py::error_already_set();
  py::setattr(reinterpret_cast<PyObject*>(type), "__call__", documented);
  if (type->tp_call != kernel_call || !PyType_HasFeature(type, Py_TPFLAGS_HAVE_VECTORCALL)) {
    // Not so on any CPython this was checked on; CPython's own descriptor keeps every call correct.
    py::setattr(reinterpret_cast<PyObject*>(type), "__call__", made);
  }
}

}  // namespace

namespace {
// Kernels come from cuweave.compile(); the constructor loads what it compiled.
const CallShape kKernelCall{"Kernel()", "Kernel(binary, lowered_name, device=None)"};
}  // namespace

void bind_kernel(py::module_& m) {
  m.def(
      "compile_kernel",
      [](const std::string& source, const std::string& name, std::vector<std::string> options, py::handle device) {
        const int ordinal = resolve_device(device);
        CompiledKernel compiled;
        {
          ReleaseGil release;
          compiled = backend().kernels().compile(source, name, options, ordinal);
        }
        return py::make_tuple(py::bytes(compiled.binary), compiled.lowered_name, compiled.log);
      },
      py::arg("source"), py::arg("name"), py::arg("options"), py::arg("device") = py::none(),
      "Compiles CUDA C++ for the device's architecture: (cubin, lowered name, log). Use cuweave.compile(), which "
      "caches.");

  py::class_<DeclaredAccess>(m, "DeclaredAccess",
                             "A kernel argument whose access is declared for one launch: cuweave.reads(array) or "
                             "cuweave.writes(array).")
      .def(py::init([](py::handle array, bool writes) {
             return DeclaredAccess{as_device_array(array),
                                   writes ? sanitizer::AccessKind::Write : sanitizer::AccessKind::Read};
           }),
           py::arg("array"), py::arg("writes"))
      .def_property_readonly("array", [](const DeclaredAccess& self) { return self.array; })
      .def_property_readonly("writes", [](const DeclaredAccess& self) { return self.kind != sanitizer::AccessKind::Read; })
      .def("__repr__", [](const DeclaredAccess& self) {
        return std::string(self.kind == sanitizer::AccessKind::Read ? "cuweave.reads" : "cuweave.writes") + "(<array of " +
               std::to_string(self.array->nbytes()) + " bytes>)";
      });

  py::class_<Kernel, std::shared_ptr<Kernel>> kernel_class(m, "Kernel", py::dynamic_attr(),
                                                            py::custom_type_setup(set_up_kernel_type), R"doc(
A CUDA kernel compiled at run time and loaded on a device (made by cuweave.compile()). Call it as
``kernel(grid, block, args, shared_mem=0, stream=None)``.)doc");
  kernel_class
      .def(py::init([](py::bytes binary, const std::string& lowered_name, py::handle device) {
             return std::make_shared<Kernel>(std::string(binary), lowered_name, resolve_device(device));
           }),
           py::arg("binary"), py::arg("lowered_name"), py::arg("device") = py::none())
      .def(py::init(misfit_init<Kernel>(kKernelCall)))
      .def_property_readonly("name", &Kernel::name, "The kernel's symbol (mangled for C++ kernels).")
      .def_property_readonly("device", &Kernel::device)
      .def_property_readonly("parameter_sizes", &Kernel::parameter_sizes)
      .def_property(
          "programmatic", &Kernel::programmatic,
          flag_setter(&Kernel::set_programmatic, "Kernel.programmatic", "programmatic"),
          "False by default. True: each launch may start while the previous kernel on its stream is still running "
          "(CUDA's programmatic dependent launch, compute capability 9.0), hiding the launch's ramp-up in chains of "
          "short kernels. The kernel must call cudaGridDependencySynchronize() (or asm(\"griddepcontrol.wait;\")) "
          "before it reads anything the previous kernel writes. Captured launches become programmatic edges.")
      .def_property(
          "read_only",
          [](const Kernel& self) {
            py::list indices;
            const std::vector<bool> flags = self.read_only();
            for (std::size_t i = 0; i < flags.size(); ++i) {
              if (flags[i]) indices.append(i);
            }
            return py::tuple(indices);
          },
          [](Kernel& self, py::iterable indices) {
            std::vector<bool> flags(self.parameter_sizes().size(), false);
            for (py::handle item : indices) {
              if (!PyLong_Check(item.ptr()) || py::isinstance<py::bool_>(item)) {
                throw WrongType("read_only takes parameter indices (ints), got " +
                                std::string(Py_TYPE(item.ptr())->tp_name));
              }
              const auto index = item.cast<std::int64_t>();
              CUWEAVE_EXPECTS(index >= 0 && static_cast<std::size_t>(index) < flags.size(),
                              "parameter " + std::to_string(index) + " does not exist: the kernel has " +
                                  std::to_string(flags.size()) + " parameters");
              flags[static_cast<std::size_t>(index)] = true;
            }
            self.set_read_only(std::move(flags));
          },
          "The parameters (indices) the kernel only reads through, for the stream-race sanitizer: device "
          "arrays passed there count as read, the others as read and written. cuweave.compile() fills it with "
          "the const-pointer parameters of the kernel's signature; assign a tuple of indices to declare others.");

  // Note [Kernel launches without the dispatcher]: the launch bound through pybind11 as __call__ was, for
  // the calls kernel_vectorcall does not bind itself; not an attribute of the class.
  py::cpp_function bound_launch(
      [](Kernel& self, py::handle grid, py::handle block, py::handle args, std::size_t shared_mem,
         py::handle stream_arg) { launch(self, grid, block, args, shared_mem, stream_arg); },
      py::name("__call__"), py::is_method(kernel_class), py::arg("grid"), py::arg("block"), py::arg("args"),
      py::kw_only(), py::arg("shared_mem") = 0, py::arg("stream") = py::none(), kCallDoc);
  // A method is an instancemethod around the function; call the function, which takes self first.
  PyObject* function = bound_launch.ptr();
  if (PyInstanceMethod_Check(function)) function = PyInstanceMethod_GET_FUNCTION(function);
  launch_through_pybind11 = py::reinterpret_borrow<py::object>(function).release().ptr();  // kept for good

  kernel_info = py::detail::get_type_info(typeid(Kernel));
  const char* names[kParameters] = {"grid", "block", "args", "shared_mem", "stream"};
  for (int i = 0; i < kParameters; ++i) {
    keyword_names[i] = PyUnicode_InternFromString(names[i]);  // kept for good
    if (keyword_names[i] == nullptr) throw py::error_already_set();
  }
  document_call(reinterpret_cast<PyTypeObject*>(kernel_class.ptr()), bound_launch.attr("__doc__").cast<std::string>());
}

}  // namespace cuweave::bindings
