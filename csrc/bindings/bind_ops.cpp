// Built-in kernels: fill and spin. The Python layer (cuweave/ops.py) converts fill values.
#include "bindings/common.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

void bind_ops(py::module_& m) {
  m.def(
      "fill_bytes",
      [](const std::shared_ptr<DeviceArray>& array, py::bytes pattern, py::handle stream_arg) {
        const std::string bytes = pattern;
        CUWEAVE_EXPECTS(bytes.size() == array->dtype().itemsize, "fill pattern size differs from the array's itemsize");
        CUWEAVE_EXPECTS(array->contiguous(), "fill needs a contiguous device array");
        CUWEAVE_EXPECTS(!array->readonly(), "cannot fill a read-only device array");
        std::shared_ptr<Stream> stream = resolve_stream(stream_arg);
        CUWEAVE_EXPECTS(array->device() == stream->device(),
                        "the array is on device " + std::to_string(array->device()) + " but the stream is on device " +
                            std::to_string(stream->device()));
        stream->fill_async(array->data(), array->size(), bytes.data(), bytes.size(), {array->memory()});
        array->set_stream(stream);
      },
      py::arg("array"), py::arg("pattern"), py::arg("stream") = py::none());
  m.def(
      "spin",
      [](double seconds, py::handle stream_arg, unsigned blocks, py::handle start_times, long long slot) {
        CUWEAVE_EXPECTS(seconds >= 0 && seconds <= 60, "spin takes 0 to 60 seconds");
        CUWEAVE_EXPECTS(blocks >= 1, "spin needs at least one block");
        std::shared_ptr<Stream> stream = resolve_stream(stream_arg);
        std::uint64_t* start = nullptr;
        Holds holds;
        if (!start_times.is_none()) {
          auto times = start_times.cast<std::shared_ptr<DeviceArray>>();
          if (times->dtype().typestr != "<u8") throw WrongType("start_times must be a uint64 DeviceArray");
          CUWEAVE_EXPECTS(times->contiguous(), "start_times must be contiguous");
          CUWEAVE_EXPECTS(slot >= 0 && static_cast<std::size_t>(slot) < times->size(),
                          "slot " + std::to_string(slot) + " is outside start_times (size " +
                              std::to_string(times->size()) + ")");
          start = static_cast<std::uint64_t*>(times->data()) + slot;
          holds.push_back(times->memory());
        }
        stream->spin_async(static_cast<std::uint64_t>(seconds * 1e9), blocks, start, std::move(holds));
      },
      py::arg("seconds"), py::arg("stream") = py::none(), py::arg("blocks") = 1, py::arg("start_times") = py::none(),
      py::arg("slot") = 0);
}

}  // namespace cuweave::bindings
