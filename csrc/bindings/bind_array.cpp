// DeviceArray: allocation, __cuda_array_interface__ v3, DLPack in both directions, zero-copy import.
#include <algorithm>
#include <cstring>

#include "bindings/arrays.hpp"
#include "bindings/dlpack_abi.hpp"
#include "bindings/dtypes.hpp"
#include "bindings/gil.hpp"
#include "bindings/host_reads.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/python_holds.hpp"
#include "bindings/streams.hpp"
#include "cuweave/adopted_stream.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/default_stream.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/operation.hpp"
#include "cuweave/paused_streams.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"

namespace cuweave::bindings {

std::uintptr_t protocol_stream_value(const Stream& stream) {
  switch (stream.default_stream()) {
    case Stream::Default::Legacy: return 1;
    case Stream::Default::PerThread: return 2;
    case Stream::Default::None: break;
  }
  return reinterpret_cast<std::uintptr_t>(stream.handle());
}

namespace {

py::tuple to_tuple(const std::vector<std::int64_t>& values) {
  py::tuple tuple(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) tuple[i] = values[i];
  return tuple;
}

// The stream a protocol's stream field names (1 legacy, 2 per-thread, else a handle), on `device`.
std::shared_ptr<Stream> stream_from_protocol(std::uintptr_t value, int device) {
  if (value == 1) return DefaultStream::legacy(device);
  if (value == 2) return DefaultStream::per_thread(device);
  return AdoptedStream::adopt(reinterpret_cast<StreamHandle>(value), nullptr);
}

// ---- export ------------------------------------------------------------------------------------

dlpack::DataType dlpack_dtype(const DType& dtype) {
  dlpack::DataType result{};
  result.bits = static_cast<std::uint8_t>(dtype.itemsize * 8);
  result.lanes = 1;
  switch (dtype.kind) {
    case 'b': result.code = dlpack::kBool; break;
    case 'i': result.code = dlpack::kInt; break;
    case 'u': result.code = dlpack::kUInt; break;
    case 'f': result.code = dlpack::kFloat; break;
    default: result.code = dlpack::kComplex; break;
  }
  return result;
}

// Owns what an exported tensor points to until the consumer calls the deleter (on any thread).
struct ExportContext {
  std::shared_ptr<DeviceArray> array;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // elements
};

template <typename Managed>
Managed* fill_managed(const std::shared_ptr<DeviceArray>& array) {
  auto* context = new ExportContext{array, array->shape(), {}};
  for (std::int64_t stride : array->strides()) {
    context->strides.push_back(stride / static_cast<std::int64_t>(array->dtype().itemsize));
  }
  auto* managed = new Managed{};
  managed->manager_ctx = context;
  managed->deleter = [](Managed* self) {
    delete static_cast<ExportContext*>(self->manager_ctx);
    delete self;
  };
  dlpack::Tensor& tensor = managed->dl_tensor;
  tensor.data = array->data();
  tensor.device = {dlpack::kCUDA, array->device()};
  tensor.ndim = static_cast<std::int32_t>(array->shape().size());
  tensor.dtype = dlpack_dtype(array->dtype());
  tensor.shape = context->shape.data();
  tensor.strides = context->strides.data();
  tensor.byte_offset = 0;
  return managed;
}

py::capsule export_dlpack(const std::shared_ptr<DeviceArray>& array, py::handle stream, py::handle max_version,
                          py::handle dl_device, py::handle copy) {
  if (!copy.is_none() && copy.cast<bool>()) {
    throw py::buffer_error("cuweave arrays are exported without copying; call __dlpack__ with copy=None or False");
  }
  if (!dl_device.is_none()) {
    auto wanted = dl_device.cast<std::pair<int, int>>();
    if (wanted.first != dlpack::kCUDA || wanted.second != array->device()) {
      throw py::buffer_error("this array lives on CUDA device " + std::to_string(array->device()) +
                             " and cannot be exported to device (" + std::to_string(wanted.first) + ", " +
                             std::to_string(wanted.second) + ")");
    }
  }
  // Order the consumer's stream after this array's producing work (-1: the consumer syncs itself).
  const long long consumer = stream.is_none() ? 1 : stream.cast<long long>();
  if (consumer != -1) {
    CUWEAVE_EXPECTS(consumer != 0, "__dlpack__ stream 0 is ambiguous for CUDA; pass 1 (legacy default) or 2 (per-thread)");
    const std::vector<std::shared_ptr<Stream>> writers = array->writers();
    if (!writers.empty()) {
      stream_from_protocol(static_cast<std::uintptr_t>(consumer), array->device())->wait_for(writers);
    }
  }
  bool versioned = false;
  if (!max_version.is_none()) versioned = max_version.cast<std::pair<int, int>>().first >= 1;
  if (versioned) {
    auto* managed = fill_managed<dlpack::ManagedTensorVersioned>(array);
    managed->version = {1, 0};
    managed->flags = array->readonly() ? dlpack::kFlagReadOnly : 0;
    return py::capsule(managed, "dltensor_versioned", [](PyObject* capsule) {
      if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {  // never consumed
        auto* m = static_cast<dlpack::ManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
        m->deleter(m);
      }
    });
  }
  auto* managed = fill_managed<dlpack::ManagedTensor>(array);
  return py::capsule(managed, "dltensor", [](PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) {
      auto* m = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
      m->deleter(m);
    }
  });
}

py::dict cuda_array_interface(const DeviceArray& array) {
  py::dict interface;
  interface["version"] = 3;
  interface["shape"] = to_tuple(array.shape());
  interface["typestr"] = array.dtype().typestr;
  interface["data"] = py::make_tuple(reinterpret_cast<std::uintptr_t>(array.data()), array.readonly());
  interface["strides"] = array.contiguous() ? py::object(py::none()) : py::object(to_tuple(array.strides()));
  interface["stream"] = py::none();
  std::vector<std::shared_ptr<Stream>> writers = array.writers();
  // A closed writer has no handle to name: its consumers order after the current stream, which waits for it.
  const bool one_open_writer = writers.size() == 1 && !writers.front()->closed();
  if (one_open_writer) {
    interface["stream"] = protocol_stream_value(*writers.front());
  } else if (!writers.empty()) {
    // One stream field for several writers (views written on several streams), or a closed one: the current
    // stream waits for them all, and consumers order after it.
    std::shared_ptr<Stream> current = current_stream::get();
    current->wait_for(writers);
    interface["stream"] = protocol_stream_value(*current);
  }
  return interface;
}

// ---- import ------------------------------------------------------------------------------------

DType dtype_from_dlpack(const dlpack::DataType& type) {
  if (type.lanes != 1) throw WrongType("vector (multi-lane) DLPack dtypes are not supported");
  char kind;
  switch (type.code) {
    case dlpack::kBool: kind = 'b'; break;
    case dlpack::kInt: kind = 'i'; break;
    case dlpack::kUInt: kind = 'u'; break;
    case dlpack::kFloat: kind = 'f'; break;
    case dlpack::kComplex: kind = 'c'; break;
    default: throw WrongType("unsupported DLPack dtype code " + std::to_string(type.code) + " (bfloat16 and others)");
  }
  return DType::from_typestr(std::string(kind == 'b' ? "|" : "<") + kind + std::to_string(type.bits / 8));
}

std::shared_ptr<DeviceArray> view_of_tensor(const dlpack::Tensor& tensor, Hold owner, bool readonly) {
  if (tensor.device.device_type != dlpack::kCUDA && tensor.device.device_type != dlpack::kCUDAManaged) {
    throw WrongType("this DLPack tensor is not in GPU memory (device type " + std::to_string(tensor.device.device_type) +
                    "); copy host data with cuweave.to_device()");
  }
  DType dtype = dtype_from_dlpack(tensor.dtype);
  std::vector<std::int64_t> shape(tensor.shape, tensor.shape + tensor.ndim);
  std::vector<std::int64_t> strides;
  if (tensor.strides) {
    for (int i = 0; i < tensor.ndim; ++i) strides.push_back(tensor.strides[i] * static_cast<std::int64_t>(dtype.itemsize));
  }
  void* data = static_cast<char*>(tensor.data) + tensor.byte_offset;
  return DeviceArray::view(data, tensor.device.device_id, std::move(shape), std::move(strides), std::move(dtype),
                           std::move(owner), current_stream::get(), readonly);
}

template <typename Managed>
Hold hold_managed(Managed* managed) {
  return Hold(static_cast<const void*>(managed), [](const void* pointer) {
    auto* m = static_cast<Managed*>(const_cast<void*>(pointer));
    if (!m->deleter) return;
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;  // producers' deleters may touch Python objects
    m->deleter(m);
  });
}

std::shared_ptr<DeviceArray> from_dlpack(py::handle object) {
  if (py::isinstance<DeviceArray>(object)) return object.cast<std::shared_ptr<DeviceArray>>();
  if (!py::hasattr(object, "__dlpack__")) {
    throw WrongType(std::string(Py_TYPE(object.ptr())->tp_name) + " does not support DLPack (__dlpack__)");
  }
  if (py::hasattr(object, "__dlpack_device__")) {
    auto device = object.attr("__dlpack_device__")().cast<std::pair<int, int>>();
    if (device.first != dlpack::kCUDA && device.first != dlpack::kCUDAManaged) {
      const std::string where = device.first == dlpack::kCPU || device.first == dlpack::kCUDAHost
                                    ? "a host (CPU) array"
                                    : "not in GPU memory (DLPack device type " + std::to_string(device.first) + ")";
      throw WrongType(std::string("this ") + Py_TYPE(object.ptr())->tp_name + " is " + where +
                      "; cuweave's operations take GPU arrays: copy it to the GPU with cuweave.to_device(array)");
    }
  }
  const std::uintptr_t consumer = protocol_stream_value(*current_stream::get());
  py::object capsule;
  try {
    capsule = object.attr("__dlpack__")(py::arg("stream") = consumer, py::arg("max_version") = py::make_tuple(1, 0));
  } catch (py::error_already_set& error) {
    if (!error.matches(PyExc_TypeError)) throw;
    capsule = object.attr("__dlpack__")(py::arg("stream") = consumer);  // a producer older than DLPack 1.0
  }
  PyObject* raw = capsule.ptr();
  if (PyCapsule_IsValid(raw, "dltensor_versioned")) {
    auto* managed = static_cast<dlpack::ManagedTensorVersioned*>(PyCapsule_GetPointer(raw, "dltensor_versioned"));
    if (managed->version.major > 1) throw WrongType("DLPack major version " + std::to_string(managed->version.major) + " is not supported");
    auto array = view_of_tensor(managed->dl_tensor, hold_managed(managed), (managed->flags & dlpack::kFlagReadOnly) != 0);
    PyCapsule_SetName(raw, "used_dltensor_versioned");
    return array;
  }
  if (PyCapsule_IsValid(raw, "dltensor")) {
    auto* managed = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(raw, "dltensor"));
    auto array = view_of_tensor(managed->dl_tensor, hold_managed(managed), false);
    PyCapsule_SetName(raw, "used_dltensor");
    return array;
  }
  throw WrongType("__dlpack__ did not return a DLPack capsule");
}

