// HostLatch: streams paused until the host releases them (Note [Host latches]).
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/streams.hpp"
#include "cuweave/host_latch.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

namespace {
const CallShape kHostLatchCall{"HostLatch()", "HostLatch(*streams)"};
}  // namespace

void bind_host_latch(py::module_& m) {
  py::class_<HostLatch, std::shared_ptr<HostLatch>>(m, "HostLatch", R"doc(
A latch the host releases. ``latch.pause(stream)`` makes the work queued on ``stream`` after it wait until
``latch.release()``; no thread is busy meanwhile (the stream waits for a flag in mapped host memory).

Queue a burst of work behind a paused stream and release it at once, so that the device runs it without
launch gaps; or keep work pending for exactly as long as a test needs::

    with cw.HostLatch(stream) as latch:   # pauses `stream`; released when the block ends
        ...queue work on stream...
        assert not stream.query()

Releasing is final: pausing with a released latch pauses nothing. A latch keeps the streams it pauses alive
until the release; one that is garbage-collected unreleased is released, so a stream is never paused forever.
A pause cannot be captured into a graph.)doc")
      .def(py::init([](const py::args& streams) {
             auto latch = std::make_shared<HostLatch>();
             for (py::handle stream : streams) latch->pause(resolve_stream(stream));
             return latch;
           }),
           "``HostLatch(*streams)``: a new latch pausing each stream given.")
      .def(py::init(misfit_init<HostLatch>(kHostLatchCall)))
      .def(
          "pause", [](HostLatch& self, py::handle stream) { self.pause(resolve_stream(stream)); },
          py::arg("stream") = py::none(),
          "Later work on `stream` (default: the current stream) waits until release().")
      .def("release", &HostLatch::release, "Lets every paused stream go on (idempotent; never blocks).")
      .def_property_readonly("released", &HostLatch::released)
      .def_property_readonly("pauses", &HostLatch::pauses, "How many pauses were queued before the release.")
      .def("__enter__", [](std::shared_ptr<HostLatch> self) { return self; })
      .def(
          "__exit__", [](HostLatch& self, const py::args&) { self.release(); },
          "Releases the latch, also when the block raised.")
      .def("__repr__", [](const HostLatch& self) {
        return std::string("<cuweave.HostLatch ") + (self.released() ? "released" : "pausing") + ", " +
               std::to_string(self.pauses()) + " pauses>";
      });
}

}  // namespace cuweave::bindings
