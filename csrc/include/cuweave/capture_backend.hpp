// The backend's stream capture: turning the work queued on streams into a graph, conditional nodes captured
// on the way included (Note [Backend facets] in backend.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "cuweave/backend_handles.hpp"
#include "cuweave/condition.hpp"
#include "cuweave/graph_backend.hpp"

namespace cuweave {

// How a capture treats calls CUDA deems unsafe while it is active (CUDA's cudaStreamCaptureMode):
// Global forbids them in every thread, ThreadLocal in the capturing thread, Relaxed nowhere.
enum class CaptureMode { Global, ThreadLocal, Relaxed };

struct CaptureState {
  enum class Status { None, Active, Invalidated };
  Status status = Status::None;
  std::uint64_t id = 0;  // unique per capture sequence; 0 when status is None
};

// The graph a capturing stream adds its work to, and how many nodes that graph holds now: its own nodes, not those
// of its conditional nodes' bodies, which are graphs of their own (Note [Footprints of captures] in capture.hpp).
struct CapturedNodes {
  const void* graph = nullptr;  // names the graph, to tell graphs apart; not a handle to act on
  std::size_t count = 0;
};

class CaptureBackend {
 public:
  virtual ~CaptureBackend() = default;

  // begin_capture starts capturing the work queued on `stream` (and on streams that join by waiting for its
  // events); end_capture returns the graph, or throws (an unjoined fork, an invalidated capture) after the
  // stream has left capture either way.
  virtual void begin_capture(StreamHandle stream, CaptureMode mode) = 0;
  virtual GraphHandle end_capture(StreamHandle stream) = 0;
  virtual CaptureState capture_state(StreamHandle stream) = 0;
  // Adds a copy of `graph` as one node of the capture `stream` takes part in, after the stream's captured
  // work (how a graph replayed inside a capture is captured, without instantiating it there).
  virtual void capture_graph(StreamHandle stream, GraphHandle graph) = 0;
  // The graph `stream` captures into and its node count; nothing when the stream is not capturing, or its capture
  // was invalidated.
  virtual std::optional<CapturedNodes> captured_nodes(StreamHandle stream) = 0;

  // Conditional nodes (Note [Conditional nodes] in conditional.hpp). create_condition makes a condition
  // of the graph `stream` captures into, reset to `default_value` at the start of every replay;
  // capture_conditional adds a node running `bodies` graphs under it after the stream's captured work,
  // and makes that node the stream's only dependency. capture_frontier: the nodes the stream's next
  // captured operation would depend on. begin_capture_into captures `stream`'s work into `graph` (a body),
  // with no dependencies; end_capture_into ends that, leaving the nodes in the body.
  virtual ConditionHandle create_condition(StreamHandle stream, unsigned default_value) = 0;
  virtual ConditionalNode capture_conditional(StreamHandle stream, ConditionHandle condition, ConditionalKind kind,
                                              unsigned bodies) = 0;
  virtual std::vector<GraphNodeHandle> capture_frontier(StreamHandle stream) = 0;
  virtual void begin_capture_into(StreamHandle stream, GraphHandle graph, CaptureMode mode) = 0;
  virtual void end_capture_into(StreamHandle stream) = 0;
  // A built-in kernel setting `condition` from rule.element (evaluate_condition in condition.hpp); only
  // inside a capture of the graph that owns the condition (or of one of its bodies).
  virtual void set_condition(ConditionHandle condition, const ConditionRule& rule, StreamHandle stream) = 0;
};

}  // namespace cuweave