std::shared_ptr<DeviceArray> from_cuda_array_interface(py::handle object) {
  py::dict interface = object.attr("__cuda_array_interface__");
  if (interface.contains("mask") && !interface["mask"].is_none()) {
    throw WrongType("masked arrays (__cuda_array_interface__ mask) are not supported");
  }
  DType dtype = dtype_from_python(interface["typestr"]);
  std::vector<std::int64_t> shape = shape_from_python(interface["shape"]);
  std::vector<std::int64_t> strides;
  if (interface.contains("strides") && !interface["strides"].is_none()) strides = shape_from_python(interface["strides"]);
  auto data = interface["data"].cast<std::pair<std::uintptr_t, bool>>();
  void* pointer = reinterpret_cast<void*>(data.first);
  int device = pointer ? backend().memory().pointer_device(pointer) : backend().devices().current_device();
  CUWEAVE_EXPECTS(device >= 0, "__cuda_array_interface__ data does not point to GPU memory");
  std::shared_ptr<Stream> current = current_stream::get();
  if (interface.contains("stream") && !interface["stream"].is_none()) {
    // The producer asks consumers to order after its stream.
    std::shared_ptr<Stream> producer = stream_from_protocol(interface["stream"].cast<std::uintptr_t>(), device);
    current->wait(*producer);
  }
  return DeviceArray::view(pointer, device, std::move(shape), std::move(strides), std::move(dtype),
                           hold_python(object), current, data.second);
}

}  // namespace

