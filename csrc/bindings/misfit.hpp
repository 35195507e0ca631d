// Note [Calls that do not fit]
// pybind11 answers a call that matches no overload with its own text ("incompatible constructor arguments",
// the C++ types of each overload). cuweave's public functions, constructors and methods end their overloads with a
// catch-all (misfit_call, misfit_init; for methods, bind_method_misfits) that raises a TypeError in cuweave's
// words instead: the keyword it does not
// take and, where another library (PyTorch, CuPy, torch.distributed) spells an argument differently, cuweave's
// spelling; a stream passed by position, which cuweave takes as stream= only; and always the signature. A class
// only cuweave makes says what makes one (made_elsewhere).
#pragma once

#include <initializer_list>
#include <string>

#include "bindings/pybind.hpp"
#include "cuweave/errors.hpp"

namespace cuweave::bindings {

// An argument another library spells differently: `theirs` (a keyword) means `ours` in cuweave.
struct Spelling {
  const char* theirs;
  const char* ours;  // what to write instead, e.g. "timing=True"
  const char* who;   // whose spelling, e.g. "PyTorch's and CuPy's"
};

// How a call should look: `call` as in messages ("Event()"), and `signature`, the whole of it in Python's
// notation ("Event(*, timing=False, blocking=False, interprocess=False, device=None)"), from which the message
// reads the parameters taken by position (those before `*`) and the keywords.
struct CallShape {
  const char* call;
  const char* signature;
  std::initializer_list<Spelling> spellings = {};
};

// Whether `args` and `kwargs` name only parameters `shape` has (their types unchecked).
bool names_fit(const CallShape& shape, const py::args& args, const py::kwargs& kwargs);
// The TypeError for a call of `shape` with `args` and `kwargs` that bound to no overload.
[[noreturn]] void refuse_misfit(const CallShape& shape, const py::args& args, const py::kwargs& kwargs);

// The catch-all overload's body: `.def(py::init(misfit_init<T>(shape)))` or `m.def(name, misfit_call(shape))`
// after the real overload. The real overload's parameters are Python objects checked by its body (flag(),
// text()), so that pybind11's first pass, which takes no conversions, binds it whenever the keywords fit.
template <typename T>
auto misfit_init(const CallShape& shape) {
  return [&shape](const py::args& args, const py::kwargs& kwargs) -> std::shared_ptr<T> {
    refuse_misfit(shape, args, kwargs);
  };
}
inline auto misfit_call(const CallShape& shape) {
  return [&shape](const py::args& args, const py::kwargs& kwargs) -> py::object { refuse_misfit(shape, args, kwargs); };
}

// The constructor of a class only cuweave makes: a TypeError saying what makes one (`how`) rather than
// pybind11's "No constructor defined!". `.def(py::init(made_elsewhere<T>("DeviceArray", "...")))`.
template <typename T>
auto made_elsewhere(const char* name, const char* how) {
  return [name, how](const py::args&, const py::kwargs&) -> T* {
    throw WrongType(std::string("cuweave.") + name + " objects are not made directly: " + how);
  };
}

// The catch-alls of the module's functions that take only Python objects (so that pybind11's first pass binds
// their real overload whenever the call fits): called once every binding is defined.
void bind_misfit_overloads(py::module_& m);
// The catch-alls of every public method of the module's classes, each worded from the method's own signature
// (method_misfits.cpp): called once every binding is defined.
void bind_method_misfits(py::module_& m);

// A True/False argument (a Python or NumPy bool); TypeError naming `call` and `name` otherwise.
bool flag(py::handle value, const char* call, const char* name);
// The setter of a bool property that refuses anything but a bool as flag() does.
template <typename T>
auto flag_setter(void (T::*set)(bool), const char* call, const char* name) {
  return [set, call, name](T& self, py::handle on) { (self.*set)(flag(on, call, name)); };
}
// An int argument (a Python or NumPy integer, not a bool); TypeError naming `call` and `name` otherwise.
int whole_number(py::handle value, const char* call, const char* name);
// A str argument; TypeError naming `call` and `name` otherwise.
std::string text(py::handle value, const char* call, const char* name);

}  // namespace cuweave::bindings
