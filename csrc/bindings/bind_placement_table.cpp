// The placement table (cuweave/_torch_native/placement_table.h): the active weave as plain C functions, for a hook
// built apart from cuweave against another library (PyTorch's dispatcher hook, cuweave/_torch_native/hook.cpp).
// The hook runs where that library released the GIL, so nothing here takes it but to note a traced call site.
#include <exception>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "bindings/gil.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/trace.hpp"
#include "cuweave/weave.hpp"
#include "placement_table.h"

namespace cuweave::bindings {
namespace {

// The first failure of a table call on this thread since the last raise_failed_placement(): the hook cannot
// raise through the library that called it (PyTorch logs and drops a callback's exception), so the weave's end
// raises it.
thread_local std::exception_ptr failed_placement;

int failed() noexcept {
  if (!failed_placement) failed_placement = std::current_exception();
  return -1;
}

int placing_device() noexcept {
  try {
    if (Weave::active() == nullptr || sanitizer::enabled()) return -1;
    const std::shared_ptr<Stream> current = current_stream::get();
    // Under a capture each operator is placed once, as the graph is made, not at each replay: the Python hooks
    // place it then, and keep what it touches for the graph.
    if (Capture::any_active() && Capture::of(*current)) return -1;
    return current->device();
  } catch (...) {
    failed();
    return -1;
  }
}

int place(const cuweave_range* ranges, std::size_t count, cuweave_placed* placed) noexcept {
  try {
    Weave* weave = Weave::active();
    CUWEAVE_EXPECTS(weave != nullptr, "no weave is active on this thread");
    std::optional<UnblockedEnqueue> unblocked;  // a library calling with the GIL held: released while paused
    if (PyGILState_Check()) unblocked.emplace();
    std::optional<trace::CallSiteNote> note;
    if (trace::active() && !unblocked) {  // the weave's records and waits named at the Python line that called
      PyGILState_STATE gil = PyGILState_Ensure();
      note.emplace();
      PyGILState_Release(gil);
    }
    thread_local std::vector<sanitizer::Access> accesses;
    accesses.clear();
    for (std::size_t i = 0; i < count; ++i) {
      accesses.push_back({ranges[i].begin, ranges[i].begin + ranges[i].bytes,
                          ranges[i].writes ? sanitizer::AccessKind::Write : sanitizer::AccessKind::Read});
    }
    const std::shared_ptr<Stream> stream = weave->place(sanitizer::AccessSpan(accesses.data(), accesses.size()),
                                                        nullptr);
    // The legacy default stream as 0 whatever handle the backend gives it (CUDA's cudaStreamLegacy is 1): PyTorch
    // names it 0 and takes another odd number for none of its streams.
    placed->stream_handle = stream->is_legacy_default() ? 0 : reinterpret_cast<std::uintptr_t>(stream->handle());
    placed->device = stream->device();
    placed->captured = Capture::any_active() && Capture::of(*stream) != nullptr;
    placed->stream = stream.get();  // the weave's strands hold it until the weave ends
    return 0;
  } catch (...) {
    return failed();
  }
}

int allocated(std::uintptr_t begin, std::size_t bytes, void* stream) noexcept {
  try {
    if (Weave* weave = Weave::active()) {
      weave->allocated(reinterpret_cast<const void*>(begin), bytes, *static_cast<const Stream*>(stream));
    }
    return 0;
  } catch (...) {
    return failed();
  }
}

int keep(void* stream, void* object, void (*release)(void*)) noexcept {
  try {
    Hold hold(object, [release](const void* kept) { release(const_cast<void*>(kept)); });
    const std::shared_ptr<Capture> capture = Capture::of(*static_cast<const Stream*>(stream));
    CUWEAVE_EXPECTS(capture != nullptr, "the stream takes part in no capture");
    capture->keep(Holds{std::move(hold)});
    return 0;
  } catch (...) {
    return failed();
  }
}

const cuweave_placement_table table = {CUWEAVE_PLACEMENT_TABLE_VERSION, placing_device, place, allocated, keep};

}  // namespace

void bind_placement_table(py::module_& weave) {
  weave.def(
      "placement_table",
      [] { return py::capsule(const_cast<cuweave_placement_table*>(&table), CUWEAVE_PLACEMENT_TABLE_NAME); },
      "The active weave's placement table as C functions, in a capsule (placement_table.h in "
      "cuweave/_torch_native): for a hook built against another library, which shares no C++ ABI with cuweave.");
  weave.def("placing_device", &placing_device,
            "The table's placing_device(): the current stream's device where a hook built against another library "
            "places its operators now (a weave active on this thread, the sanitizer off, no capture on the current "
            "stream), else -1.");
  weave.def(
      "raise_failed_placement",
      [] {
        if (std::exception_ptr failure = std::exchange(failed_placement, nullptr)) std::rethrow_exception(failure);
      },
      "Raises the first failure of a placement table call on this thread since the last call, if there was one.");
}

}  // namespace cuweave::bindings
