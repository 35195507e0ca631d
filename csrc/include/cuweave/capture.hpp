// Note [Capture and lifetimes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Work queued while a stream is captured does not run: it becomes a graph that runs at each replay. So
// the stream-ordered lifetime rules change shape during capture:
//  * Holds cannot wait for an event recorded on a capturing stream (querying such an event is illegal
//    and would invalidate the capture). They go to the Capture instead, then to the graph it makes,
//    and live as long as that graph (each replay then keeps the graph alive until it has completed).
//  * Memory that follows its stream (Note [Memory follows its stream]) is held the same way instead of
//    moving its free stream onto the capturing stream, since the free would be captured too.
//  * What must happen on a capturing stream outside the capture (freeing memory that was last used
//    there before the capture began) is deferred until the capture ends.
// A capture ends exactly once, by end() or abandon(); every stream that joined it then leaves capture.
//
// Note [Graph memory]
// ~~~~~~~~~~~~~~~~~~~
// A capture begun with graph memory on (cuweave.woven's, a graph function's) makes the arrays allocated inside
// it allocation nodes of its graph instead of memory held outside it, so that the graph's temporaries are not
// memory of their own between replays: CUDA keeps graph memory mapped between launches, shares it among graphs
// whose launches do not overlap, and gives it back on a trim (measured on an H200:
// tools/probes/graph_memory_nodes_probe.cu, cases A, Q and R).
//  * An array dropped before the capture ends is a temporary: its free is queued on the capture's own stream as
//    the capture ends, after every fork has joined back, so the free node follows all its users without the
//    capture tracking them one by one (case P). Its captured uses do not hold it: the graph owns its memory.
//  * An array alive when the capture ends (a result) has no free node: its memory exists after each replay
//    until the next one frees and makes it again at the same address (executables of such graphs free on launch:
//    cases B and K). The graph holds it, and whichever of the graph and the array's last user goes last frees it,
//    after the graph's last replay. Before the first replay it has no memory at all (a copy reading it is refused
//    or, into pageable memory, read on the host and crashes; a kernel faults: case S), so an operation on it
//    before its graph's first replay is refused by name, and one never made is never freed. cuweave.woven and
//    graph functions replay at once.
//  * CUDA refuses to copy such a graph into another (a child node, a clone), to launch it inside a capture, and a
//    second executable of it beside the first (cases C, D, M, N): Graph refuses the first two by name and
//    destroys the old executable before instantiating anew.
//
// Note [Footprints of captures]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A captured graph's replays touch what its captured work touched (Note [Graph footprints] in graph.hpp). The
// capture keeps that list itself, sanitizer or not: each of cuweave's operations queued on a stream taking part
// adds its accesses (queue(), collectives), and a graph replayed inside adds its footprint. That list is whole only
// if cuweave queued every node. Other libraries may capture into the same graph (PyTorch's operators on the
// capturing stream, a raw kernel), so around each of cuweave's calls on such a stream (on_device_of and queue(),
// through submission_detail::CapturedCall), the capture counts the nodes of the graph the stream captures into:
// nodes that appeared between two of cuweave's calls, or after the last one (counted as the capture ends), are
// work cuweave did not see. Each graph is counted on its own, so a conditional node's body (a graph of its own) is
// counted by the calls on its body stream. Nodes that appear after the sanitizer was told of another library's
// operation on a stream of the capture (PyTorch's and CuPy's operators, through their hooks), and before
// cuweave's next call, are that operation's: the footprint is then what the sanitizer saw. Any other unseen node
// makes it unknown, as does a host function or an embedded graph of unknown footprint. Blind spots: another
// thread queuing into the same capture during one of cuweave's calls (counts are not judged while a call is in
// flight), and raw work queued right after another library's operation that the sanitizer saw. Outside every
// capture this costs one atomic load per call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/communicator.hpp"
#include "cuweave/hold.hpp"
#include "cuweave/race_detector.hpp"

