// Note [Calls that do not fit]
// pybind11 answers a call that matches no overload with its own text ("incompatible constructor arguments",
// the C++ types of each overload). cuweave's entry points that users call with other libraries' habits end their
// overloads with a catch-all (misfit_overload) that raises a TypeError in cuweave's words instead: the keyword it
// does not take and, where PyTorch or CuPy spell an argument differently, cuweave's spelling; a stream passed by
// position, which cuweave takes as stream= only; and always the signature.
#pragma once

#include <initializer_list>
#include <string>

#include "bindings/common.hpp"

namespace cuweave::bindings {

// An argument another library spells differently: `theirs` (a keyword) means `ours` in cuweave.
struct Spelling {
  const char* theirs;
  const char* ours;  // what to write instead, e.g. "timing=True"
  const char* who;   // whose spelling, e.g. "PyTorch's and CuPy's"
};

// How a call should look: `call` as in messages ("Event()"), `signature` the whole of it
// ("Event(*, timing=False, blocking=False, interprocess=False, device=None)"), the positional parameters'
// count and the keywords it takes.
struct CallShape {
  const char* call;
  const char* signature;
  int positional;
  std::initializer_list<const char*> keywords;
  std::initializer_list<Spelling> spellings = {};
};

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

// A True/False argument (a Python or NumPy bool); TypeError naming `call` and `name` otherwise.
bool flag(py::handle value, const char* call, const char* name);
// A str argument; TypeError naming `call` and `name` otherwise.
std::string text(py::handle value, const char* call, const char* name);

}  // namespace cuweave::bindings
