#include "bindings/misfit.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "cuweave/errors.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

namespace {

// The parameters `signature` names: how many may come by position (those before a bare `*`), and every
// parameter's name (each may come by keyword).
struct Parameters {
  std::size_t positional = 0;
  std::vector<std::string> names;
};

Parameters parameters_of(const std::string& signature) {
  Parameters parameters;
  const std::size_t open = signature.find('('), close = signature.rfind(')');
  bool keyword_only = false;
  std::size_t start = open + 1;
  while (start < close) {
    std::size_t end = signature.find(',', start);
    if (end == std::string::npos || end > close) end = close;
    std::string parameter = signature.substr(start, end - start);
    parameter.erase(0, parameter.find_first_not_of(' '));
    parameter = parameter.substr(0, parameter.find('='));
    if (parameter == "*") {
      keyword_only = true;
    } else if (!parameter.empty()) {
      parameters.names.push_back(parameter);
      if (!keyword_only) ++parameters.positional;
    }
    start = end + 1;
  }
  return parameters;
}

// A stream of any library: cuweave's, or anything speaking the stream protocol (PyTorch's, CuPy's).
bool looks_like_stream(py::handle value) {
  return py::isinstance<Stream>(value) || py::hasattr(value, "__cuda_stream__") ||
         (py::hasattr(value, "cuda_stream") && py::hasattr(value, "synchronize")) ||
         (py::hasattr(value, "ptr") && py::hasattr(value, "synchronize") && !py::hasattr(value, "shape"));
}

std::string type_name(py::handle value) { return Py_TYPE(value.ptr())->tp_name; }

}  // namespace

bool names_fit(const CallShape& shape, const py::args& args, const py::kwargs& kwargs) {
  const Parameters parameters = parameters_of(shape.signature);
  auto has = [&](const std::string& name) {
    return std::find(parameters.names.begin(), parameters.names.end(), name) != parameters.names.end();
  };
  if (args.size() > parameters.positional && !has("*args")) return false;
  for (const auto& item : kwargs) {
    if (!has(py::str(item.first)) && !has("**kwargs")) return false;
  }
  return true;
}

void refuse_misfit(const CallShape& shape, const py::args& args, const py::kwargs& kwargs) {
  const Parameters parameters = parameters_of(shape.signature);
  auto has = [&](const std::string& name) {
    return std::find(parameters.names.begin(), parameters.names.end(), name) != parameters.names.end();
  };
  auto takes = [&](const std::string& keyword) { return has(keyword) || has("**kwargs"); };
  std::string why;
  for (const auto& item : kwargs) {
    const std::string keyword = py::str(item.first);
    if (takes(keyword)) continue;
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
  if (why.empty() && args.size() > parameters.positional) {
    const py::handle extra = args[parameters.positional];
    const auto positional_end = parameters.names.begin() + static_cast<std::ptrdiff_t>(parameters.positional);
    const bool stream_by_position = std::find(parameters.names.begin(), positional_end, "stream") != positional_end;
    if (looks_like_stream(extra) && takes("stream") && !stream_by_position) {
      why = std::string(shape.call) + " takes the stream as a keyword, stream=s, not by position";
    } else {
      why = std::string(shape.call) + " takes " + std::to_string(parameters.positional) + " positional argument" +
            (parameters.positional == 1 ? "" : "s") + " but " + std::to_string(args.size()) +
            (args.size() == 1 ? " was" : " were") + " given";
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

int whole_number(py::handle value, const char* call, const char* name) {
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr())) {
    throw WrongType(std::string(call) + " takes " + name + "= as an int, not " + type_name(value));
  }
  return py::cast<int>(py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr())));
}

std::string text(py::handle value, const char* call, const char* name) {
  if (!PyUnicode_Check(value.ptr())) {
    throw WrongType(std::string(call) + " takes " + name + "= as a str, not " + type_name(value));
  }
  return value.cast<std::string>();
}

namespace {
const CallShape kFunctionShapes[] = {
    {"asarray()", "asarray(array)"},
    {"from_dlpack()", "from_dlpack(array)"},
    {"is_pinned()", "is_pinned(array)"},
    {"pinned_empty()", "pinned_empty(shape, dtype=numpy.float64)"},
    {"pinned_zeros()", "pinned_zeros(shape, dtype=numpy.float64)"},
    {"pinned_pool()", "pinned_pool()"},
    {"staging_stats()", "staging_stats(device=None)"},
    {"collect()", "collect()"},
    {"current_stream()", "current_stream()"},
    {"default_stream()", "default_stream(device=None)"},
    {"per_thread_default_stream()", "per_thread_default_stream(device=None)"},
    {"driver_version()", "driver_version()"},
    {"runtime_version()", "runtime_version()"},
    {"ops.sum()", "sum(x, *, out=None, stream=None)"},
};
const char* const kFunctionNames[] = {"asarray", "from_dlpack", "is_pinned", "pinned_empty", "pinned_zeros",
                                      "pinned_pool", "staging_stats", "collect", "current_stream", "default_stream",
                                      "per_thread_default_stream", "driver_version", "runtime_version", "ops.sum"};
static_assert(std::size(kFunctionShapes) == std::size(kFunctionNames));
}  // namespace

void bind_misfit_overloads(py::module_& m) {
  for (std::size_t i = 0; i < std::size(kFunctionNames); ++i) {
    // "submodule.function" names a submodule's function.
    const std::string name = kFunctionNames[i];
    const std::size_t dot = name.find('.');
    py::module_ owner = dot == std::string::npos ? m : m.attr(name.substr(0, dot).c_str()).cast<py::module_>();
    owner.def(name.substr(dot + 1).c_str(), misfit_call(kFunctionShapes[i]));
  }
}

}  // namespace cuweave::bindings
