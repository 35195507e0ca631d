// Note [Simulated capture and graphs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Capture. A capture is a graph under construction plus, for each stream taking part, a frontier: the
// nodes that stream's next operation will depend on. Work enqueued on a capturing stream never reaches
// the scheduler: it becomes a node after the frontier, and the frontier becomes that node (a sum adds
// two kernel nodes in a chain, as the CUDA backend launches two kernels). Events carry forks and joins,
// as on CUDA: recording one on a capturing stream adds no node but makes it a captured event that
// remembers (capture, frontier); a stream that waits for it joins the capture with that frontier, or,
// already in it, adds that frontier to its own (a plain union, as CUDA: a join keeps an edge from the node
// its branches forked from, so both backends list the same edges). end_capture, on the stream that began the capture,
// checks that every joined stream's frontier was joined back into the origin's (else Unjoined) and, in
// every outcome but a wrong stream or thread, takes all the capture's streams out of capture mode; its
// captured events then look never recorded (complete, waited for by nothing).
//
// Calls CUDA refuses during capture are refused with CUDA's error and, as on CUDA, invalidate the capture:
// its streams stay in capture mode and refuse all work (StreamCaptureInvalidated) until end_capture
// reports it. Which host calls that block on other work a capture forbids follows cudaStreamCaptureMode:
// Global forbids them in every thread, ThreadLocal in the thread that began it, Relaxed nowhere. Queries of
// uncaptured streams and events and memory calls stay allowed: cuweave's bookkeeping makes them, and
// the CUDA backend makes them in relaxed mode; but a stream-ordered allocation or free on the legacy default
// stream synchronizes implicitly with blocking streams, as any work there does. An allocation on a capturing stream is an ordinary one,
// not a node; a free on it runs after the stream's work from before the capture.
//
// Graphs. Nodes keep their parameters as data (sim_graph.hpp), never as closures, so that a graph can be
// listed, copied, repointed and compared. An executable graph holds an immutable deep copy, shared with
// its queued launches (destroying or updating it never pulls memory from under them). A launch is ONE
// scheduler operation that runs every node in a topological order: when exploring, a random one drawn
// from the seeded generator, so that a dependency missing inside a graph changes the result under some
// seed and a seed replays the same order; otherwise the creation-ordered one. Event nodes act on the
// launch as a whole: it starts after the latest recording (at launch) of the events its wait nodes name,
// and its record nodes record generations that complete when it completes: later than on a GPU, never
// earlier. Launches of one executable run one after another, on any streams (Serial in scheduler.hpp),
// as CUDA orders them.
//
// Locks: CaptureBook::mutex_ is taken before Scheduler::mutex_ (it is held while uncaptured work is queued,
// so that no capture begins or ends in between); GraphStore::mutex_ is never held while taking either.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuweave/backend.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_error.hpp"
#include "sim/sim_graph.hpp"

namespace cuweave::sim {

class CaptureBook {
 public:
  // Captures of `scheduler`'s streams; their conditions made in `conditions`.
  CaptureBook(Scheduler& scheduler, ConditionBook& conditions) : scheduler_(scheduler), conditions_(conditions) {}
  CaptureBook(const CaptureBook&) = delete;
  CaptureBook& operator=(const CaptureBook&) = delete;

  void begin(SimStream* stream, CaptureMode mode);
  // The captured graph; throws (after ending the capture, unless the stream or thread is the wrong one)
  // when the capture was invalidated or a fork was never joined.
  std::unique_ptr<Graph> end(SimStream* stream);
  CaptureState state(const SimStream* stream);
  // The graph `stream` captures into (a body, for a body capture) and its node count; nothing when it is not
  // capturing or its capture was invalidated (CaptureBackend::captured_nodes).
  std::optional<CapturedNodes> nodes(const SimStream* stream);

  // Conditional nodes (CaptureBackend::capture_conditional and the calls beside it). A body capture is a capture
  // of its own (its own id, as on CUDA) whose graph is the body, owned by the conditional node; work CUDA
  // refuses inside bodies (host functions, event nodes) is refused there, with CUDA's error.
  ConditionHandle create_condition(const SimStream* stream, unsigned default_value);
  ConditionalNode add_conditional(SimStream* stream, ConditionHandle condition, ConditionalKind kind, unsigned bodies);
  std::vector<GraphNodeHandle> frontier(const SimStream* stream);
  void begin_into(SimStream* stream, GraphHandle body, CaptureMode mode);
  void end_into(SimStream* stream);

