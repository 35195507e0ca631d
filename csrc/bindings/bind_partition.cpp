// SM partitions: a device's SMs split into sets that streams made on them keep their kernels to
// (Note [SM partitions] in cuweave/sm_partition.hpp).
#include "bindings/devices.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/sm_partition.hpp"

namespace cuweave::bindings {

namespace {

unsigned count_argument(py::handle value, const char* what) {
  if (py::isinstance<py::bool_>(value) || !PyIndex_Check(value.ptr())) {
    throw WrongType(std::string(what) + " must be an int, not " +
                    std::string(py::str(py::type::handle_of(value).attr("__name__"))));
  }
  const long long count = value.cast<long long>();
  if (count < 1) throw InvalidArgument(std::string(what) + " must be at least 1, not " + std::to_string(count));
  if (count > 1 << 20) throw InvalidArgument(std::string(what) + " " + std::to_string(count) + " is more than any device has");
  return static_cast<unsigned>(count);
}

std::string describe(const SmPartition& partition) {
  return "<cuweave.SMPartition device=" + std::to_string(partition.device()) + " sms=" +
         std::to_string(partition.sms()) + (partition.is_rest() ? " (the SMs left over)" : "") + ">";
}

}  // namespace

void bind_partition(py::module_& m) {
  py::class_<SmResources>(m, "SMResources", "A device's SMs, as partitions may split them.")
      .def(py::init(made_elsewhere<SmResources>("SMResources", "read cuweave.Device(n).sm_resources")))
      .def_readonly("sm_count", &SmResources::sm_count, "The device's streaming multiprocessors.")
      .def_readonly("min_partition_sms", &SmResources::min_partition_sms, "The fewest SMs a partition may have.")
      .def_readonly("alignment", &SmResources::alignment, "A partition's SM count is a multiple of this.")
      .def("__repr__", [](const SmResources& r) {
        return "SMResources(sm_count=" + std::to_string(r.sm_count) + ", min_partition_sms=" +
               std::to_string(r.min_partition_sms) + ", alignment=" + std::to_string(r.alignment) + ")";
      });

  py::class_<SmPartition, std::shared_ptr<SmPartition>>(m, "SMPartition", R"doc(
A set of one device's SMs. Kernels queued on a stream made on it, ``cuweave.Stream(partition=p)``, run on
these SMs only, so work on another partition of the device always has SMs of its own.

Made by ``cuweave.Device(n).partition(sms)``. It lives while it or a stream made on it is referenced, and
until the work queued on those streams has completed.)doc")
      .def(py::init(made_elsewhere<SmPartition>("SMPartition", "cuweave.Device(n).partition(sms) makes them")))
      .def_property_readonly("device", &SmPartition::device)
      .def_property_readonly("sms", &SmPartition::sms, "How many SMs it has (CUDA may round a request up).")
      .def_property_readonly("is_rest", &SmPartition::is_rest,
                             "True for the partition of the SMs a split left over.")
      .def("__repr__", [](const SmPartition& p) { return describe(p); });

  m.def("sm_resources", [](int device) { return SmPartition::resources(checked_device(device)); }, py::arg("device"));
  m.def(
      "partition_sms",
      [](int device, py::handle sms, py::handle groups) {
        const unsigned min_sms = count_argument(sms, "sms");
        const unsigned count = count_argument(groups, "groups");
        return SmPartition::split(checked_device(device), min_sms, count);
      },
      py::arg("device"), py::arg("sms"), py::arg("groups"));
  m.def("sm_partitions_alive", &SmPartition::alive, "SMPartition objects alive in this process (for tests).");
}

}  // namespace cuweave::bindings