const std::shared_ptr<DeviceArray>* exact_device_array(PyObject* object) {
  static const py::detail::type_info* const info = py::detail::get_type_info(typeid(DeviceArray));
  return exact_holder<DeviceArray>(object, info);
}

std::shared_ptr<DeviceArray> as_device_array(py::handle object) {
  if (const std::shared_ptr<DeviceArray>* held = exact_device_array(object.ptr())) return *held;
  if (py::isinstance<DeviceArray>(object)) return object.cast<std::shared_ptr<DeviceArray>>();
  if (py::hasattr(object, "__cuda_array_interface__")) return from_cuda_array_interface(object);
  if (py::hasattr(object, "__dlpack__")) return from_dlpack(object);
  throw WrongType(std::string("cuweave.asarray() makes zero-copy views of GPU arrays (__cuda_array_interface__ or "
                              "DLPack); got ") +
                  Py_TYPE(object.ptr())->tp_name + ". Copy host data with cuweave.to_device()");
}

namespace {

std::shared_ptr<DeviceArray> allocate(py::handle shape, py::handle dtype, py::handle stream) {
  std::vector<std::int64_t> extents = shape_from_python(shape);
  DType type = dtype_from_python(dtype);
  // Inside a weave: new memory follows nothing (an operation touching no bytes); the allocation tells the weave
  // what it writes.
  Operation allocation("allocate");
  std::shared_ptr<Stream> target = place(allocation, named_stream(stream));
  UnblockedEnqueue unblocked;
  return DeviceArray::allocate(std::move(extents), std::move(type), target);
}

}  // namespace

