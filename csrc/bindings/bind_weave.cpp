// Weave (Note [Weaving]): begun and ended by cuweave.weave() (cuweave/_weave.py), which supplies the streams.
#include "bindings/common.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/weave.hpp"

namespace cuweave::bindings {

void bind_weave(py::module_& m) {
  py::class_<Weave, std::shared_ptr<Weave>>(m, "WeaveState", "The bookkeeping of one cuweave.weave() block.")
      .def_static("begin", &Weave::begin, py::arg("first"), py::arg("others"),
                  "Starts weaving on this thread: `first` (the current stream) is lane 0, `others` the streams the "
                  "weave may choose besides it.")
      .def(
          "end",
          [](Weave& self) {
            UnblockedEnqueue unblocked;
            self.end();
          },
          "Lane 0 waits for every lane's work it does not already follow; the weave is no longer active.")
      .def_property_readonly("streams", &Weave::streams)
      .def_property_readonly("counts", [](const Weave& self) {
        const WeaveCounts counts = self.counts();
        py::dict result;
        result["operations"] = counts.operations;
        result["records"] = counts.records;
        result["waits"] = counts.waits;
        result["per_stream"] = counts.per_lane;
        return result;
      });
  m.def("weave_active", [] { return Weave::active() != nullptr; }, "Whether a weave is active on this thread.");
}

}  // namespace cuweave::bindings
