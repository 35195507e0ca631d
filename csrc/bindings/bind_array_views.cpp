// DeviceArray views as NumPy's basic indexing makes them (Note [Views share their base's memory]), and the
// contiguous copies that strided views need.
#include "bindings/arrays.hpp"
#include "bindings/dtypes.hpp"
#include "bindings/gil.hpp"
#include "bindings/host_reads.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "cuweave/array_layout.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/strided_copy.hpp"
#include "cuweave/weave.hpp"

namespace cuweave::bindings {

namespace {

ArrayLayout layout_of(const DeviceArray& array) { return ArrayLayout{0, array.shape(), array.strides()}; }

IndexItem index_item(py::handle key) {
  IndexItem item;
  if (key.is_none()) {
    item.kind = IndexItem::Kind::NewAxis;
  } else if (key.ptr() == Py_Ellipsis) {
    item.kind = IndexItem::Kind::Ellipsis;
  } else if (PySlice_Check(key.ptr())) {
    Py_ssize_t start = 0, stop = 0, step = 0;
    if (PySlice_Unpack(key.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();  // step 0, bad types
    item.kind = IndexItem::Kind::Slice;
    item.start = start;  // None arrives as the far end in the step's direction, which clips as None would
    item.stop = stop;
    item.step = step;
  } else if (!PyBool_Check(key.ptr()) && PyIndex_Check(key.ptr())) {
    item.value = py::reinterpret_borrow<py::object>(key).cast<std::int64_t>();
  } else {
    throw WrongType(std::string("cuweave arrays take basic indices: integers, slices, None and ...; got ") +
                    Py_TYPE(key.ptr())->tp_name +
                    ". For boolean or array (advanced) indexing, view the array in CuPy or PyTorch "
                    "(cupy.asarray(x), torch.as_tensor(x, device='cuda')), which share its memory");
  }
  return item;
}

std::shared_ptr<DeviceArray> indexed(const std::shared_ptr<DeviceArray>& self, py::handle key) {
  std::vector<IndexItem> items;
  if (py::isinstance<py::tuple>(key)) {
    for (py::handle part : py::reinterpret_borrow<py::tuple>(key)) items.push_back(index_item(part));
  } else {
    items.push_back(index_item(key));
  }
  return DeviceArray::view_of(self, indexed_layout(layout_of(*self), items), self->dtype());
}

// A shape given as reshape(2, 3) or reshape((2, 3)); one extent may be -1 (resolved_shape checks).
std::vector<std::int64_t> shape_argument(const py::args& args) {
  py::handle extents = args.size() == 1 && !PyIndex_Check(args[0].ptr()) ? args[0] : py::handle(args);
  if (!py::isinstance<py::sequence>(extents)) {
    throw WrongType("reshape takes a shape: integers, or a tuple of them; got " +
                    std::string(Py_TYPE(extents.ptr())->tp_name));
  }
  std::vector<std::int64_t> shape;
  for (py::handle extent : extents) {
    if (PyBool_Check(extent.ptr()) || !PyIndex_Check(extent.ptr())) {
      throw WrongType("a shape holds integers; got " + std::string(Py_TYPE(extent.ptr())->tp_name));
    }
    shape.push_back(py::reinterpret_borrow<py::object>(extent).cast<std::int64_t>());
  }
  return shape;
}

std::shared_ptr<DeviceArray> reshaped(const std::shared_ptr<DeviceArray>& self, std::vector<std::int64_t> shape) {
  shape = resolved_shape(std::move(shape), self->size(), self->shape());
  std::optional<std::vector<std::int64_t>> strides = reshaped_strides(layout_of(*self), shape, self->dtype().itemsize);
  if (!strides) {
    throw InvalidArgument("this array's elements are not in C order in memory (it is a transposed or stepped view), "
                          "so no view of it has that shape; reshape a contiguous copy, made with .copy()");
  }
  return DeviceArray::view_of(self, ArrayLayout{0, std::move(shape), std::move(*strides)}, self->dtype());
}

std::shared_ptr<DeviceArray> transposed(const std::shared_ptr<DeviceArray>& self, const py::args& args) {
  std::vector<int> order;
  py::handle axes = args.size() == 1 && !PyIndex_Check(args[0].ptr()) ? args[0] : py::handle(args);
  if (!axes.is_none()) {
    for (py::handle axis : axes) order.push_back(py::reinterpret_borrow<py::object>(axis).cast<int>());
  }
  return DeviceArray::view_of(self, transposed_layout(layout_of(*self), std::move(order)), self->dtype());
}

// The element copy from `source` to `destination` (same shape), its extent-1 axes left out.
StridedCopy strided_copy(const DeviceArray& destination, const DeviceArray& source) {
  StridedCopy copy;
  copy.destination = destination.data();
  copy.source = source.data();
  copy.itemsize = source.dtype().itemsize;
  for (std::size_t d = 0; d < source.shape().size(); ++d) {
    if (source.shape()[d] == 1) continue;
    if (copy.ndim == StridedCopy::kMaxDims) {
      throw InvalidArgument("a strided copy takes arrays of up to " + std::to_string(StridedCopy::kMaxDims) +
                            " axes longer than 1; reshape the array first");
    }
    copy.shape[copy.ndim] = source.shape()[d];
    copy.source_strides[copy.ndim] = source.strides()[d];
    copy.destination_strides[copy.ndim] = destination.strides()[d];
    ++copy.ndim;
  }
  return copy;
}

// x[key] = value: the view's elements from `value`, queued on the current stream (no host wait), as a copy:
// a GPU array of the view's shape and dtype as it is; host values (a NumPy array, a list, a scalar) as NumPy
// would convert and broadcast them; a scalar into a contiguous view as a fill, with no host buffer.
void assign(const std::shared_ptr<DeviceArray>& self, py::handle key, py::handle value) {
  std::shared_ptr<DeviceArray> view = indexed(self, key);
  CUWEAVE_EXPECTS(!view->readonly(), "the device array written to is read-only");
  const py::module_ core = py::module_::import("cuweave._core");
  if (is_device_side(value)) {
    core.attr("copy_async")(view, value);
    return;
  }
  const py::module_ numpy = py::module_::import("numpy");
  py::object host = numpy.attr("asarray")(value, dtype_to_python(view->dtype()));
  if (host.attr("ndim").cast<int>() == 0 && view->contiguous()) {
    py::module_::import("cuweave.ops").attr("fill")(view, host.attr("item")());
    return;
  }
  std::vector<py::ssize_t> shape(view->shape().begin(), view->shape().end());
  host = numpy.attr("ascontiguousarray")(numpy.attr("broadcast_to")(host, py::cast(shape)));
  core.attr("copy_async")(view, host);
}

const CallShape kAscontiguousarrayCall{"ascontiguousarray()", "ascontiguousarray(array, *, stream=None)"};

}  // namespace

void copy_elements(Operation& operation, Stream& stream, DeviceArray& destination, const DeviceArray& source) {
  if (destination.contiguous() && source.contiguous()) {
    stream.copy_async(operation, destination.data(), source.data(), destination.nbytes());
  } else {
    stream.copy_strided_async(operation, strided_copy(destination, source));
  }
}

std::shared_ptr<DeviceArray> contiguous_copy(const std::shared_ptr<DeviceArray>& array, py::handle stream_arg,
                                             bool after_writers) {
  Operation operation("copy");
  operation.reads(array);
  std::shared_ptr<Stream> stream = after_writers ? host_read_placed(operation, *array, stream_arg, Layouts::Strided)
                                                : placed(operation, stream_arg, Layouts::Strided);
  if (after_writers && !Weave::active()) wait_for_writer(*array, *stream);
  std::shared_ptr<DeviceArray> copy;
  {
    UnblockedEnqueue unblocked;
    copy = DeviceArray::allocate(array->shape(), array->dtype(), stream);
  }
  operation.writes(copy);
  ReleaseGil release;
  copy_elements(operation, *stream, *copy, *operation.standing_for(array));
  return copy;
}

void bind_array_views(py::module_& m) {
  auto array_class = py::reinterpret_borrow<py::class_<DeviceArray, std::shared_ptr<DeviceArray>>>(m.attr("DeviceArray"));
  array_class
      .def("__getitem__", &indexed, py::arg("key"),
           "A view of the elements `key` selects, as NumPy's basic indexing does (integers, slices with steps, None, "
           "...): it shares this array's memory and keeps it alive. An integer for every axis gives a 0-d view; "
           "read it with item().")
      .def("__setitem__", &assign, py::arg("key"), py::arg("value"),
           "Writes `value` into the view `key` selects, queued on the current stream: a GPU array of that shape and "
           "dtype, or host values (arrays, lists, scalars) as NumPy converts and broadcasts them.")
      .def(
          "__iter__",
          [](const std::shared_ptr<DeviceArray>& self) {
            if (self->shape().empty()) throw WrongType("iteration over a 0-d DeviceArray");
            py::object view = py::cast(self).attr("__getitem__");
            return py::module_::import("builtins").attr("map")(view, py::module_::import("builtins").attr("range")(
                                                                         self->shape()[0]));
          },
          "The views self[0], self[1], ... along the first axis.")
      .def("reshape",
           [](const std::shared_ptr<DeviceArray>& self, const py::args& shape) {
             return reshaped(self, shape_argument(shape));
           },
           "A view of the same elements, in C order, with another shape (one extent may be -1). A transposed or "
           "stepped view whose elements no strides can reach that way raises ValueError: reshape .copy() instead.")
      .def(
          "ravel",
          [](const std::shared_ptr<DeviceArray>& self, py::handle stream) {
            const std::vector<std::int64_t> flat{static_cast<std::int64_t>(self->size())};
            return self->contiguous() ? reshaped(self, flat) : reshaped(contiguous_copy(self, stream, false), flat);
          },
          py::kw_only(), py::arg("stream") = py::none(),
          "The elements as one axis: a view where the array is contiguous, else a contiguous copy ordered on "
          "`stream` (default: current).")
      .def_property_readonly("T", [](const std::shared_ptr<DeviceArray>& self) { return transposed(self, py::args()); },
                             "A view with the axes reversed.")
      .def("transpose", &transposed,
           "A view with the axes in the order given (transpose(1, 0, 2) or transpose((1, 0, 2))); none: reversed.")
      .def(
          "view",
          [](const std::shared_ptr<DeviceArray>& self, py::handle dtype) {
            DType type = dtype_from_python(dtype);
            ArrayLayout layout = retyped_layout(layout_of(*self), self->dtype().itemsize, type.itemsize);
            return DeviceArray::view_of(self, layout, std::move(type));
          },
          py::arg("dtype"),
          "The same bytes as elements of `dtype`; with another element size the last axis (which must be "
          "contiguous) changes its extent, as NumPy's view does.")
      .def(
          "copy", [](const std::shared_ptr<DeviceArray>& self, py::handle stream) { return contiguous_copy(self, stream, false); },
          py::kw_only(), py::arg("stream") = py::none(),
          "A new contiguous array with the same values, copied in order on `stream` (default: current).")
      .def_property_readonly("base", &DeviceArray::base,
                             "The array this one is a view of (the first array of its memory); None for that one.");

  m.def(
      "ascontiguousarray",
      [](py::handle array, py::handle stream) {
        std::shared_ptr<DeviceArray> device = as_device_array(array);
        return device->contiguous() ? device : contiguous_copy(device, stream, false);
      },
      py::arg("array"), py::kw_only(), py::arg("stream") = py::none(),
      "`array` itself when it is contiguous, else a contiguous copy ordered on `stream` (default: current).");
  m.def("ascontiguousarray", misfit_call(kAscontiguousarrayCall));
}

}  // namespace cuweave::bindings
