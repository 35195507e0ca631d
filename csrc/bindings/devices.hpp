// Devices named from Python, and what the simulator says about timings read on it.
#pragma once

#include "bindings/pybind.hpp"

namespace cuweave::bindings {

// A device ordinal that exists (ValueError otherwise; DeviceUnavailableError without devices).
int checked_device(int device);
// `None` -> the current device; else an int (or anything with __index__, such as cuweave.Device).
int resolve_device(py::handle device);

// Warns once per process (SimulatorTimingWarning) when a timing is read on the simulator.
void warn_if_simulated_timing();

}  // namespace cuweave::bindings
