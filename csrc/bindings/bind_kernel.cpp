// Runtime-compiled kernels: compile (NVRTC), load, and launch with arguments checked against the
// kernel's parameter sizes. Caching lives in the Python layer (cuweave/kernels.py).
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>

#include "bindings/common.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/kernel.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

namespace {

Dim3 dim3_from(py::handle value, const char* what) {
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

// Arguments packed for one launch: a value slot per parameter, and what the launch must keep alive.
struct PackedArguments {
  std::vector<std::array<std::uint64_t, 2>> slots;  // 16 bytes each: every scalar and pointer fits
  std::vector<void*> pointers;
  Holds holds;
  std::vector<std::shared_ptr<DeviceArray>> arrays;
};

std::string parameter_text(std::size_t index, std::size_t size) {
  return "parameter " + std::to_string(index) + " of the kernel takes " + std::to_string(size) + " bytes";
}

template <typename T>
void store(std::array<std::uint64_t, 2>& slot, T value) {
  std::memcpy(slot.data(), &value, sizeof(T));
}

void pack_integer(std::array<std::uint64_t, 2>& slot, py::handle value, std::size_t index, std::size_t size) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
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

// numpy.generic, looked up once (the launch path must not import per call).
PyObject* numpy_scalar_type() {
  static PyObject* type = py::object(py::module_::import("numpy").attr("generic")).release().ptr();  // kept for good
  return type;
}

PackedArguments pack(const Kernel& kernel, py::handle args_object, const std::shared_ptr<Stream>& stream) {
  if (!py::isinstance<py::tuple>(args_object) && !py::isinstance<py::list>(args_object)) {
    throw WrongType("kernel arguments go in a tuple or list");
  }
  py::sequence args = py::reinterpret_borrow<py::sequence>(args_object);
  const auto& sizes = kernel.parameter_sizes();
  if (args.size() != sizes.size()) {
    throw WrongType("the kernel takes " + std::to_string(sizes.size()) + " arguments, got " +
                    std::to_string(args.size()));
  }
  PackedArguments packed;
  packed.slots.resize(sizes.size(), {0, 0});
  packed.pointers.resize(sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    py::handle value = args[i];
    auto& slot = packed.slots[i];
    const std::size_t size = sizes[i];
    if (py::isinstance<py::array>(value)) {
      throw WrongType("argument " + std::to_string(i) +
                      " is a NumPy array in host memory; copy it to the device with cuweave.to_device() first");
    } else if (PyObject_IsInstance(value.ptr(), numpy_scalar_type()) == 1) {
      py::array scalar = py::array::ensure(value);
      if (static_cast<std::size_t>(scalar.itemsize()) != size) {
        throw WrongType(parameter_text(i, size) + "; got a " + py::str(scalar.dtype()).cast<std::string>() + " (" +
                        std::to_string(scalar.itemsize()) + " bytes)");
      }
      CUWEAVE_EXPECTS(size <= sizeof(slot), parameter_text(i, size) + "; cuweave passes scalars of up to 16 bytes");
      std::memcpy(slot.data(), scalar.data(), size);
    } else if (py::isinstance<py::bool_>(value)) {
      pack_integer(slot, py::int_(value.cast<bool>() ? 1 : 0), i, size);
    } else if (PyLong_Check(value.ptr())) {
      pack_integer(slot, value, i, size);
    } else if (PyFloat_Check(value.ptr())) {
      const double v = PyFloat_AsDouble(value.ptr());
      if (size == 8) {
        store(slot, v);
      } else if (size == 4) {
        store(slot, static_cast<float>(v));  // a 4-byte parameter given a Python float is a float
      } else {
        throw WrongType(parameter_text(i, size) + "; a float fills only 4 (float) or 8 (double) bytes");
      }
    } else {
      std::shared_ptr<DeviceArray> array = as_device_array(value);  // TypeError for anything else
      if (size != sizeof(void*)) {
        throw WrongType(parameter_text(i, size) + "; a device array is passed as an 8-byte pointer");
      }
      CUWEAVE_EXPECTS(array->device() == kernel.device(),
                      "argument " + std::to_string(i) + " is on device " + std::to_string(array->device()) +
                          " but the kernel is loaded on device " + std::to_string(kernel.device()));
      store(slot, array->data());
      add_uses(packed.holds, *array, stream);
      packed.arrays.push_back(std::move(array));
    }
    packed.pointers[i] = slot.data();
  }
  return packed;
}

}  // namespace

void bind_kernel(py::module_& m) {
  m.def(
      "compile_kernel",
      [](const std::string& source, const std::string& name, std::vector<std::string> options, py::handle device) {
        const int ordinal = resolve_device(device);
        CompiledKernel compiled;
        {
          py::gil_scoped_release release;
          compiled = backend().compile(source, name, options, ordinal);
        }
        return py::make_tuple(py::bytes(compiled.binary), compiled.lowered_name, compiled.log);
      },
      py::arg("source"), py::arg("name"), py::arg("options"), py::arg("device") = py::none(),
      "Compiles CUDA C++ for the device's architecture: (cubin, lowered name, log). Use cuweave.compile(), which "
      "caches.");

  py::class_<Kernel, std::shared_ptr<Kernel>>(m, "Kernel", py::dynamic_attr(), R"doc(
A CUDA kernel compiled at run time and loaded on a device (made by cuweave.compile()). Call it as
``kernel(grid, block, args, shared_mem=0, stream=None)``.)doc")
      .def(py::init([](py::bytes binary, const std::string& lowered_name, py::handle device) {
             return std::make_shared<Kernel>(std::string(binary), lowered_name, resolve_device(device));
           }),
           py::arg("binary"), py::arg("lowered_name"), py::arg("device") = py::none())
      .def_property_readonly("name", &Kernel::name, "The kernel's symbol (mangled for C++ kernels).")
      .def_property_readonly("device", &Kernel::device)
      .def_property_readonly("parameter_sizes", &Kernel::parameter_sizes)
      .def(
          "__call__",
          [](Kernel& self, py::handle grid, py::handle block, py::handle args, std::size_t shared_mem,
             py::handle stream_arg) {
            const Dim3 grid_dims = dim3_from(grid, "grid");
            const Dim3 block_dims = dim3_from(block, "block");
            std::shared_ptr<Stream> stream = resolve_stream(stream_arg);
            PackedArguments packed = pack(self, args, stream);
            self.launch(*stream, grid_dims, block_dims, shared_mem, packed.pointers.data(), std::move(packed.holds));
            for (const auto& array : packed.arrays) array->set_stream(stream);
          },
          py::arg("grid"), py::arg("block"), py::arg("args"), py::kw_only(), py::arg("shared_mem") = 0,
          py::arg("stream") = py::none(),
          "Launches on `stream` (default: current). grid and block: an int or 1 to 3 ints. args: one per kernel "
          "parameter: device arrays (any GPU array; passed as pointers and kept alive until the kernel is done), "
          "NumPy scalars (must match the parameter's size), Python ints (checked against the parameter's size) "
          "and floats (float for 4-byte, double for 8-byte parameters).");
}

}  // namespace cuweave::bindings
