// Event: record, wait, query, synchronize, elapsed time, interprocess handles.
#include "bindings/devices.hpp"
#include "bindings/gil.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/streams.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

namespace {
const CallShape kEventCall{"Event()", "Event(*, timing=False, blocking=False, interprocess=False, device=None)",
                           {{"enable_timing", "timing=True", "PyTorch's"},
                            {"disable_timing", "timing=False (the default)", "CuPy's"},
                            {"block", "blocking=", "CuPy's"}}};
}  // namespace

void bind_event(py::module_& m) {
  py::class_<Event, std::shared_ptr<Event>>(m, "Event", R"doc(
A CUDA event: marks a point in a stream's work. Other streams can wait for it without the host
waiting; the host can query or wait for it; two timing events measure the GPU time between them.)doc")
      .def(py::init([](py::handle timing, py::handle blocking, py::handle interprocess, py::handle device) {
             EventOptions options{flag(timing, "Event()", "timing"), flag(blocking, "Event()", "blocking"),
                                  flag(interprocess, "Event()", "interprocess")};
             options.validate();  // before resolve_device, so it is reported the same without a GPU
             return std::make_shared<Event>(resolve_device(device), options);
           }),
           py::kw_only(), py::arg("timing") = false, py::arg("blocking") = false, py::arg("interprocess") = false,
           py::arg("device") = py::none())
      .def(py::init(misfit_init<Event>(kEventCall)))
      .def(
          "__await__",
          [](py::object self) { return py::module_::import("cuweave._awaitable").attr("event_await")(self); },
          "``await event``: waits for the event without blocking the event loop.")
      .def_static(
          "from_ipc_handle",
          [](py::bytes handle, py::handle device) {
            return Event::from_ipc_handle(std::string(handle), resolve_device(device));
          },
          py::arg("handle"), py::arg("device") = py::none(), "Opens an event shared by another process.")
      .def(
          "record",
          [](Event& self, py::handle stream) {
            std::shared_ptr<Stream> target = resolve_stream(stream);
            UnblockedEnqueue unblocked;
            self.record(*target);
          },
          py::arg("stream") = py::none(), "Records after the work queued so far on `stream` (default: current stream).")
      .def(
          "wait",
          [](Event& self, py::handle stream) {
            std::shared_ptr<Stream> target = resolve_stream(stream);
            UnblockedEnqueue unblocked;
            target->wait(self.handle());
          },
          py::arg("stream") = py::none(), "Makes later work on `stream` (default: current stream) wait for this event.")
      .def("query", &Event::complete, "True once the recorded work has completed (never blocks).")
      .def("synchronize", &Event::synchronize, py::call_guard<ReleaseGil>(),
           "Blocks until the recorded work has completed (the GIL is released).")
      .def(
          "elapsed_time",
          [](const Event& self, const Event& end) {
            const float ms = self.elapsed_ms(end);
            warn_if_simulated_timing();
            return ms;
          },
          py::arg("end"),
           "Milliseconds of GPU time from this event to `end`; both need timing=True and must have completed.")
      .def("ipc_handle", [](const Event& self) { return py::bytes(self.ipc_handle()); })
      .def("close", &Event::close)
      .def_property_readonly("handle", [](const Event& e) { return reinterpret_cast<std::uintptr_t>(e.handle()); })
      .def_property_readonly("device", &Event::device)
      .def_property_readonly("timing", [](const Event& e) { return e.options().timing; })
      .def_property_readonly("blocking", [](const Event& e) { return e.options().blocking; })
      .def_property_readonly("interprocess", [](const Event& e) { return e.options().interprocess; })
      .def_property_readonly("closed", &Event::closed)
      .def_property_readonly("recorded", &Event::recorded)
      .def("__repr__", [](const Event& e) {
        if (e.closed()) return std::string("<cuweave.Event closed>");
        return std::string("<cuweave.Event device=") + std::to_string(e.device()) +
               (e.options().timing ? " timing" : "") + (e.options().interprocess ? " interprocess" : "") +
               (e.recorded() ? " recorded" : " unrecorded") + ">";
      });
}

}  // namespace cuweave::bindings