namespace {

// `target` waits for the work queued so far on `array`'s stream (unless `wait` is false: the caller ordered it),
// becomes its stream, and frees its memory in its own order from now on.
void hand_off(DeviceArray& array, const std::shared_ptr<Stream>& target, bool wait) {
  if (wait) target->wait_for(array.writers());
  array.uses_on(target);
  array.written_on(target);
}

// The one element of `array` as a Python scalar, read as to_numpy() reads (`call` names the caller in errors).
py::object one_value(const std::shared_ptr<DeviceArray>& array, const char* call) {
  if (array->size() != 1) {
    throw WrongType(std::string(call) + " takes an array of one element; this one has " +
                    std::to_string(array->size()) + " (read it with to_numpy())");
  }
  return device_to_numpy(array, py::none(), py::none(), py::bool_(false)).attr("item")();
}

// Whether a host read of `array` would find its writers and the current stream idle.
bool readable_now(const DeviceArray& array) {
  for (const std::shared_ptr<Stream>& writer : array.writers()) {
    if (writer->closed() ? !writer->closed_work_complete() : !writer->idle()) return false;
  }
  return current_stream::get()->idle();
}

// Note [Printing a device array]
// As NumPy, CuPy and PyTorch print theirs, repr shows the values, read as a host read is (after the work that
// writes the array; Note [Host reads follow the writer]): every one up to 1000 elements, in NumPy's layout, else
// the first and last three of the flat array. Where they cannot be read (inside a capture, a failed device), it
// says so instead of raising: a repr runs in debuggers and error messages.
std::string repr_of(const std::shared_ptr<DeviceArray>& array) {
  const std::string head = "cuweave.DeviceArray(";
  const py::module_ numpy = py::module_::import("numpy");
  auto text = [&](const py::array& values) {
    return numpy.attr("array2string")(values, py::arg("separator") = ", ", py::arg("prefix") = head)
        .cast<std::string>();
  };
  std::string values;
  if (Capture::any_active() && Capture::of(*current_stream::get())) {
    values = "<values not read inside a capture>";
  } else if (paused_streams::any() && !readable_now(*array)) {
    // A read would wait for a stream paused for the host, perhaps by this very thread (a repr runs in debuggers
    // and error messages): said instead.
    values = "<values not read: a stream it waits for is paused for the host (a HostLatch or a host callback)>";
  } else {
    try {
      // A strided view's values are those of its contiguous copy, made in a host read's order.
      const std::shared_ptr<DeviceArray> readable =
          array->contiguous() ? array : contiguous_copy(array, py::none(), true);
      if (readable->size() <= 1000) {
        values = text(device_to_numpy(readable, py::none(), py::none(), py::bool_(false)));
      } else {
        // The six edge values formatted together (one width, as NumPy pads them), then NumPy's "..." between.
        const std::size_t item = array->dtype().itemsize;
        py::array edges(dtype_to_python(array->dtype()), std::vector<py::ssize_t>{6});
        py::array first = edges[py::slice(0, 3, 1)], last = edges[py::slice(3, 6, 1)];
        read_on_host(readable, py::none(), first, 0, 3 * item);
        read_on_host(readable, py::none(), last, (readable->size() - 3) * item, 3 * item);
        const std::string all = text(edges);  // "[a, b, c, d, e, f]"
        std::size_t third_comma = 0;
        for (int commas = 0; commas < 3; ++commas) third_comma = all.find(',', third_comma + 1);
        values = all.substr(0, third_comma) + ", ..." + all.substr(third_comma);
      }
    } catch (const std::exception& error) {
      const std::string why = error.what();
      values = "<values not read: " + why.substr(0, why.find('\n')) + ">";
    }
  }
  const std::shared_ptr<Stream>& stream = array->stream();
  std::string on = "None";
  if (stream) on = stream->name().empty() ? py::repr(py::cast(stream)).cast<std::string>() : "'" + stream->name() + "'";
  return head + values + ", shape=" + py::str(to_tuple(array->shape())).cast<std::string>() +
         ", dtype=" + py::str(dtype_to_python(array->dtype())).cast<std::string>() +
         ", device=" + std::to_string(array->device()) + ", stream=" + on + ")";
}

// PyTorch's factories take device=; a cuweave array lives on its stream's device.
constexpr Spelling kDevice{"device", "stream= (a stream of the device you want; the array lives on its device)",
                           "PyTorch's"};
const CallShape kEmptyCall{"empty()", "empty(shape, dtype=numpy.float64, *, stream=None)", {kDevice}};
const CallShape kZerosCall{"zeros()", "zeros(shape, dtype=numpy.float64, *, stream=None)", {kDevice}};
}  // namespace

