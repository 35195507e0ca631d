// Packing kernel arguments runs once per launch, so the common cases (exact ints and floats, cuweave
// DeviceArrays, a tuple of arguments, int extents) take exact-type checks that cost a pointer compare and
// allocate nothing; everything else takes the general path, which gives the same results and errors.
#include "bindings/kernel_arguments.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>

#include "bindings/arrays.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

namespace {

// The general path: anything with __index__, tuples and lists (subclasses too).
Dim3 dim3_from_any(py::handle value, const char* what) {
  const py::detail::loader_life_support temporaries;  // Note [Casts off the launch's fast path]
  auto extent = [what](py::handle item) -> unsigned {
    if (py::isinstance<py::bool_>(item) || !PyIndex_Check(item.ptr())) {
      throw WrongType(std::string(what) + " takes ints or a tuple of 1 to 3 ints");
    }
    const long long n = py::cast<long long>(item);
    CUWEAVE_EXPECTS(n >= 1 && n <= 0x7fffffffLL, std::string(what) + " extents must be between 1 and 2**31-1");
    return static_cast<unsigned>(n);
  };
  Dim3 dims;
  if (PyIndex_Check(value.ptr()) && !py::isinstance<py::bool_>(value)) {
    dims.x = extent(value);
    return dims;
  }
  if (!py::isinstance<py::tuple>(value) && !py::isinstance<py::list>(value)) {
    throw WrongType(std::string(what) + " takes an int or a tuple of 1 to 3 ints");
  }
  py::sequence items = py::reinterpret_borrow<py::sequence>(value);
  CUWEAVE_EXPECTS(items.size() >= 1 && items.size() <= 3, std::string(what) + " takes 1 to 3 extents");
  dims.x = extent(items[0]);
  if (items.size() > 1) dims.y = extent(items[1]);
  if (items.size() > 2) dims.z = extent(items[2]);
  return dims;
}

// An exact int that fits a long long, checked as the general path checks it; false for anything else,
// which the general path then handles (with its own errors).
bool exact_extent(PyObject* item, const char* what, unsigned& extent) {
  if (!PyLong_CheckExact(item)) return false;
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(item, &overflow);
  if (overflow != 0) return false;
  CUWEAVE_EXPECTS(n >= 1 && n <= 0x7fffffffLL, std::string(what) + " extents must be between 1 and 2**31-1");
  extent = static_cast<unsigned>(n);
  return true;
}

// The last two exact ints read as extents (a launch's grid and block, given again at every launch of a loop):
// CPython keeps one object per small int, and the reference held here keeps any other from being freed and its
// address reused while it is remembered, so the same object is the same extent. Under the GIL.
struct RememberedExtent {
  PyObject* object = nullptr;  // a strong reference, kept for good by the last two
  unsigned extent = 0;
};
RememberedExtent remembered_extents[2];
unsigned char next_forgotten = 0;

void remember_extent(PyObject* object, unsigned extent) {
  RememberedExtent& slot = remembered_extents[next_forgotten];
  next_forgotten ^= 1;
  Py_INCREF(object);
  Py_XDECREF(std::exchange(slot.object, object));
  slot.extent = extent;
}

}  // namespace

Dim3 dim3_from(py::handle value, const char* what) {
  Dim3 dims;
  PyObject* const object = value.ptr();
  for (const RememberedExtent& remembered : remembered_extents) {
    if (remembered.object == object) {
      dims.x = remembered.extent;
      return dims;
    }
  }
  if (exact_extent(object, what, dims.x)) {
    remember_extent(object, dims.x);
    return dims;
  }
  if (PyTuple_CheckExact(object)) {
    const Py_ssize_t count = PyTuple_GET_SIZE(object);
    if (count >= 1 && count <= 3) {
      unsigned* extents[3] = {&dims.x, &dims.y, &dims.z};
      Py_ssize_t i = 0;
      while (i < count && exact_extent(PyTuple_GET_ITEM(object, i), what, *extents[i])) ++i;
      if (i == count) return dims;
    }
  }
  return dim3_from_any(value, what);
}