namespace cuweave {

class Stream;
class Graph;
class CallbackLedger;

class Capture : public std::enable_shared_from_this<Capture> {
 public:
  // Starts capturing the work queued on `stream`.
  static std::shared_ptr<Capture> begin(std::shared_ptr<Stream> stream, CaptureMode mode, bool graph_memory = false);
  // True while any cuweave capture is active in the process (one atomic load).
  static bool any_active() noexcept { return active_count_.load(std::memory_order_acquire) > 0; }
  // The cuweave capture `stream` takes part in (as origin or by joining), or null.
  static std::shared_ptr<Capture> of(const Stream& stream);
  // For AdoptedStream::adopt, which must learn a stream's device, priority and flags: CUDA refuses to describe a stream
  // while it captures (cudaStreamGetDevice: cudaErrorStreamCaptureUnsupported), and the refusal invalidates the
  // capture (both seen on an H200). Null when `handle` is not capturing; the Stream that began a cuweave capture
  // on it, which describes it; else (it joined a capture, or another library's) throws that refusal without asking
  // CUDA, so that the capture goes on.
  static std::shared_ptr<Stream> describing_capturing(StreamHandle handle);
  // Runs `action` now if no capture is active, else once none is (for work that must not be queued while
  // any capture might see it, such as a free on the legacy default stream beside a blocking capture).
  static void when_none_active(std::function<void()> action);

  // Note [Deciding beside a beginning capture]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Code that decides from any_active() how to queue work (a free: now, deferred, or held by the capture)
  // may run on any thread, for instance as the last reference to an array goes on another thread. A
  // capture begun between its decision and its call would meet work queued as if none were active: a free
  // captured into the graph, or one on the legacy stream that invalidates a blocking capture. While a
  // BeginFence lives, no capture begins: begin() counts itself active first, then waits for the fences up
  // (both counts sequentially consistent, so either the fence sees the capture or begin sees the fence).
  class BeginFence {
   public:
    BeginFence() noexcept { fences_.fetch_add(1, std::memory_order_seq_cst); }
    BeginFence(const BeginFence&) = delete;
    BeginFence& operator=(const BeginFence&) = delete;
    ~BeginFence() { fences_.fetch_sub(1, std::memory_order_release); }
    bool any_active() const noexcept { return active_count_.load(std::memory_order_seq_cst) > 0; }
  };
  // Throws a capture error (CUDA's cudaErrorStreamCaptureUnsupported for `call`) when `stream` is being
  // captured: waiting there would wait for work that runs only at replay. `what` names the operation.
  static void refuse_wait(const Stream& stream, const char* call, const std::string& what);

  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  ~Capture();

  const std::shared_ptr<Stream>& stream() const noexcept { return stream_; }
  CaptureMode mode() const noexcept { return mode_; }
  // Whether arrays allocated inside are graph memory (Note [Graph memory]).
  bool graph_memory() const noexcept { return graph_memory_made_ != nullptr; }
  // Set by the first replay of this capture's graph, when its graph memory first exists (null without graph
  // memory): shared by the graph and the arrays allocated in it.
  const std::shared_ptr<std::atomic<bool>>& graph_memory_made() const noexcept { return graph_memory_made_; }
  // Graph memory allocated for `allocation` (a DeviceAllocation, as a Hold that does not keep it alive).
  void allocated_graph_memory(std::weak_ptr<const void> allocation);
  // Graph memory at `pointer` dropped before the capture ended: freed on the capture's stream as it ends. False
  // once the capture has ended (the caller then frees it outside the graph).
  bool free_at_end(void* pointer);
  std::uint64_t id() const noexcept { return id_; }
  bool ended() const;

  // Keeps `holds` alive as long as the graph this capture makes (or until abandoned).
  void keep(Holds holds);
  // Runs `action` once the capture has ended, however it ends.
  void defer(std::function<void()> action);
  // The ledger of host callbacks captured here (see HostCallbacks).
  const std::shared_ptr<CallbackLedger>& callbacks();
  // A collective captured here: the graph remembers it (Note [Collectives in graphs]).
  void keep_collective(CapturedCollective collective);
  // A graph launched into this capture becomes part of it: its resources, callbacks, collectives and footprint
  // come along.
  void embed(const Graph& graph);
  // One of cuweave's operations captured here touches `accesses` (Note [Footprints of captures]).
  void touched(sanitizer::AccessSpan accesses);
  // Before and after each of cuweave's calls on `stream`, a stream taking part in this capture: counts the nodes
  // of the graph it captures into (Note [Footprints of captures]). Never throw: a count that fails counts as
  // unseen work.
  void calling(const Stream& stream) noexcept;
  void called(const Stream& stream) noexcept;
  // The sanitizer saw another library's operation on a stream of this capture: the nodes that appear before
  // cuweave's next call are that operation's (Note [Footprints of captures]).
  void foreign_operation_seen() noexcept;

