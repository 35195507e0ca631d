// Note [Hot functions without the dispatcher]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// pybind11's dispatcher finds keyword arguments by name, making and hashing a Python string per parameter
// on every call, and its casters look each argument's type up in a table. For cuweave.ops.add(x, 1.0,
// out=x, stream=s) that was most of the call: measured on the CPU machine with the kernel launch stubbed
// out (the simulator's, locally), 600 ns per call against 130 ns for a compiled kernel's launch, which
// skips both (bind_kernel.cpp); 210 ns once the dispatcher was gone.
// The built-in kernels' functions are therefore plain CPython functions (METH_FASTCALL | METH_KEYWORDS):
// FastSignature binds their arguments as Python binds a def's, and exact cuweave arrays are read without a
// caster (exact_device_array). Errors are Python's own wording for a call that does not fit.
#pragma once

#include <Python.h>

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace cuweave::bindings {

// A METH_FASTCALL (| METH_KEYWORDS) function as the PyCFunction a PyMethodDef holds; CPython calls it with
// the signature its flags name.
template <auto Function>
constexpr PyCFunction as_method() {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Function));
}

class FastSignature {
 public:
  // `function` as errors name it ("add()"); the first `positional` parameters may come by position, the
  // rest are keyword-only; the first `required` have no default (the others default to None).
  FastSignature(const char* function, std::initializer_list<const char*> names, std::size_t positional,
                std::size_t required);

  static constexpr std::size_t kMostParameters = 8;
  std::size_t size() const noexcept { return names_.size(); }

  // Binds a call's arguments to the parameters, in order, into `bound` (size() entries, borrowed; None for
  // an absent optional one); throws WrongType (TypeError) for a call that does not fit.
  void bind(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** bound);

 private:
  int parameter(PyObject* name);  // index of the parameter a keyword names; -1 for none

  const char* function_;
  std::vector<const char*> names_;
  std::vector<PyObject*> interned_;  // names_ as interned strings (call sites' keywords are interned too)
  std::size_t positional_;
  std::size_t required_;
};

}  // namespace cuweave::bindings
