// Reading device arrays on the host, in the order of their writers.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "bindings/arrays.hpp"
#include "bindings/pybind.hpp"
#include "cuweave/operation.hpp"

namespace cuweave::bindings {

// The stream a host read of `array` runs on: the named one, else the current stream, or the array's device's
// default stream when the current stream is another device's (Note [Host reads follow the writer]); placed and
// checked as placed() does.
std::shared_ptr<Stream> host_read_placed(Operation& operation, const DeviceArray& array, py::handle stream,
                                         Layouts layouts);
// Makes `reader` wait for the streams whose queued work writes `array` (Note [Host reads follow the writer]).
void wait_for_writer(const DeviceArray& array, Stream& reader);
// Copies `source`'s elements into `destination` (same shape and dtype, either may be strided) on `stream`.
void copy_elements(Operation& operation, Stream& stream, DeviceArray& destination, const DeviceArray& source);
// A new contiguous array with `array`'s values, copied on the named stream (None: current), after the array's
// writers when `after_writers` (a host read's order).
std::shared_ptr<DeviceArray> contiguous_copy(const std::shared_ptr<DeviceArray>& array, py::handle stream,
                                             bool after_writers);
// Copies a device array into a new (or the given) NumPy array and waits for the copy (bind_copy.cpp).
py::array device_to_numpy(const std::shared_ptr<DeviceArray>& array, py::handle stream, py::handle out,
                          py::handle pinned);
// Copies `bytes` of `array`'s memory from byte `offset` into `destination` (writeable host memory of at least that
// size) as a host read: on `stream` (None: the current stream, after the array's writer; Note [Host reads follow
// the writer]), waiting for the copy.
void read_on_host(const std::shared_ptr<DeviceArray>& array, py::handle stream, const py::array& destination,
                  std::size_t offset, std::size_t bytes);

}  // namespace cuweave::bindings
