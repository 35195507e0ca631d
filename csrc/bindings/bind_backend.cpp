// Backend selection and the simulator's controls.
#include "bindings/devices.hpp"
#include "bindings/gil.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "sim/fault_plan.hpp"
#include "sim/memory_registry.hpp"
#include "sim/scheduler.hpp"
#include "sim/simulator.hpp"

namespace cuweave::bindings {

namespace {
void require_simulator(const char* what) {
  if (std::string(backend().name()) != "sim") {
    throw InvalidArgument(std::string(what) + " controls the simulator, but the active backend is '" +
                          backend().name() + "'; set CUWEAVE_BACKEND=sim (or call cuweave.use_backend(\"sim\") first)");
  }
}
}  // namespace

void warn_if_simulated_timing() {
  static bool warned = false;  // once per process; guarded by the GIL
  if (warned || std::string(backend().name()) != "sim") return;
  warned = true;
  py::object category = py::module_::import("cuweave.errors").attr("SimulatorTimingWarning");
  if (PyErr_WarnEx(category.ptr(),
                   "cuweave is running on its host simulator: elapsed times are host-clock times of simulated work, "
                   "not GPU timings",
                   2) != 0) {
    throw py::error_already_set();
  }
}

void bind_backend(py::module_& m) {
  m.def("backend_name", [] { return std::string(backend().name()); }, "The active backend (chosen at first use).");
  m.def("select_backend", &select_backend, py::arg("name"));
  m.def("cuda_device_count", [] { return cuda_backend().devices().device_count(); },
        "CUDA devices usable on this machine, whatever the active backend (never raises).");
  m.def("cuda_unavailable_reason", [] { return cuda_backend().devices().unavailable_reason(); });
  py::module_ sim = m.def_submodule("sim", "The simulator's controls behind cuweave.sim (refused on the CUDA backend).");
  sim.def(
      "configure",
      [](std::optional<std::uint64_t> seed) {
        require_simulator("cuweave.sim.configure()");
        ReleaseGil release;
        sim::simulator().state().scheduler.configure(seed);
      },
      py::arg("seed"));
  sim.def("seed", [] {
    require_simulator("cuweave.sim.seed()");
    return sim::simulator().state().scheduler.seed();
  });
  sim.def(
      "configure_faults",
      [](std::optional<std::uint64_t> seed, double rate, const std::vector<std::string>& kinds) {
        require_simulator("cuweave.sim.inject_faults()");
        sim::simulator().state().faults.configure(seed, rate, kinds);
      },
      py::arg("seed"), py::arg("rate"), py::arg("kinds") = std::vector<std::string>{});
  sim.def("injected_faults", [] {
    require_simulator("cuweave.sim.injected_faults()");
    return sim::simulator().state().faults.injected();
  });
  sim.def("memory_in_use", [] {
    require_simulator("cuweave.sim.memory_in_use()");
    sim::MemoryRegistry& memory = sim::simulator().state().memory;
    py::dict in_use;
    in_use["device"] = memory.ranges_of(sim::MemoryKind::Device);
    in_use["pinned"] = memory.ranges_of(sim::MemoryKind::Pinned);
    in_use["registered"] = memory.ranges_of(sim::MemoryKind::Registered);
    in_use["device_bytes"] = memory.device_bytes_in_use();
    return in_use;
  });
}

}  // namespace cuweave::bindings
