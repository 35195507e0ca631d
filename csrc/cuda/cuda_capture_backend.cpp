// The CUDA backend's stream capture and the conditional nodes added through it (CaptureBackend).
#include <cuda_runtime.h>

#include <optional>
#include <vector>

#include "cuda/active_captures.hpp"
#include "cuda/builtin_kernels.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_facets.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuweave/capture_backend.hpp"

namespace cuweave::cuda {

namespace {

cudaStreamCaptureMode cuda_capture_mode(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::Global: return cudaStreamCaptureModeGlobal;
    case CaptureMode::ThreadLocal: return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::Relaxed: return cudaStreamCaptureModeRelaxed;
  }
  return cudaStreamCaptureModeGlobal;
}

// The graph `stream` captures into and the nodes its next captured operation will depend on.
struct ActiveCapture {
  cudaGraph_t graph = nullptr;
  std::vector<cudaGraphNode_t> frontier;
};

// Throws for `call` (the node-adding call that would follow) when `stream` is not capturing.
ActiveCapture active_capture(StreamHandle stream, const char* call) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ActiveCapture capture;
  const cudaGraphNode_t* frontier = nullptr;
  std::size_t count = 0;
  CUWEAVE_CUDA_TRY(cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(stream), &status, nullptr, &capture.graph,
                                            &frontier, nullptr, &count));
  if (status != cudaStreamCaptureStatusActive) {
    throw_cuda_error(
        status == cudaStreamCaptureStatusNone ? cudaErrorIllegalState : cudaErrorStreamCaptureInvalidated, call,
        __FILE__, __LINE__);
  }
  capture.frontier.assign(frontier, frontier + count);
  return capture;
}

class CudaCaptureBackend final : public CaptureBackend {
 public:
  CudaCaptureBackend(ActiveCaptures& captures, GraphBackend& graphs) : captures_(captures), graphs_(graphs) {}

  void begin_capture(StreamHandle stream, CaptureMode mode) override {
    captures_.beginning();  // before CUDA's capture begins: no bookkeeping call may run unrelaxed then
    try {
      CUWEAVE_CUDA_TRY(cudaStreamBeginCapture(as_stream(stream), cuda_capture_mode(mode)));
    } catch (...) {
      captures_.ended();
      throw;
    }
  }

  GraphHandle end_capture(StreamHandle stream) override {
    cudaGraph_t graph = nullptr;
    const cudaError_t status = cudaStreamEndCapture(as_stream(stream), &graph);
    if (status != cudaErrorStreamCaptureUnmatched && status != cudaErrorIllegalState) {
      captures_.ended();  // the capture is over, however it ended
    }
    if (status != cudaSuccess && graph) CUWEAVE_CUDA_TRY_QUIET(cudaGraphDestroy(graph));
    CUWEAVE_CUDA_TRY(status);
    return graph;
  }

  CaptureState capture_state(StreamHandle stream) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    CUWEAVE_CUDA_TRY(cudaStreamGetCaptureInfo(as_stream(stream), &status, &id));
    CaptureState state;
    if (status == cudaStreamCaptureStatusActive) state.status = CaptureState::Status::Active;
    if (status == cudaStreamCaptureStatusInvalidated) state.status = CaptureState::Status::Invalidated;
    if (state.status != CaptureState::Status::None) state.id = id;
    return state;
  }

  void capture_graph(StreamHandle stream, GraphHandle graph) override {
    const ActiveCapture capture = active_capture(stream, "cudaGraphAddChildGraphNode");
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddChildGraphNode(&node, capture.graph, capture.frontier.data(),
                                                capture.frontier.size(), as_graph(graph)));
    CUWEAVE_CUDA_TRY(cudaStreamUpdateCaptureDependencies(as_stream(stream), &node, nullptr, 1,
                                                         cudaStreamSetCaptureDependencies));
  }

  std::optional<CapturedNodes> captured_nodes(StreamHandle stream) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    CUWEAVE_CUDA_TRY(cudaStreamGetCaptureInfo(as_stream(stream), &status, nullptr, &graph));
    if (status != cudaStreamCaptureStatusActive) return std::nullopt;
    std::size_t count = 0;  // with no list given, CUDA only counts
    CUWEAVE_CUDA_TRY(cudaGraphGetNodes(graph, nullptr, &count));
    return CapturedNodes{graph, count};
  }

  ConditionHandle create_condition(StreamHandle stream, unsigned default_value) override {
    const ActiveCapture capture = active_capture(stream, "cudaGraphConditionalHandleCreate");
    return graphs_.create_graph_condition(capture.graph, default_value);
  }

  ConditionalNode capture_conditional(StreamHandle stream, ConditionHandle condition, ConditionalKind kind,
                                      unsigned bodies) override {
    const ActiveCapture capture = active_capture(stream, "cudaGraphAddNode");
    std::vector<GraphNodeHandle> frontier(capture.frontier.begin(), capture.frontier.end());
    ConditionalNode made = graphs_.add_conditional_node(capture.graph, frontier, condition, kind, bodies);
    cudaGraphNode_t node = as_node(made.node);
    CUWEAVE_CUDA_TRY(cudaStreamUpdateCaptureDependencies(as_stream(stream), &node, nullptr, 1,
                                                         cudaStreamSetCaptureDependencies));
    return made;
  }

  std::vector<GraphNodeHandle> capture_frontier(StreamHandle stream) override {
    const ActiveCapture capture = active_capture(stream, "cudaStreamGetCaptureInfo");
    return std::vector<GraphNodeHandle>(capture.frontier.begin(), capture.frontier.end());
  }

  void begin_capture_into(StreamHandle stream, GraphHandle graph, CaptureMode mode) override {
    captures_.beginning();
    try {
      CUWEAVE_CUDA_TRY(cudaStreamBeginCaptureToGraph(as_stream(stream), as_graph(graph), nullptr, nullptr, 0,
                                                     cuda_capture_mode(mode)));
    } catch (...) {
      captures_.ended();
      throw;
    }
  }

  void end_capture_into(StreamHandle stream) override {
    cudaGraph_t graph = nullptr;  // the body it captured into, which its conditional node owns
    const cudaError_t status = cudaStreamEndCapture(as_stream(stream), &graph);
    if (status != cudaErrorStreamCaptureUnmatched && status != cudaErrorIllegalState) {
      captures_.ended();
    }
    CUWEAVE_CUDA_TRY(status);
  }

  void set_condition(ConditionHandle condition, const ConditionRule& rule, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(launch_set_condition(condition, rule, as_stream(stream)));
  }

 private:
  ActiveCaptures& captures_;
  GraphBackend& graphs_;  // the conditional nodes a capture adds are added to its graph
};

}  // namespace

std::unique_ptr<CaptureBackend> make_capture_backend(ActiveCaptures& captures, GraphBackend& graphs) {
  return std::make_unique<CudaCaptureBackend>(captures, graphs);
}

}  // namespace cuweave::cuda
