// Backend and device queries, device selection and device-wide synchronization.
#include "bindings/devices.hpp"
#include "bindings/gil.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/collective_failures.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/host_callbacks.hpp"
#include "cuweave/interruptible_wait.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/services.hpp"

namespace cuweave::bindings {

int checked_device(int device) {
  backend().devices().require_device();
  const int count = backend().devices().device_count();
  if (device < 0 || device >= count) {
    throw InvalidArgument("device " + std::to_string(device) + " does not exist; this machine has " +
                          std::to_string(count) + " device(s), numbered 0.." + std::to_string(count - 1));
  }
  return device;
}

int resolve_device(py::handle device) {
  if (device.is_none()) return backend().devices().current_device();
  if (py::isinstance<py::bool_>(device)) throw WrongType("device must be an int or cuweave.Device, not bool");
  return checked_device(py::cast<int>(device));
}

void bind_device(py::module_& m) {
  py::class_<DeviceProperties>(m, "DeviceProperties", "What a device is and can do (read once, cached).")
      .def(py::init(made_elsewhere<DeviceProperties>("DeviceProperties", "read cuweave.Device(n).properties")))
      .def_readonly("ordinal", &DeviceProperties::ordinal)
      .def_readonly("name", &DeviceProperties::name)
      .def_readonly("multiprocessor_count", &DeviceProperties::multiprocessor_count)
      .def_property_readonly("compute_capability",
                             [](const DeviceProperties& p) {
                               return py::make_tuple(p.compute_capability_major, p.compute_capability_minor);
                             })
      .def_readonly("async_engine_count", &DeviceProperties::async_engine_count,
                    "Copy engines: 2 or more lets a host-to-device and a device-to-host copy run at once.")
      .def_property_readonly(
          "priority_range", [](const DeviceProperties& p) { return py::make_tuple(p.lowest_priority, p.highest_priority); },
          "(lowest, highest) stream priority; numerically lower is more urgent, e.g. (0, -5).")
      .def_readonly("total_memory", &DeviceProperties::total_memory)
      .def_readonly("pci_bus_id", &DeviceProperties::pci_bus_id)
      .def("__repr__", [](const DeviceProperties& p) {
        return "DeviceProperties(name='" + p.name + "', compute_capability=(" +
               std::to_string(p.compute_capability_major) + ", " + std::to_string(p.compute_capability_minor) +
               "), multiprocessor_count=" + std::to_string(p.multiprocessor_count) + ", async_engine_count=" +
               std::to_string(p.async_engine_count) + ", priority_range=(" + std::to_string(p.lowest_priority) +
               ", " + std::to_string(p.highest_priority) + "), total_memory=" + std::to_string(p.total_memory) + ")";
      });

  m.def("device_count", [] { return backend().devices().device_count(); });
  m.def("unavailable_reason", [] { return backend().devices().unavailable_reason(); });
  // Facts about the CUDA installation, whichever backend is active.
  m.def("driver_version", [] { return cuda_backend().devices().driver_version(); });
  m.def("runtime_version", [] { return cuda_backend().devices().runtime_version(); });
  m.def("checked_device", &checked_device, py::arg("device"));
  m.def("current_device", [] { return backend().devices().current_device(); });
  m.def("set_current_device", [](int device) { backend().devices().set_current_device(checked_device(device)); });
  m.def("device_properties", [](int device) { return backend().devices().device_properties(checked_device(device)); });
  m.def(
      "graph_memory_use",
      [](int device) {
        const GraphMemoryUse use = backend().devices().graph_memory_use(checked_device(device));
        return py::make_tuple(use.used, use.reserved);
      },
      py::arg("device"), "(used, reserved): bytes of the device's graph memory (Note [Graph memory]).");
  m.def(
      "trim_graph_memory",
      [](int device) {
        ReleaseGil release;
        backend().devices().trim_graph_memory(checked_device(device));
      },
      py::arg("device"), "cudaDeviceGraphMemTrim.");
  m.def(
      "synchronize_device",
      [](int device) {
        checked_device(device);
        const std::uint64_t collectives = collective_failures::numbered();
        {
          ReleaseGil release;
          HostCallbacks& callbacks = services().host_callbacks();
          const std::uint64_t launched = callbacks.launched();
          DeviceBackend& devices = backend().devices();
          wait_interruptibly([&](const WaitSlice& slice) { return devices.synchronize_device_for(device, slice); });
          wait_interruptibly([&](const WaitSlice& slice) { return callbacks.wait_for_all(launched, slice.until); });
        }
        if (sanitizer::enabled()) sanitizer::host_synchronized_device(device);
        const std::size_t collected = services().lifetimes().collect();
        // Note [Collective failures reach the waits]
        if (collective_failures::any()) collective_failures::report_device(device, collectives);
        return collected;
      },
      py::arg("device"));
  m.def(
      "collect",
      [] {
        ReleaseGil release;
        return services().lifetimes().collect();
      },
      "Releases what completed work kept alive (device arrays, pinned blocks, NumPy arrays, callables) and "
      "returns how many pieces of queued work it found completed. Waits and the pinned pool do this as they "
      "go; call it to release memory at a point of your choosing. Does not wait.");
  m.def("pending_lifetimes", [] { return services().lifetimes().pending_entries(); });
}

}  // namespace cuweave::bindings
