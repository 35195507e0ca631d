// Weave (Note [Weaving]): begun and ended by cuweave.weave() (cuweave/_weave.py), which supplies the streams.
#include "bindings/arrays.hpp"
#include "bindings/gil.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/python_holds.hpp"
#include "bindings/races.hpp"
#include "bindings/streams.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/weave.hpp"

namespace cuweave::bindings {

void bind_weave(py::module_& m) {
  py::class_<Weave, std::shared_ptr<Weave>>(m, "WeaveState", "The bookkeeping of one cuweave.weave() block.")
      .def_static("begin", &Weave::begin, py::arg("first"), py::arg("others"),
                  "Starts weaving on this thread: `first` (the current stream) is the weave's first stream, `others` "
                  "the streams it may choose besides it.")
      .def_static("begin_on_current", &Weave::begin_on_current, py::arg("count"),
                  "Starts weaving on this thread: the current stream first, then `count - 1` streams of its device that "
                  "no other weave holds (kept for the next weaves, which take them in the same order); on an SM "
                  "partition, streams made for the block on it.")
      .def(
          "end",
          [](Weave& self) {
            UnblockedEnqueue unblocked;
            self.end();
          },
          "The first stream waits for every other stream's work it does not already follow; the weave is no "
          "longer active, and the spare streams it took go back for the next weaves.")
      .def_property_readonly("streams", &Weave::streams)
      .def_property_readonly(
          "counts",
          [](const Weave& self) {
            const WeaveCounts counts = self.counts();
            py::tuple per_stream(counts.per_stream.size());
            for (std::size_t i = 0; i < counts.per_stream.size(); ++i) per_stream[i] = counts.per_stream[i];
            return py::make_tuple(counts.operations, counts.records, counts.waits, std::move(per_stream));
          },
          "What the weave queued so far: (operations, records, waits, per_stream), a tuple (cuweave.WeaveCounts "
          "makes it readable).");
  py::module_ weave = m.def_submodule("weave", "The active cuweave.weave() block, for work it cannot see by itself.");
  weave.def("active", [] { return Weave::active() != nullptr; }, "Whether a weave is active on this thread.");
  // For work the weave cannot see by itself: another library's operations (cuweave/_torch_hooks.py) and
  // Weave.step() blocks.
  weave.def(
      "place",
      [](const std::vector<std::tuple<std::uintptr_t, std::size_t, bool>>& ranges,
         py::handle stream) -> std::shared_ptr<Stream> {
        Weave* weave = Weave::active();
        CUWEAVE_EXPECTS(weave != nullptr, "no weave is active on this thread");
        std::vector<sanitizer::Access> accesses = accesses_from(ranges);
        std::shared_ptr<Stream> given = stream.is_none() ? nullptr : resolve_stream(stream);
        UnblockedEnqueue unblocked;
        return weave->place(std::move(accesses), std::move(given));
      },
      py::arg("ranges"), py::arg("stream") = py::none(),
      "Places an operation touching (address, bytes, writes) ranges in the active weave: the stream to queue it "
      "on, after the waits it needs.");
  weave.def(
      "kept_by_capture",
      [](const Stream& stream, const py::list& objects) {
        if (!Capture::any_active()) return false;
        std::shared_ptr<Capture> capture = Capture::of(stream);
        if (!capture) return false;
        Holds holds;
        holds.reserve(objects.size());
        for (py::handle object : objects) holds.push_back(hold_python(object));
        capture->keep(std::move(holds));
        return true;
      },
      py::arg("stream"), py::arg("objects"),
      "Whether `stream` takes part in a capture; if it does, `objects` (another library's arrays its captured work "
      "touches) live as long as the graph the capture makes, so that their memory is not handed out again while "
      "replays may still use it.");
  m.def(
      "touched_span",
      [](py::handle array) {
        const sanitizer::Access span = sanitizer::touches(*as_device_array(array), sanitizer::AccessKind::Read);
        return py::make_tuple(span.begin, span.end - span.begin);
      },
      py::arg("array"),
      "(address, bytes) from a GPU array's lowest element to its highest, as the sanitizer counts it.");
  weave.def(
      "allocated",
      [](std::uintptr_t pointer, std::size_t bytes, Stream& stream) {
        if (Weave* weave = Weave::active()) weave->allocated(reinterpret_cast<const void*>(pointer), bytes, stream);
      },
      py::arg("pointer"), py::arg("bytes"), py::arg("stream"),
      "Memory another library allocated in `stream`'s order inside the active weave (its users elsewhere wait).");
}

}  // namespace cuweave::bindings