namespace {

using Slot = PackedArguments::Slot;

std::string parameter_text(std::size_t index, std::size_t size) {
  return "parameter " + std::to_string(index) + " of the kernel takes " + std::to_string(size) + " bytes";
}

template <typename T>
void store(Slot& slot, T value) {
  std::memcpy(slot.data(), &value, sizeof(T));
}

void pack_integer(Slot& slot, py::handle value, std::size_t index, std::size_t size) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow > 0 && size == 8) {  // an unsigned 64-bit value, such as a graph condition's handle
    const unsigned long long u = PyLong_AsUnsignedLongLong(value.ptr());
    if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
      store(slot, u);
      return;
    }
    PyErr_Clear();
  }
  const bool fits = overflow == 0 && (size == 8 || (size == 4 && v >= INT32_MIN && v <= UINT32_MAX) ||
                                      (size == 2 && v >= INT16_MIN && v <= UINT16_MAX) ||
                                      (size == 1 && v >= INT8_MIN && v <= UINT8_MAX));
  if (!fits) {
    if (size != 1 && size != 2 && size != 4 && size != 8) {
      throw WrongType(parameter_text(index, size) + "; an int cannot fill it (pass a numpy scalar of that size)");
    }
    throw InvalidArgument(parameter_text(index, size) + "; " + py::str(value).cast<std::string>() + " does not fit");
  }
  switch (size) {
    case 1: store(slot, static_cast<std::int8_t>(v)); break;
    case 2: store(slot, static_cast<std::int16_t>(v)); break;
    case 4: store(slot, static_cast<std::int32_t>(v)); break;
    default: store(slot, static_cast<std::int64_t>(v)); break;
  }
}

void pack_float(Slot& slot, double value, std::size_t index, std::size_t size) {
  if (size == 8) {
    store(slot, value);
  } else if (size == 4) {
    store(slot, static_cast<float>(value));  // a 4-byte parameter given a Python float is a float
  } else {
    throw WrongType(parameter_text(index, size) + "; a float fills only 4 (float) or 8 (double) bytes");
  }
}

// numpy.generic, looked up once (the launch path must not import per call).
PyObject* numpy_scalar_type() {
  static PyObject* type = py::object(py::module_::import("numpy").attr("generic")).release().ptr();  // kept for good
  return type;
}

// `declared`: the access cuweave.reads()/writes() gave; none: the parameter's read-only flag decides (pack()).
void pack_array(PackedArguments& packed, Operation& operation, std::size_t index, std::size_t size,
                std::shared_ptr<DeviceArray> array, const Kernel& kernel,
                std::optional<sanitizer::AccessKind> declared = std::nullopt) {
  if (size != sizeof(void*)) {
    throw WrongType(parameter_text(index, size) + "; a device array is passed as an 8-byte pointer");
  }
  store(packed.slots[index], array->data());
  // Note [Kernels on a peer's arrays]
  // A kernel reaches another device's array once the two devices reach each other (peer access and pool grants,
  // MemoryBackend::enable_peer_access), which is enabled here on first use; where the hardware has no such link
  // the launch is refused, since the kernel would fault and lose the context. The array is held until the kernel
  // has completed, its free staying in its own device's order, as for copies between devices (the submission
  // path holds an array of another device than the stream's).
  if (array->device() != kernel.device() && !backend().memory().enable_peer_access(kernel.device(), array->device())) {
    throw InvalidArgument("argument " + std::to_string(index) + " is on device " + std::to_string(array->device()) +
                          ", which the kernel's device " + std::to_string(kernel.device()) +
                          " cannot reach (no peer access between them); copy it to device " +
                          std::to_string(kernel.device()) + " first (cuweave.copy_async)");
  }
  if (declared) {
    operation.uses(std::move(array), *declared);
    return;
  }
  operation.writes(std::move(array));  // until the parameter's read-only flag says otherwise
  packed.undeclared.push_back(PackedArguments::Undeclared{operation.arrays().size() - 1, index});
}

