// Note [Conditional nodes]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A conditional node (if, if/else, while, switch: CUDA 12.4+, if/else and switch 12.8+) runs graphs it
// owns, its bodies, under a condition that work on the device sets while the graph runs: a loop until
// convergence or a branch on a computed value without a trip to the host. It is added to a capture after
// the capturing stream's work so far, and that stream's later work runs after it.
//
// cuweave fills each body by capturing into it (cudaStreamBeginCaptureToGraph) from a new stream of the
// same device, a body capture; inside the Python with-block that stream is the current stream, so work
// queued without `stream=` goes into the body, and a body may hold conditional nodes of its own. For
// lifetimes and the race sanitizer a body capture is part of its root capture (Capture::join_body):
// what body work uses is held by the root's graph, and body work is ordered after the capturing stream's
// work before the node, and before its work after the node.
//
// CUDA allows only kernels, copies, memsets, empty nodes, child graphs and conditional nodes in bodies.
// cuweave refuses host callbacks there by name (Capture::refuse_in_body), and a captured sum uses scratch
// the graph holds instead of allocation nodes. Work queued on the capturing stream while one of its bodies
// is open would land after the node, not in the body, silently: ending the body refuses that.
//
// A condition is created in the graph being captured and set back to its default at the start of every
// replay (cudaGraphCondAssignDefault). Work inside that graph sets it: set_condition (a built-in kernel
// evaluating one element, condition.hpp) or a user kernel calling cudaGraphSetConditional.
#pragma once

#include <memory>
#include <vector>

#include "cuweave/backend.hpp"

namespace cuweave {

class Capture;
class Stream;

// A condition of the graph `capturing` captures into (root or body), reset to `default_value` per replay.
ConditionHandle create_condition(Stream& capturing, unsigned default_value);

class Conditional {
 public:
  // Adds a conditional node with `bodies` bodies after the work captured on `stream` so far.
  static std::shared_ptr<Conditional> add(std::shared_ptr<Stream> stream, ConditionHandle condition,
                                          ConditionalKind kind, unsigned bodies);

  Conditional(const Conditional&) = delete;
  Conditional& operator=(const Conditional&) = delete;
  ~Conditional();

  ConditionalKind kind() const noexcept { return kind_; }
  unsigned body_count() const noexcept { return static_cast<unsigned>(node_.bodies.size()); }
  const std::shared_ptr<Stream>& stream() const noexcept { return stream_; }

  // Begins capturing into body `index` on a new stream, which it returns. Each body is filled at most
  // once, and one at a time.
  std::shared_ptr<Stream> begin_body(unsigned index);
  // Ends the open body's capture; throws (after ending it) when the body's forks were not joined back or
  // when work was queued on the capturing stream meanwhile.
  void end_body();
  // Ends the open body's capture, dropping nothing already captured; for a body whose block raised.
  void abandon_body() noexcept;

 private:
  Conditional(std::shared_ptr<Stream> stream, std::shared_ptr<Capture> root, ConditionalKind kind,
              ConditionalNode node);
  void close_body() noexcept;  // the body capture's bookkeeping ends, however it ended

  std::shared_ptr<Stream> stream_;
  std::shared_ptr<Capture> root_;
  ConditionalKind kind_;
  ConditionalNode node_;
  std::vector<bool> filled_;
  std::shared_ptr<Stream> body_stream_;           // of the open body, else null
  std::vector<GraphNodeHandle> frontier_at_open_;  // the capturing stream's, when the open body began
};

}  // namespace cuweave
