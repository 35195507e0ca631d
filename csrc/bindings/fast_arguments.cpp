#include "bindings/fast_arguments.hpp"

#include <stdexcept>
#include <string>

#include "cuweave/errors.hpp"

namespace cuweave::bindings {

FastSignature::FastSignature(const char* function, std::initializer_list<const char*> names, std::size_t positional,
                             std::size_t required)
    : function_(function), names_(names), positional_(positional), required_(required) {
  if (names_.size() > kMostParameters || positional_ > names_.size() || required_ > positional_) {
    throw std::logic_error(std::string("FastSignature of ") + function + ": bad parameter counts");
  }
}

int FastSignature::parameter(PyObject* name) {
  if (interned_.empty()) {  // first call, under the GIL
    for (const char* text : names_) interned_.push_back(PyUnicode_InternFromString(text));  // kept for good
  }
  for (std::size_t i = 0; i < interned_.size(); ++i) {
    if (name == interned_[i]) return static_cast<int>(i);
  }
  for (std::size_t i = 0; i < names_.size(); ++i) {  // a keyword built at run time (f(**options))
    if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, names_[i]) == 0) return static_cast<int>(i);
  }
  return -1;
}

void FastSignature::bind(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** bound) {
  if (static_cast<std::size_t>(nargs) > positional_) {
    throw WrongType(std::string(function_) + " takes " + std::to_string(positional_) + " positional argument" +
                    (positional_ == 1 ? "" : "s") + " but " + std::to_string(nargs) + " were given");
  }
  for (std::size_t i = 0; i < names_.size(); ++i) bound[i] = nullptr;
  for (Py_ssize_t i = 0; i < nargs; ++i) bound[i] = args[i];
  const Py_ssize_t keywords = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < keywords; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
    const int index = parameter(name);
    if (index < 0) {
      const char* text = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
      if (text == nullptr) PyErr_Clear();
      throw WrongType(std::string(function_) + " got an unexpected keyword argument '" + (text ? text : "?") + "'");
    }
    if (bound[index] != nullptr) {
      throw WrongType(std::string(function_) + " got multiple values for argument '" + names_[index] + "'");
    }
    bound[index] = args[nargs + k];
  }
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (bound[i] != nullptr) continue;
    if (i < required_) throw WrongType(std::string(function_) + " missing required argument '" + names_[i] + "'");
    bound[i] = Py_None;
  }
}

}  // namespace cuweave::bindings