void bind_array(py::module_& m) {
  py::object float64 = py::module_::import("numpy").attr("float64");
  py::class_<DeviceArray, std::shared_ptr<DeviceArray>>(m, "DeviceArray", R"doc(
An n-dimensional array in GPU memory. It is not readable as NumPy without a copy: use to_numpy().
It speaks __cuda_array_interface__ (v3) and DLPack, so CuPy, PyTorch and Numba can use it in place.)doc")
      .def(py::init(made_elsewhere<DeviceArray>(
          "DeviceArray", "cuweave.empty(), zeros(), ones(), full(), arange(), to_device() and asarray() make them, "
                         "and so do the operations")))
      .def_property_readonly("shape", [](const DeviceArray& a) { return to_tuple(a.shape()); })
      .def_property_readonly("strides", [](const DeviceArray& a) { return to_tuple(a.strides()); })
      .def_property_readonly("dtype", [](const DeviceArray& a) { return dtype_to_python(a.dtype()); })
      .def_property_readonly("size", &DeviceArray::size)
      .def_property_readonly("ndim", [](const DeviceArray& a) { return a.shape().size(); })
      .def_property_readonly("nbytes", &DeviceArray::nbytes)
      .def_property_readonly("ptr", [](const DeviceArray& a) { return reinterpret_cast<std::uintptr_t>(a.data()); })
      .def_property_readonly("device", &DeviceArray::device)
      .def_property_readonly("stream", &DeviceArray::stream, "The stream this array's producing work is ordered on.")
      .def_property_readonly("readonly", &DeviceArray::readonly)
      .def_property_readonly("contiguous", &DeviceArray::contiguous)
      .def_property_readonly("__cuda_array_interface__", &cuda_array_interface)
      .def("__dlpack__", &export_dlpack, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", [](const DeviceArray& a) { return py::make_tuple(static_cast<int>(dlpack::kCUDA), a.device()); })
      // to_numpy: a raw method (fast_methods.cpp)
      .def(
          "handoff",
          [](const std::shared_ptr<DeviceArray>& self, py::handle stream_arg, bool wait) {
            hand_off(*self, resolve_stream(stream_arg), wait);
          },
          py::arg("stream") = py::none(), py::kw_only(), py::arg("wait") = true,
          "Hands the array to `stream` (default: current): that stream waits for the work queued so far on the "
          "array's stream (no host wait; wait=False when the caller already ordered it), becomes the array's "
          "stream, and frees its memory in its own order when the array goes. For arrays used on another "
          "stream, by cuweave or by other libraries.")
      .def("__array__",
           [](const DeviceArray&, py::args, py::kwargs) -> py::object {
             throw WrongType("a cuweave.DeviceArray lives in GPU memory and NumPy cannot read it directly; "
                             "copy it with .to_numpy()");
           })
      .def("__len__",
           [](const DeviceArray& a) {
             if (a.shape().empty()) throw WrongType("len() of a 0-d DeviceArray");
             return a.shape()[0];
           })
      .def("item", [](const std::shared_ptr<DeviceArray>& a) { return one_value(a, "item()"); },
           "The array's one element as a Python scalar, read on the host (after the work that writes it).")
      .def("__float__", [](const std::shared_ptr<DeviceArray>& a) { return py::float_(one_value(a, "float()")); })
      .def("__int__", [](const std::shared_ptr<DeviceArray>& a) { return py::int_(one_value(a, "int()")); })
      .def("__repr__", &repr_of);

  m.def(
      "handoff_all",
      [](const std::vector<std::shared_ptr<DeviceArray>>& arrays, py::handle stream_arg) {
        const std::shared_ptr<Stream> target = resolve_stream(stream_arg);
        for (const std::shared_ptr<DeviceArray>& array : arrays) hand_off(*array, target, true);
      },
      py::arg("arrays"), py::arg("stream"),
      "array.handoff(stream) for each array, in one call (a woven function's replay hands over all its arrays).");
  m.def("empty", &allocate, py::arg("shape"), py::arg_v("dtype", float64, "numpy.float64"), py::kw_only(), py::arg("stream") = py::none(),
        "Uninitialized device array, allocated in order on `stream` (default: current).");
  m.def(
      "zeros",
      [](py::handle shape, py::handle dtype, py::handle stream) {
        auto array = allocate(shape, dtype, stream);
        // Part of the allocation, which the weave placed: queued on the array's stream.
        Operation operation("memset");
        operation.writes(array);
        UnblockedEnqueue unblocked;
        array->stream()->memset_async(operation, array->data(), 0, array->nbytes());
        return array;
      },
      py::arg("shape"), py::arg_v("dtype", float64, "numpy.float64"), py::kw_only(), py::arg("stream") = py::none(),
      "Zero-filled device array, allocated and cleared in order on `stream` (default: current).");
  m.def("empty", misfit_call(kEmptyCall));
  m.def("zeros", misfit_call(kZerosCall));
  m.def("asarray", &as_device_array, py::arg("array"),
        "A zero-copy DeviceArray view of a GPU array from another library (__cuda_array_interface__ or DLPack); "
        "the other library's object is kept alive. Ordered after the producer's stream where it names one.");
  m.def("from_dlpack", &from_dlpack, py::arg("array"), "A zero-copy DeviceArray view of a DLPack GPU tensor.");
}

}  // namespace cuweave::bindings
