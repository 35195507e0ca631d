// The simulator's stream capture and the conditional nodes added through it (CaptureBackend).
#include <memory>
#include <optional>
#include <vector>

#include "cuweave/backend.hpp"
#include "sim/capture_book.hpp"
#include "sim/graph_store.hpp"
#include "sim/handles.hpp"
#include "sim/memory_registry.hpp"
#include "sim/sim_error.hpp"
#include "sim/sim_facets.hpp"
#include "sim/sim_graph.hpp"
#include "sim/sim_kernels.hpp"

namespace cuweave::sim {

namespace {

class SimCaptureBackend final : public CaptureBackend {
 public:
  SimCaptureBackend(Handles& handles, CaptureBook& captures, GraphStore& graphs, MemoryRegistry& memory)
      : handles_(handles), captures_(captures), graphs_(graphs), memory_(memory) {}

  void begin_capture(StreamHandle handle, CaptureMode mode) override {
    captures_.begin(handles_.resolve_stream(handle, "cudaStreamBeginCapture"), mode);
  }
  GraphHandle end_capture(StreamHandle handle) override {
    return graphs_.adopt(captures_.end(handles_.resolve_stream(handle, "cudaStreamEndCapture")));
  }
  void capture_graph(StreamHandle handle, GraphHandle graph) override {
    constexpr const char* kCall = "cudaGraphAddChildGraphNode";
    SimStream* stream = handles_.resolve_stream(handle, kCall);
    std::shared_ptr<Graph> copy = graphs_.copy_of(graph, kCall);
    captures_.capture_or_run(
        stream, kCall, [&] { return chain(ChildGraphNode{copy}); },
        [&] { fail(kCall, kIllegalState, "this stream is not capturing: there is no capture to add the graph to"); });
  }
  CaptureState capture_state(StreamHandle handle) override {
    return captures_.state(handles_.resolve_stream(handle, "cudaStreamGetCaptureInfo"));
  }

  std::optional<CapturedNodes> captured_nodes(StreamHandle handle) override {
    return captures_.nodes(handles_.resolve_stream(handle, "cudaStreamGetCaptureInfo"));
  }

  ConditionHandle create_condition(StreamHandle handle, unsigned default_value) override {
    SimStream* stream = handles_.resolve_stream(handle, "cudaGraphConditionalHandleCreate");
    return captures_.create_condition(stream, default_value);
  }
  ConditionalNode capture_conditional(StreamHandle handle, ConditionHandle condition, ConditionalKind kind,
                                      unsigned bodies) override {
    return captures_.add_conditional(handles_.resolve_stream(handle, "cudaGraphAddNode"), condition, kind, bodies);
  }
  std::vector<GraphNodeHandle> capture_frontier(StreamHandle handle) override {
    return captures_.frontier(handles_.resolve_stream(handle, "cudaStreamGetCaptureInfo"));
  }
  void begin_capture_into(StreamHandle handle, GraphHandle graph, CaptureMode mode) override {
    captures_.begin_into(handles_.resolve_stream(handle, "cudaStreamBeginCaptureToGraph"), graph, mode);
  }
  void end_capture_into(StreamHandle handle) override {
    captures_.end_into(handles_.resolve_stream(handle, "cudaStreamEndCapture"));
  }
  void set_condition(ConditionHandle condition, const ConditionRule& rule, StreamHandle handle) override {
    constexpr const char* kCall = "cudaLaunchKernel";
    memory_.within_range(rule.element, element_bytes(rule.type), kCall);
    SimStream* stream = handles_.resolve_stream(handle, kCall);
    captures_.capture_or_run(
        stream, kCall, [&] { return chain(SetConditionKernel{condition, rule}); },
        [&] {
          fail(kCall, kIllegalState,
               "a condition is set by work captured into the graph that owns it; this stream is not capturing");
        });
  }

 private:
  Handles& handles_;
  CaptureBook& captures_;
  GraphStore& graphs_;
  MemoryRegistry& memory_;
};

}  // namespace

std::unique_ptr<CaptureBackend> make_capture_backend(SimState& sim) {
  return std::make_unique<SimCaptureBackend>(sim.handles, sim.captures, sim.graphs, sim.memory);
}

}  // namespace cuweave::sim
