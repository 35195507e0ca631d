#include "bindings/misfit.hpp"

#include <algorithm>
#include <cstring>

#include "cuweave/errors.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

namespace {

bool takes(const CallShape& shape, const std::string& keyword) {
  return std::any_of(shape.keywords.begin(), shape.keywords.end(),
                     [&](const char* name) { return keyword == name; });
}

// A stream of any library: cuweave's, or anything speaking the stream protocol (PyTorch's, CuPy's).
bool looks_like_stream(py::handle value) {
  return py::isinstance<Stream>(value) || py::hasattr(value, "__cuda_stream__") ||
         (py::hasattr(value, "cuda_stream") && py::hasattr(value, "synchronize")) ||
         (py::hasattr(value, "ptr") && py::hasattr(value, "synchronize") && !py::hasattr(value, "shape"));
}

std::string type_name(py::handle value) { return Py_TYPE(value.ptr())->tp_name; }

}  // namespace

void refuse_misfit(const CallShape& shape, const py::args& args, const py::kwargs& kwargs) {
  std::string why;
  for (const auto& item : kwargs) {
    const std::string keyword = py::str(item.first);
    if (takes(shape, keyword)) continue;
    for (const Spelling& spelling : shape.spellings) {
      if (keyword == spelling.theirs) {
        why = std::string(shape.call) + " takes " + spelling.ours + ", not " + keyword + "= (" + spelling.who +
              " spelling)";
        break;
      }
    }
    if (why.empty()) why = std::string(shape.call) + " got an unexpected keyword argument '" + keyword + "'";
    break;
  }
  if (why.empty() && static_cast<int>(args.size()) > shape.positional) {
    const py::handle extra = args[static_cast<std::size_t>(shape.positional)];
    if (looks_like_stream(extra) && takes(shape, "stream")) {
      why = std::string(shape.call) + " takes the stream as a keyword, stream=s, not by position";
    } else {
      why = std::string(shape.call) + " takes " + std::to_string(shape.positional) + " positional argument" +
            (shape.positional == 1 ? "" : "s") + " but " + std::to_string(args.size()) + " were given";
    }
  }
  if (why.empty()) {
    std::string given;
    for (const py::handle value : args) given += (given.empty() ? "" : ", ") + type_name(value);
    for (const auto& item : kwargs) {
      given += (given.empty() ? "" : ", ") + py::str(item.first).cast<std::string>() + "=" + type_name(item.second);
    }
    why = std::string(shape.call) + " cannot take these arguments (" + (given.empty() ? "none" : given) + ")";
  }
  throw WrongType(why + "; the signature is " + shape.signature);
}

bool flag(py::handle value, const char* call, const char* name) {
  if (PyBool_Check(value.ptr())) return value.ptr() == Py_True;
  static PyObject* numpy_bool = py::object(py::module_::import("numpy").attr("bool_")).release().ptr();
  if (PyObject_IsInstance(value.ptr(), numpy_bool) == 1) return PyObject_IsTrue(value.ptr()) == 1;
  throw WrongType(std::string(call) + " takes " + name + "=True or False, not " + type_name(value));
}

std::string text(py::handle value, const char* call, const char* name) {
  if (!PyUnicode_Check(value.ptr())) {
    throw WrongType(std::string(call) + " takes " + name + "= as a str, not " + type_name(value));
  }
  return value.cast<std::string>();
}

}  // namespace cuweave::bindings
