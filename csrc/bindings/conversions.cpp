// Shapes and dtypes between Python and the core. None of these touch a device, so bad input is
// reported the same way with or without a GPU.
#include "bindings/dtypes.hpp"

#include <string>
#include <unordered_map>

#include "bindings/pybind.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"

namespace cuweave::bindings {

DType dtype_from_python(py::handle dtype) {
  py::dtype numpy_dtype;
  try {
    numpy_dtype = py::dtype::from_args(py::reinterpret_borrow<py::object>(dtype));
  } catch (py::error_already_set&) {
    throw WrongType("not a dtype: " + py::repr(dtype).cast<std::string>());
  }
  if (numpy_dtype.attr("hasobject").cast<bool>() || numpy_dtype.attr("fields").ptr() != Py_None) {
    throw WrongType("unsupported dtype " + py::str(numpy_dtype).cast<std::string>() +
                    ": device arrays hold bool, integer, float or complex numbers");
  }
  std::string typestr = numpy_dtype.attr("str").cast<std::string>();
  if (typestr.size() > 1 && typestr[0] == '=') typestr[0] = '<';
  return DType::from_typestr(typestr);
}

py::dtype dtype_to_python(const DType& dtype) {
  // NumPy's dtypes are immutable, and parsing a typestr costs about a microsecond: every `array.dtype` (the
  // signature a woven function computes on each call reads it per array) takes the one made first for its
  // typestr. The map is only touched with the GIL held, and never destroyed (its objects outlive the interpreter).
  static auto* made = new std::unordered_map<std::string, py::dtype>();
  auto found = made->find(dtype.typestr);
  if (found == made->end()) found = made->emplace(dtype.typestr, py::dtype(dtype.typestr)).first;
  return found->second;
}

std::vector<std::int64_t> shape_from_python(py::handle shape) {
  std::vector<std::int64_t> extents;
  auto extent = [](py::handle value) -> std::int64_t {
    if (py::isinstance<py::bool_>(value) || !PyIndex_Check(value.ptr())) {
      throw WrongType(std::string("shape entries must be ints, not ") + Py_TYPE(value.ptr())->tp_name);
    }
    const auto n = py::cast<std::int64_t>(value);
    CUWEAVE_EXPECTS(n >= 0, "array dimensions must not be negative (got " + std::to_string(n) + ")");
    return n;
  };
  if (PyIndex_Check(shape.ptr()) && !py::isinstance<py::bool_>(shape)) {
    extents.push_back(extent(shape));
  } else if (py::isinstance<py::sequence>(shape) && !py::isinstance<py::str>(shape)) {
    for (py::handle value : py::reinterpret_borrow<py::sequence>(shape)) extents.push_back(extent(value));
  } else {
    throw WrongType(std::string("shape must be an int or a sequence of ints, not ") + Py_TYPE(shape.ptr())->tp_name);
  }
  DeviceArray::element_count(extents);  // rejects overflow
  return extents;
}

namespace {
std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

std::string dtype_name(const std::string& typestr) { return py::str(py::dtype(typestr)).cast<std::string>(); }
}  // namespace

void check_same_layout(const char* what, const std::vector<std::int64_t>& shape, const std::string& typestr,
                       const std::vector<std::int64_t>& expected_shape, const std::string& expected_typestr) {
  if (typestr != expected_typestr) {
    throw WrongType(std::string(what) + " has dtype " + dtype_name(typestr) + ", expected " +
                    dtype_name(expected_typestr) + " (cuweave never converts; convert one side first)");
  }
  if (shape != expected_shape) {
    throw InvalidArgument(std::string(what) + " has shape " + shape_text(shape) + ", expected " +
                          shape_text(expected_shape) + " (cuweave does not broadcast)");
  }
}

}  // namespace cuweave::bindings