// Everything but exact ints, exact floats and exact DeviceArrays, in the order the checks were always made.
void pack_any(PackedArguments& packed, Operation& operation, std::size_t index, std::size_t size, py::handle value,
              const Kernel& kernel) {
  const py::detail::loader_life_support temporaries;  // Note [Casts off the launch's fast path]
  Slot& slot = packed.slots[index];
  if (py::isinstance<py::array>(value)) {
    throw WrongType("argument " + std::to_string(index) +
                    " is a NumPy array in host memory; copy it to the device with cuweave.to_device() first");
  } else if (PyObject_IsInstance(value.ptr(), numpy_scalar_type()) == 1) {
    py::array scalar = py::array::ensure(value);
    if (static_cast<std::size_t>(scalar.itemsize()) != size) {
      throw WrongType(parameter_text(index, size) + "; got a " + py::str(scalar.dtype()).cast<std::string>() + " (" +
                      std::to_string(scalar.itemsize()) + " bytes)");
    }
    CUWEAVE_EXPECTS(size <= sizeof(slot), parameter_text(index, size) + "; cuweave passes scalars of up to 16 bytes");
    std::memcpy(slot.data(), scalar.data(), size);
  } else if (py::isinstance<py::bool_>(value)) {
    pack_integer(slot, py::int_(value.cast<bool>() ? 1 : 0), index, size);
  } else if (PyLong_Check(value.ptr())) {
    pack_integer(slot, value, index, size);
  } else if (PyFloat_Check(value.ptr())) {
    pack_float(slot, PyFloat_AsDouble(value.ptr()), index, size);
  } else if (PyIndex_Check(value.ptr()) && !is_device_side(value)) {  // e.g. a cuweave.Condition
    py::object integer = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
    if (!integer) throw py::error_already_set();
    pack_integer(slot, integer, index, size);
  } else if (py::isinstance<DeclaredAccess>(value)) {
    const auto& declared = value.cast<const DeclaredAccess&>();
    pack_array(packed, operation, index, size, declared.array, kernel, declared.kind);
  } else {
    pack_array(packed, operation, index, size, as_device_array(value), kernel);  // TypeError for anything else
  }
}

}  // namespace

PackedArguments pack(const Kernel& kernel, py::handle args_object, Operation& operation) {
  PyObject* const object = args_object.ptr();
  // An exact tuple's items are read in place (it cannot change); lists and subclasses item by item, as
  // Python code (a foreign array's __cuda_array_interface__) may change a list while it is packed.
  const bool exact_tuple = PyTuple_CheckExact(object);
  if (!exact_tuple && !PyTuple_Check(object) && !PyList_Check(object)) {
    throw WrongType("kernel arguments go in a tuple or list");
  }
  const Py_ssize_t given = exact_tuple ? PyTuple_GET_SIZE(object) : PySequence_Size(object);
  if (given < 0) throw py::error_already_set();
  const auto& sizes = kernel.parameter_sizes();
  if (static_cast<std::size_t>(given) != sizes.size()) {
    throw WrongType("the kernel takes " + std::to_string(sizes.size()) + " arguments, got " + std::to_string(given));
  }
  PackedArguments packed;
  packed.slots.append(sizes.size(), Slot{0, 0});
  packed.pointers.append(sizes.size(), nullptr);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    py::object owned;  // a list's (or subclass's) item, kept while it is packed
    PyObject* value;
    if (exact_tuple) {
      value = PyTuple_GET_ITEM(object, static_cast<Py_ssize_t>(i));
    } else {
      owned = py::reinterpret_steal<py::object>(PySequence_GetItem(object, static_cast<Py_ssize_t>(i)));
      if (!owned) throw py::error_already_set();
      value = owned.ptr();
    }
    Slot& slot = packed.slots[i];
    const std::size_t size = sizes[i];
    if (const std::shared_ptr<DeviceArray>* array = exact_device_array(value)) {
      pack_array(packed, operation, i, size, *array, kernel);
    } else if (PyLong_CheckExact(value)) {
      pack_integer(slot, value, i, size);
    } else if (PyFloat_CheckExact(value)) {
      pack_float(slot, PyFloat_AS_DOUBLE(value), i, size);
    } else {
      pack_any(packed, operation, i, size, value, kernel);
    }
    packed.pointers[i] = slot.data();
  }
  if (!packed.undeclared.empty()) {
    kernel.with_read_only([&](const auto& read_only) {
      for (const PackedArguments::Undeclared& u : packed.undeclared) {
        if (read_only(u.parameter)) operation.arrays()[u.array].kind = sanitizer::AccessKind::Read;
      }
    });
  }
  return packed;
}

}  // namespace cuweave::bindings