  // Body captures (Note [Conditional nodes] in conditional.hpp): `body`, capturing into a body of one of
  // this capture's conditional nodes, counts as part of this capture until left: Capture::of(body) is
  // this one, and this capture cannot end meanwhile.
  void join_body(const Stream& body);
  void leave_body(const Stream& body) noexcept;
  // True while `stream` captures into one of this capture's conditional bodies.
  bool captures_body(const Stream& stream) const;
  // Throws CUDA's cudaErrorStreamCaptureUnsupported for `call` when `stream` captures into a conditional
  // body, where CUDA forbids `what` (host functions, event nodes).
  void refuse_in_body(const Stream& stream, const char* call, const std::string& what) const;

  // Ends the capture and returns its graph; throws the backend's error (an unjoined fork, an
  // invalidated capture) after the capture has ended.
  std::shared_ptr<Graph> end();
  // Ends the capture and drops what it captured (the body raised). Never throws.
  void abandon() noexcept;

 private:
  Capture(std::shared_ptr<Stream> stream, CaptureMode mode, std::uint64_t id, bool graph_memory);
  void finish(std::vector<std::function<void()>>& deferred) noexcept;  // unregisters; collects deferred actions
  // Before the backend's capture ends: queues the temporaries' frees and has the graph hold its results' memory
  // (Note [Graph memory]). Returns whether the capture allocated graph memory.
  bool end_graph_memory();

  static void no_longer_beginning() noexcept;  // undoes begin()'s count when the backend refused to begin
  // The node count last seen after one of cuweave's calls, of the graph `graph` names (0 at first).
  std::size_t& seen_nodes_locked(const void* graph);
  // What the graph's replays touch (Note [Footprints of captures]); nothing when unknown. `sanitized` is what the
  // sanitizer saw, if it watched; `host_functions` whether any were captured.
  std::optional<std::vector<sanitizer::Access>> footprint(std::optional<std::vector<sanitizer::Access>> sanitized,
                                                          bool host_functions);

  static std::atomic<int> active_count_;
  static std::atomic<int> fences_;  // BeginFences alive

  std::shared_ptr<Stream> stream_;
  CaptureMode mode_;
  std::uint64_t id_;
  std::shared_ptr<std::atomic<bool>> graph_memory_made_;
  mutable std::mutex mutex_;
  std::vector<std::weak_ptr<const void>> graph_allocations_;  // LOCK: mutex_; Note [Graph memory]
  std::vector<void*> temporaries_;                             // LOCK: mutex_; freed as the capture ends
  bool ended_ = false;                                   // LOCK: mutex_
  Holds holds_;                                          // LOCK: mutex_
  std::vector<std::function<void()>> deferred_;          // LOCK: mutex_
  std::vector<std::shared_ptr<CallbackLedger>> ledgers_; // LOCK: mutex_ (front: this capture's own)
  std::vector<CapturedCollective> collectives_;          // LOCK: mutex_
  std::vector<std::pair<const Stream*, std::uint64_t>> bodies_;  // LOCK: mutex_; open body captures and their ids
  // Note [Footprints of captures]
  std::vector<sanitizer::Access> touched_;                         // LOCK: mutex_
  std::vector<std::pair<const void*, std::size_t>> seen_nodes_;    // LOCK: mutex_; by graph
  int calls_in_flight_ = 0;                                        // LOCK: mutex_
  bool unseen_work_ = false;                                       // LOCK: mutex_
  bool foreign_nodes_expected_ = false;                            // LOCK: mutex_; since the last call
  bool foreign_work_ = false;                                      // LOCK: mutex_; nodes of foreign operations
  bool embedded_unknown_ = false;                                  // LOCK: mutex_
};

const char* to_string(CaptureMode mode) noexcept;

}  // namespace cuweave
