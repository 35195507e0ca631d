// Built-in kernels: fill, copy, scale, axpy, add, sum and spin. The Python layer (cuweave/ops.py)
// re-exports them and converts fill values.
#include <climits>
#include <cmath>
#include <limits>

#include "bindings/arrays.hpp"
#include "bindings/dtypes.hpp"
#include "bindings/exception_translation.hpp"
#include "bindings/fast_arguments.hpp"
#include "bindings/gil.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/streams.hpp"
#include "cuweave/arithmetic.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"
#include "cuweave/weave.hpp"

namespace cuweave::bindings {

NumericType numeric_type(const DeviceArray& array) {
  // By kind and size, not by comparing type strings: asked once per operation and array (DType refuses
  // big-endian types, so these are the little-endian ones).
  const DType& type = array.dtype();
  if (type.kind == 'f' && type.itemsize == 4) return NumericType::Float32;
  if (type.kind == 'f' && type.itemsize == 8) return NumericType::Float64;
  if (type.kind == 'i' && type.itemsize == 4) return NumericType::Int32;
  if (type.kind == 'i' && type.itemsize == 8) return NumericType::Int64;
  throw WrongType("cuweave's built-in kernels work on float32, float64, int32 and int64 arrays, not " +
                  py::str(dtype_to_python(array.dtype())).cast<std::string>());
}

// A Python (or NumPy) real number as a scalar of `type`, refusing values an integer type cannot hold
// exactly: never silent truncation.
Scalar scalar_for(py::handle value, NumericType type) {
  Scalar scalar;
  // The usual scalar, a Python float for a float array, read directly (no type tests, no pybind cast).
  if (PyFloat_CheckExact(value.ptr()) && (type == NumericType::Float32 || type == NumericType::Float64)) {
    scalar.real = PyFloat_AS_DOUBLE(value.ptr());
    return scalar;
  }
  if (py::isinstance<py::bool_>(value) || (!PyFloat_Check(value.ptr()) && !PyIndex_Check(value.ptr()) &&
                                           !py::hasattr(value, "__float__"))) {
    throw WrongType(std::string("the scalar must be a real number, not ") + Py_TYPE(value.ptr())->tp_name);
  }
  if (type == NumericType::Float32 || type == NumericType::Float64) {
    scalar.real = py::cast<double>(py::reinterpret_borrow<py::object>(value));
    return scalar;
  }
  if (PyIndex_Check(value.ptr())) {
    py::int_ integer = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(integer.ptr(), &overflow);
    const long long low = type == NumericType::Int32 ? std::numeric_limits<std::int32_t>::min() : LLONG_MIN;
    const long long high = type == NumericType::Int32 ? std::numeric_limits<std::int32_t>::max() : LLONG_MAX;
    if (overflow != 0 || v < low || v > high) {
      throw InvalidArgument("the scalar " + py::str(value).cast<std::string>() + " does not fit the array's " +
                            (type == NumericType::Int32 ? "int32" : "int64") + " type");
    }
    scalar.integer = v;
    return scalar;
  }
  const double real = py::cast<double>(py::reinterpret_borrow<py::object>(value));
  if (!std::isfinite(real) || real != std::trunc(real) || std::fabs(real) > 9.007199254740992e15) {
    throw InvalidArgument("the scalar " + py::str(value).cast<std::string>() +
                          " is not an integer; an integer array takes only whole numbers");
  }
  return scalar_for(py::int_(static_cast<long long>(real)), type);
}

namespace {

// `other` must match `reference` in dtype (TypeError) and shape (ValueError).
void check_same_layout(const DeviceArray& reference, const DeviceArray& other, const char* name) {
  if (&reference == &other) return;  // in place (out=x): nothing to compare
  bindings::check_same_layout(name, other.shape(), other.dtype().typestr, reference.shape(), reference.dtype().typestr);
}

// Queues `arithmetic` writing `out` (the operation's arrays already added and checked).
void queue_arithmetic(Operation& operation, Arithmetic arithmetic, const DeviceArray& out, Stream& stream) {
  arithmetic.out = out.data();
  arithmetic.count = out.size();
  UnblockedEnqueue unblocked;
  stream.arithmetic_async(operation, arithmetic);
}

// Whether `value` is a number (Python's, or a NumPy scalar) rather than an array: NumPy arrays answer
// __index__ too (a one-element integer array converts), so an array is never taken for a scalar.
bool is_scalar_operand(py::handle value) {
  PyObject* object = value.ptr();
  if (PyFloat_Check(object) || PyLong_Check(object)) return true;  // bool is a PyLong
  if (exact_device_array(object) != nullptr || py::isinstance<py::array>(value)) return false;
  static PyObject* numpy_scalar = py::object(py::module_::import("numpy").attr("generic")).release().ptr();
  return PyIndex_Check(object) || PyObject_IsInstance(object, numpy_scalar) == 1;
}

// `out=`, when given: an array of `like`'s layout, which `operation` writes; null when not given.
std::shared_ptr<DeviceArray> output_of(Operation& operation, const DeviceArray& like, py::handle out) {
  if (out.is_none()) return nullptr;
  auto result = as_device_array(out);
  check_same_layout(like, *result, "out");
  operation.writes(result);
  return result;
}

// The result of an operation given no `out=`: a new array of `like`'s layout, allocated in the placed stream's
// order (the weave joins the allocation to this operation), which `operation` writes.
std::shared_ptr<DeviceArray> new_output(Operation& operation, const DeviceArray& like,
                                        const std::shared_ptr<Stream>& stream) {
  auto result = DeviceArray::allocate(like.shape(), like.dtype(), stream);
  operation.writes(result);
  return result;
}

// The built-in kernels' hot functions (Note [Hot functions without the dispatcher]): each returns the array
// written, as the Python function does.

std::shared_ptr<DeviceArray> ops_copy(py::handle dst_arg, py::handle src_arg, py::handle stream_arg) {
  auto dst = as_device_array(dst_arg);
  auto src = as_device_array(src_arg);
  check_same_layout(*dst, *src, "src");
  Operation operation("copy");
  operation.reads(src).writes(dst);
  Weave* weave = Weave::active();
  if (src->device() != dst->device() && weave && stream_arg.is_none() && weave->chooses_streams()) {
    // Note [Weaving]: several devices. From another device's array the copy is itself the transfer: one copy
    // between the devices on the destination's device, not a copy kept there for later readers and another.
    std::shared_ptr<Stream> stream = place(operation, nullptr);
    peer_copy_route(*dst, *src, stream);
    UnblockedEnqueue unblocked;
    stream->copy_between_devices(operation, dst->data(), dst->device(), src->data(), src->device(), dst->nbytes());
    return dst;
  }
  std::shared_ptr<Stream> stream = placed(operation, stream_arg);
  UnblockedEnqueue unblocked;
  stream->copy_async(operation, dst->data(), operation.standing_for(src)->data(), dst->nbytes());
  return dst;
}

std::shared_ptr<DeviceArray> ops_scale(py::handle x_arg, py::handle alpha, py::handle out_arg, py::handle stream_arg) {
  auto x = as_device_array(x_arg);
  Arithmetic arithmetic{ArithmeticOp::Scale, numeric_type(*x)};
  arithmetic.alpha = scalar_for(alpha, arithmetic.type);
  Operation operation(arithmetic_operation_name(arithmetic.op));
  operation.reads(x);
  std::shared_ptr<DeviceArray> out = output_of(operation, *x, out_arg);
  std::shared_ptr<Stream> stream = placed(operation, stream_arg);
  arithmetic.x = operation.standing_for(x)->data();
  if (!out) out = new_output(operation, *x, stream);
  queue_arithmetic(operation, arithmetic, *out, *stream);
  return out;
}

std::shared_ptr<DeviceArray> ops_axpy(py::handle alpha, py::handle x_arg, py::handle y_arg, py::handle out_arg,
                                      py::handle stream_arg) {
  auto x = as_device_array(x_arg);
  auto y = as_device_array(y_arg);
  check_same_layout(*x, *y, "y");
  Arithmetic arithmetic{ArithmeticOp::Axpy, numeric_type(*x)};
  arithmetic.alpha = scalar_for(alpha, arithmetic.type);
  Operation operation(arithmetic_operation_name(arithmetic.op));
  operation.reads(x).reads(y);
  std::shared_ptr<DeviceArray> out = output_of(operation, *x, out_arg);
  std::shared_ptr<Stream> stream = placed(operation, stream_arg);
  arithmetic.x = operation.standing_for(x)->data();
  arithmetic.y = operation.standing_for(y)->data();
  if (!out) out = new_output(operation, *x, stream);
  queue_arithmetic(operation, arithmetic, *out, *stream);
  return out;
}

// out = x (op) y, element-wise: `with_array` when y is an array of x's shape and dtype, `with_scalar` when it is a
// scalar. The one descriptor a built-in element-wise operation needs: its arrays, then the shared path.
std::shared_ptr<DeviceArray> elementwise(ArithmeticOp with_array, ArithmeticOp with_scalar, const char* name,
                                         py::handle x_arg, py::handle y_arg, py::handle out_arg,
                                         py::handle stream_arg) {
  auto x = as_device_array(x_arg);
  Arithmetic arithmetic{with_array, numeric_type(*x)};
  std::shared_ptr<DeviceArray> y;
  if (is_scalar_operand(y_arg)) {
    arithmetic.op = with_scalar;
    arithmetic.alpha = scalar_for(y_arg, arithmetic.type);
  } else {
    y = as_device_array(y_arg);
    check_same_layout(*x, *y, "y");
  }
  Operation operation(name != nullptr ? name : arithmetic_operation_name(arithmetic.op));
  operation.reads(x);
  if (y) operation.reads(y);
  std::shared_ptr<DeviceArray> out = output_of(operation, *x, out_arg);
  std::shared_ptr<Stream> stream = placed(operation, stream_arg);
  arithmetic.x = operation.standing_for(x)->data();
  if (y) arithmetic.y = operation.standing_for(y)->data();
  if (!out) out = new_output(operation, *x, stream);
  queue_arithmetic(operation, arithmetic, *out, *stream);
  return out;
}

std::shared_ptr<DeviceArray> ops_add(py::handle x_arg, py::handle y_arg, py::handle out_arg, py::handle stream_arg) {
  return elementwise(ArithmeticOp::Add, ArithmeticOp::AddScalar, nullptr, x_arg, y_arg, out_arg, stream_arg);
}

// By a scalar, the scale kernel; reported as a multiply either way.
std::shared_ptr<DeviceArray> ops_multiply(py::handle x_arg, py::handle y_arg, py::handle out_arg,
                                          py::handle stream_arg) {
  return elementwise(ArithmeticOp::Multiply, ArithmeticOp::Scale, arithmetic_operation_name(ArithmeticOp::Multiply),
                     x_arg, y_arg, out_arg, stream_arg);
}

// The Python object for `result`: one of the call's arguments when it is that very array (what pybind11 would
// find in its instance table), else a new reference from pybind11.
PyObject* array_to_python(const std::shared_ptr<DeviceArray>& result, PyObject* const* bound, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    const std::shared_ptr<DeviceArray>* held = exact_device_array(bound[i]);
    if (held != nullptr && held->get() == result.get()) {
      Py_INCREF(bound[i]);
      return bound[i];
    }
  }
  return py::cast(result).release().ptr();
}

// Binds the call to `signature`, runs `body` on the bound arguments and returns the array it wrote.
PyObject* call_op(FastSignature& signature, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                  std::shared_ptr<DeviceArray> (*body)(PyObject* const* bound)) {
  PyObject* bound[FastSignature::kMostParameters];
  try {
    py::detail::loader_life_support temporaries;  // as in pybind11's dispatcher: casts inside may keep temporaries
    signature.bind(args, nargs, kwnames, bound);
    return array_to_python(body(bound), bound, signature.size());
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
}

FastSignature copy_signature("copy()", {"dst", "src", "stream"}, 2, 2);
FastSignature scale_signature("scale()", {"x", "alpha", "out", "stream"}, 2, 2);
FastSignature axpy_signature("axpy()", {"alpha", "x", "y", "out", "stream"}, 3, 3);
FastSignature add_signature("add()", {"x", "y", "out", "stream"}, 2, 2);
FastSignature multiply_signature("multiply()", {"x", "y", "out", "stream"}, 2, 2);

PyObject* fast_copy(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return call_op(copy_signature, args, nargs, kwnames, [](PyObject* const* b) { return ops_copy(b[0], b[1], b[2]); });
}
PyObject* fast_scale(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return call_op(scale_signature, args, nargs, kwnames,
                 [](PyObject* const* b) { return ops_scale(b[0], b[1], b[2], b[3]); });
}
PyObject* fast_axpy(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return call_op(axpy_signature, args, nargs, kwnames,
                 [](PyObject* const* b) { return ops_axpy(b[0], b[1], b[2], b[3], b[4]); });
}
PyObject* fast_add(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return call_op(add_signature, args, nargs, kwnames,
                 [](PyObject* const* b) { return ops_add(b[0], b[1], b[2], b[3]); });
}
PyObject* fast_multiply(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return call_op(multiply_signature, args, nargs, kwnames,
                 [](PyObject* const* b) { return ops_multiply(b[0], b[1], b[2], b[3]); });
}

// Signature lines ($module, / as CPython writes them) for help() and inspect.signature.
PyMethodDef fast_ops[] = {
    {"copy", as_method<fast_copy>(), METH_FASTCALL | METH_KEYWORDS,
     "copy($module, /, dst, src, *, stream=None)\n--\n\n"
     "dst[...] = src on the device, ordered on `stream` (default: current); returns dst."},
    {"scale", as_method<fast_scale>(), METH_FASTCALL | METH_KEYWORDS,
     "scale($module, /, x, alpha, *, out=None, stream=None)\n--\n\n"
     "out = alpha * x, a new array when out is None (in place: out=x). Ordered on `stream` (default: current); "
     "returns out."},
    {"axpy", as_method<fast_axpy>(), METH_FASTCALL | METH_KEYWORDS,
     "axpy($module, /, alpha, x, y, *, out=None, stream=None)\n--\n\n"
     "out = alpha * x + y, a new array when out is None (into y: out=y). Ordered on `stream` (default: current); "
     "returns out."},
    {"add", as_method<fast_add>(), METH_FASTCALL | METH_KEYWORDS,
     "add($module, /, x, y, *, out=None, stream=None)\n--\n\n"
     "out = x + y, y an array of x's shape and dtype or a scalar; a new array when out is None. Ordered on "
     "`stream` (default: current); returns out."},
    {"multiply", as_method<fast_multiply>(), METH_FASTCALL | METH_KEYWORDS,
     "multiply($module, /, x, y, *, out=None, stream=None)\n--\n\n"
     "out = x * y, y an array of x's shape and dtype or a scalar; a new array when out is None. Ordered on "
     "`stream` (default: current); returns out."},
};

}  // namespace

void bind_ops(py::module_& m) {
  py::module_ ops = m.def_submodule("ops", "The built-in kernels behind cuweave.ops.");
  for (PyMethodDef& def : fast_ops) {
    py::object function =
        py::reinterpret_steal<py::object>(PyCFunction_NewEx(&def, ops.ptr(), ops.attr("__name__").ptr()));
    if (!function) throw py::error_already_set();
    ops.add_object(def.ml_name, function);
  }
  m.def(
      "fill_bytes",
      [](const std::shared_ptr<DeviceArray>& array, py::bytes pattern, py::handle stream_arg) {
        const std::string bytes = pattern;
        CUWEAVE_EXPECTS(bytes.size() == array->dtype().itemsize, "fill pattern size differs from the array's itemsize");
        Operation operation("fill");
        operation.writes(array);
        std::shared_ptr<Stream> stream = placed(operation, stream_arg);
        UnblockedEnqueue unblocked;
        stream->fill_async(operation, array->data(), array->size(), bytes.data(), bytes.size());
      },
      py::arg("array"), py::arg("pattern"), py::arg("stream") = py::none());

  ops.def(
      "sum",
      [](py::handle x_arg, py::handle out_arg, py::handle stream_arg) {
        auto x = as_device_array(x_arg);
        const NumericType type = numeric_type(*x);
        const NumericType result_type = sum_type(type);
        DType dtype = DType::from_typestr(result_type == NumericType::Float32   ? "<f4"
                                          : result_type == NumericType::Float64 ? "<f8"
                                                                                : "<i8");
        Operation operation("ops.sum");
        operation.reads(x);
        std::shared_ptr<DeviceArray> out;
        if (!out_arg.is_none()) {
          out = as_device_array(out_arg);
          if (out->size() != 1 || out->dtype().typestr != dtype.typestr) {
            throw InvalidArgument("out must be one element of the sum's type (" + dtype.typestr +
                                  " here: int32 sums widen to int64), e.g. cuweave.empty((), ...); got " +
                                  std::to_string(out->size()) + " elements of " + out->dtype().typestr);
          }
          operation.writes(out);
        }
        std::shared_ptr<Stream> stream = placed(operation, stream_arg);
        if (!out) {
          out = DeviceArray::allocate({}, dtype, stream);
          operation.writes(out);
        }
        // Captured, the partial sums get scratch of their own that the graph holds, rather than allocation
        // nodes, which conditional bodies may not contain.
        void* scratch = nullptr;
        const std::size_t scratch_bytes = Capture::of(*stream) ? backend().kernels().sum_scratch_bytes(x->size()) : 0;
        if (scratch_bytes > 0) {
          auto scratch_array = DeviceArray::allocate({static_cast<std::int64_t>(scratch_bytes)},
                                                     DType::from_typestr("|u1"), stream);
          scratch = scratch_array->data();
          operation.keep_alive(std::move(scratch_array));
        }
        UnblockedEnqueue unblocked;
        stream->sum_async(operation, out->data(), operation.standing_for(x)->data(), x->size(), type, scratch);
        return out;
      },
      py::arg("x"), py::kw_only(), py::arg("out") = py::none(), py::arg("stream") = py::none(),
      "The sum of x's elements as a 0-d device array (int32 sums widen to int64), ordered on `stream`; into "
      "`out` (one element of that type) when given. Deterministic: the same input gives the same result.");

  m.def(
      "spin",
      [](double seconds, py::handle stream_arg, unsigned blocks, py::handle start_times, long long slot) {
        CUWEAVE_EXPECTS(seconds >= 0 && seconds <= 60, "spin takes 0 to 60 seconds");
        CUWEAVE_EXPECTS(blocks >= 1, "spin needs at least one block");
        std::shared_ptr<DeviceArray> times;
        std::uint64_t* start = nullptr;
        if (!start_times.is_none()) {
          times = start_times.cast<std::shared_ptr<DeviceArray>>();
          if (times->dtype().typestr != "<u8") throw WrongType("start_times must be a uint64 DeviceArray");
          CUWEAVE_EXPECTS(times->contiguous(), "start_times must be contiguous");
          CUWEAVE_EXPECTS(slot >= 0 && static_cast<std::size_t>(slot) < times->size(),
                          "slot " + std::to_string(slot) + " is outside start_times (size " +
                              std::to_string(times->size()) + ")");
          start = static_cast<std::uint64_t*>(times->data()) + slot;
        }
        Operation operation("ops.spin");
        if (start) operation.uses_part(times, start, sizeof(std::uint64_t), sanitizer::AccessKind::Write);
        std::shared_ptr<Stream> stream = place(operation, named_stream(stream_arg));
        UnblockedEnqueue unblocked;
        stream->spin_async(operation, static_cast<std::uint64_t>(seconds * 1e9), blocks, start);
      },
      py::arg("seconds"), py::arg("stream") = py::none(), py::arg("blocks") = 1, py::arg("start_times") = py::none(),
      py::arg("slot") = 0);
}

}  // namespace cuweave::bindings