  // Work enqueued on `stream` (`call`: the CUDA call errors name). While the stream is capturing, the
  // nodes make_chain() describes join its capture, one after another, and nothing runs. Otherwise `run`
  // queues the work, with no capture beginning or ending meanwhile. Returns whether it was captured.
  bool capture_or_run(SimStream* stream, const char* call, const std::function<std::vector<NodeParams>()>& make_chain,
                      const std::function<void()>& run);
  // record_event and stream_wait_event: captured as described in the Note, else `run`.
  void record_or_run(SimEvent* event, SimStream* stream, const std::function<void()>& run);
  void wait_or_run(SimStream* stream, SimEvent* event, const std::function<void()>& run);

  // Host calls that wait for or look at work: each throws, invalidating, where a capture forbids it.
  void check_stream_synchronize(const SimStream* stream, const char* call);
  void check_stream_query(const SimStream* stream, const char* call);
  void check_event_synchronize(const SimEvent* event, const char* call);
  void check_event_query(const SimEvent* event, const char* call);
  void check_device_synchronize(int device, const char* call);
  // cudaStreamGetDevice on a capturing stream: CUDA refuses to describe it, invalidating the capture (seen on an
  // H200).
  void check_stream_described(const SimStream* stream, const char* call);
  // A stream-ordered allocation or free on `stream`: on the legacy default stream beside a capturing blocking
  // stream, CUDA refuses it and invalidates the capture (cudaMallocFromPoolAsync, seen on an H200).
  void check_stream_ordered_memory(const SimStream* stream, const char* call);
  // A batch of copies on a capturing stream: there is no graph node for one, and CUDA refuses it, leaving the
  // capture intact.
  void check_batched_copies(const SimStream* stream, const char* call);

  // A launch on `stream` of a graph holding memory allocation or free nodes: refused while it captures, invalidating
  // the capture (CUDA can neither launch such a graph inside a capture nor embed a copy of it; seen on an H200).
  void check_memory_graph_launch(const SimStream* stream, const char* call);

  // Before the stream or event goes: a destroyed capturing stream invalidates its capture (and ends
  // it, if it began it); a destroyed event is no longer captured.
  void forget(const SimStream* stream) noexcept;
  void forget(const SimEvent* event) noexcept;

 private:
  Scheduler& scheduler_;
  ConditionBook& conditions_;
  struct Capture {
    std::uint64_t id = 0;
    CaptureMode mode = CaptureMode::Global;
    std::thread::id thread;  // that began it
    SimStream* origin = nullptr;
    bool invalidated = false;
    std::unique_ptr<Graph> owned = std::make_unique<Graph>();  // null for a body capture
    Graph* graph = owned.get();                                 // what the capture adds to
    std::vector<SimStream*> streams;  // origin first, then those that joined
    std::vector<const Graph*> bodies;  // of the conditional nodes added here, which captures may fill
  };
  struct Frontier {
    Capture* capture;
    std::vector<Node*> nodes;  // what the next node depends on
  };

  // The caller holds mutex_ in all of these.
  Frontier* frontier_of(const SimStream* stream);
  // Throws, invalidating its capture, if `stream` is capturing: `doing` it ("query") is refused, `fix` says what
  // to do instead. LOCK: mutex_ held.
  void refuse_on_capturing_stream_locked(const SimStream* stream, const char* call, const char* doing, const char* fix);
  [[noreturn]] void refuse(const std::vector<Capture*>& invalidating, const char* call, CudaLikeError error,
                           const std::string& description);
  [[noreturn]] void refuse_invalidated(const Capture& capture, const char* call);
  // Work on the legacy default stream synchronizes with blocking streams: refused while one captures.
  void check_implicit_synchronization(const SimStream* stream, const char* call);
  // A host call blocking on other work, refused by Global captures anywhere and ThreadLocal ones of this thread.
  void check_mode(const char* call, const std::string& what);
  void check_event_query_locked(const SimEvent* event, const char* call);
  void finish(Capture* capture);
  Capture& start(SimStream* stream, CaptureMode mode, const char* call);  // begin and begin_into
  // Throws unless every stream that joined `capture` was joined back into its origin; then ends it.
  void check_joined_and_finish(Capture* capture, const Frontier& origin, const char* call);

  std::mutex mutex_;
  std::uint64_t last_id_ = 0;                                   // LOCK: mutex_
  std::map<std::uint64_t, std::unique_ptr<Capture>> captures_;  // LOCK: mutex_ (by id)
  std::unordered_map<const SimStream*, Frontier> streams_;      // LOCK: mutex_ (streams in capture mode)
  std::unordered_map<const SimEvent*, Frontier> events_;        // LOCK: mutex_ (captured events)
};

// A chain of one node, for capture_or_run's make_chain.
inline std::vector<NodeParams> chain(NodeParams node) { return {std::move(node)}; }

}  // namespace cuweave::sim
