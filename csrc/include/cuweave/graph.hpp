// Graph: a CUDA graph (captured or built node by node) and its executable form, replayable on any stream.
//
// A Graph owns a template (the backend graph, what its nodes use, the ledgers of its host callbacks) and,
// once replayed, an executable. Changing the template (new arguments, repointed buffers, new nodes) bumps
// its version; the next replay brings the executable up to date: an in-place exec update where the
// topology is unchanged, a new instantiation where it is not (Note [Graph lifetimes and updates]).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/communicator.hpp"
#include "cuweave/hold.hpp"
#include "cuweave/race_detector.hpp"

namespace cuweave {

class CallbackLedger;
class DeviceArray;
class Kernel;
class Operation;
class Stream;

// Note [Graph lifetimes and updates]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Replays run after the call returns, so what an executable uses (its Holds, the backend exec itself)
// must outlive every queued replay. Like memory (Note [Memory follows its stream]), an executable
// follows the stream it was last replayed on: replaying on another stream holds it until the work
// queued on the previous one has completed, and retiring it (destruction, re-instantiation) holds it
// until the work on its last stream has completed. What an update replaces is retired the same way.
// The template itself is never used by replays, so it is freed at once.
// Note [Graph footprints]
// ~~~~~~~~~~~~~~~~~~~~~~~
// What a replay reads and writes, as the weave places it and the sanitizer checks it: for each node added by
// hand, the bytes its operands span (a kernel's arrays by its signature's const-ness, a copy's two sides, a
// memset's array, a condition's element; a child graph's footprint); for a captured graph, what its captured
// operations touched (Note [Footprints of captures] in capture.hpp). Repointing (set_copy, set_arguments, rebind)
// moves them. Unknown once any part is: a host function (it may touch anything), a child graph of unknown
// footprint, a capture holding work that neither cuweave nor the sanitizer saw. An unknown footprint counts as
// touching everything for the weave, and as nothing for the sanitizer (no race is reported that cannot be shown).
// Conditional bodies share their graph's template, so their nodes are part of its footprint.
struct GraphFootprint {
  bool known = true;
  std::vector<sanitizer::Access> captured;
  std::vector<std::pair<GraphNodeHandle, std::vector<sanitizer::Access>>> nodes;  // in the order added
  std::uint64_t changes = 0;  // bumped by every change (a footprint change alone needs no new executable)
  // Event nodes: a replay waits for these before its work, and records these after it, as the sanitizer sees it.
  std::vector<EventHandle> waited_events;
  std::vector<EventHandle> recorded_events;

  void set_node(GraphNodeHandle node, sanitizer::AccessSpan accesses);
  // Accesses inside an old buffer move to its new one.
  void remap(const std::vector<PointerRemap>& remaps);
  std::vector<sanitizer::Access> all() const;
};

struct GraphTemplate {
  GraphTemplate(GraphHandle handle, int device) : handle(handle), device(device) {}
  GraphTemplate(const GraphTemplate&) = delete;
  GraphTemplate& operator=(const GraphTemplate&) = delete;
  ~GraphTemplate();

  GraphHandle handle;
  int device;
  Holds holds;
  std::vector<std::shared_ptr<CallbackLedger>> ledgers;
  std::vector<CapturedCollective> collectives;  // Note [Collectives in graphs]
  // Set at the first replay; null without memory nodes (Note [Graph memory] in capture.hpp).
  std::shared_ptr<std::atomic<bool>> memory_made;
  GraphFootprint footprint;
  std::uint64_t version = 0;  // one more at every change
  // Note [Repointing node by node]: the nodes each of the latest repointings changed, by the version it made
  // (oldest first, at most kRepointingsKept), and the version of the latest other change.
  static constexpr std::size_t kRepointingsKept = 64;
  std::vector<std::pair<std::uint64_t, std::vector<GraphNodeHandle>>> repointings;
  std::uint64_t other_change = 0;
};

struct GraphExecutable {
  explicit GraphExecutable(GraphExecHandle handle) : handle(handle) {}
  GraphExecutable(const GraphExecutable&) = delete;
  GraphExecutable& operator=(const GraphExecutable&) = delete;
  ~GraphExecutable();

  GraphExecHandle handle;
  std::weak_ptr<const GraphTemplate> instantiated_from;  // whose nodes name this executable's, for node updates
  Holds holds;
  std::vector<std::shared_ptr<CallbackLedger>> ledgers;
};

class Graph {
 public:
  enum class Refresh { None, Instantiated, Updated, Reinstantiated };

  // An empty graph for explicit construction on `device`.
  static std::shared_ptr<Graph> create(int device);
  // Takes ownership of a captured backend graph with what its nodes use.
  static std::shared_ptr<Graph> adopt(GraphHandle handle, int device, Holds holds,
                                      std::vector<std::shared_ptr<CallbackLedger>> ledgers);

  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  int device() const noexcept { return template_->device; }
  const std::shared_ptr<GraphTemplate>& graph_template() const noexcept { return template_; }
  bool instantiated() const noexcept { return static_cast<bool>(exec_); }
  Refresh last_refresh() const noexcept { return last_refresh_; }

  // Explicit construction: each node runs after `dependencies`; `holds` live as long as the graph.
  // A kernel node is described by the launch's Operation: its accesses are the node's footprint (Note [Graph
  // footprints]), and its arrays' memory and the kernel's module live as long as the graph.
  GraphNodeHandle add_kernel(const Kernel& kernel, const std::vector<GraphNodeHandle>& dependencies, Dim3 grid,
                             Dim3 block, std::size_t shared_bytes, void** arguments, Operation& operation);
  GraphNodeHandle add_copy(const std::vector<GraphNodeHandle>& dependencies, void* destination, const void* source,
                           std::size_t bytes, Holds holds);
  GraphNodeHandle add_memset(const std::vector<GraphNodeHandle>& dependencies, void* destination, int value,
                             std::size_t bytes, Holds holds);
  // `callback` runs on cuweave's callback thread at every replay (Note [Host callbacks off the backend thread]).
  // `name` labels the callback's runs in traces.
  GraphNodeHandle add_host(const std::vector<GraphNodeHandle>& dependencies, std::function<void()> callback,
                           std::string name = {});
  GraphNodeHandle add_event_record(const std::vector<GraphNodeHandle>& dependencies, EventHandle event, Hold event_owner);
  GraphNodeHandle add_event_wait(const std::vector<GraphNodeHandle>& dependencies, EventHandle event, Hold event_owner);
  GraphNodeHandle add_empty(const std::vector<GraphNodeHandle>& dependencies);
  GraphNodeHandle add_child(const std::vector<GraphNodeHandle>& dependencies, const Graph& child);
  // Conditional nodes built node by node (Note [Conditional nodes]): a condition of this graph, a node
  // whose bodies are returned as Graphs to add nodes to (they share this graph's template, so what their
  // nodes use lives as long as it, and they cannot be replayed alone), and a node setting a condition.
  ConditionHandle create_condition(unsigned default_value);
  std::pair<GraphNodeHandle, std::vector<std::shared_ptr<Graph>>> add_conditional(
      const std::vector<GraphNodeHandle>& dependencies, ConditionHandle condition, ConditionalKind kind,
      unsigned bodies);
  // `element` (read by the node) lives as long as the graph and is the node's footprint.
  GraphNodeHandle add_set_condition(const std::vector<GraphNodeHandle>& dependencies, ConditionHandle condition,
                                    const ConditionRule& rule, const std::shared_ptr<DeviceArray>& element);
  bool is_body() const noexcept { return body_ != nullptr; }

  std::vector<GraphNodeInfo> nodes();
  // New arguments for a kernel node, described as add_kernel's are.
  void set_kernel_arguments(GraphNodeHandle node, void** arguments, Operation& operation);
  void set_copy(GraphNodeHandle node, void* destination, const void* source, std::size_t bytes, Holds holds);
  // Repoints the graph from old to new buffers; drops `released` (the old buffers' holds) from the template.
  std::size_t replace_pointers(const std::vector<PointerRemap>& remaps, Holds holds, const Holds& released);
  // Makes this graph's template `other`'s (they share it) and brings the executable up to date.
  Refresh adopt_template_of(const Graph& other);

  // Each kernel node runs at the priority of the stream it was captured on (or added with), not at that of
  // the stream a replay goes to; takes effect from the next replay, which instantiates anew.
  void set_node_priorities(bool on);
  bool node_priorities() const noexcept { return node_priorities_; }
  // Instantiates, or brings the executable up to the template's version.
  Refresh refresh();
  void upload(const std::shared_ptr<Stream>& stream);
  // Replays on `stream` (the hot path: one backend launch when nothing changed).
  void launch(const std::shared_ptr<Stream>& stream);
  // What the captured work reads and writes (Note [Footprints of captures] in capture.hpp): the footprint of the
  // captured part (Note [Graph footprints]).
  void set_captured_accesses(std::vector<sanitizer::Access> accesses);
  // What a replay touches as a weave sees it (Note [Weaving]): the footprint, or everything when it is unknown
  // (a replay then follows all work before it, and all work after follows it).
  std::vector<sanitizer::Access> touches() const;
  // What the sanitizer checks a replay for: the footprint, or nothing when it is unknown.
  const std::vector<sanitizer::Access>& checked_accesses() const;

 private:
  explicit Graph(std::shared_ptr<GraphTemplate> graph_template);
  // The template changed: `holds` (what the change uses) live as long as it, and the executable catches up
  // at the next replay.
  void changed(Holds holds = {});
  GraphNodeHandle added(GraphNodeHandle node, Holds holds);  // changed(holds), returning the new node
  void follow(const std::shared_ptr<Stream>& stream);  // Note [Graph lifetimes and updates]
  GraphHandle target() const noexcept { return body_ ? body_ : template_->handle; }  // where nodes are added
  void refuse_in_body(const char* what) const;  // what CUDA forbids in a conditional node's body
  void refuse_body_replay() const;
  void refuse_failed_collectives() const;                     // Note [Collectives in graphs]
  void watch_collectives(const std::shared_ptr<Stream>& stream);  // after a replay is queued
  void retire(Holds holds);
  // Lets the executable go, before a new one is made (Note [Graph memory] in capture.hpp: for a graph holding
  // memory nodes, destroyed at once, after its replays).
  void drop_executable();
  // A new executable of the template as it is now, holding what its nodes use.
  std::shared_ptr<GraphExecutable> instantiate() const;
  [[noreturn]] static void refuse_copy_of_graph_memory(const char* call);
  // The nodes repointed since the executable was last current, when nothing else changed and it can take them
  // node by node (Note [Repointing node by node]); exec_ must be set.
  std::optional<std::vector<GraphNodeHandle>> repointed_since_current() const;

  std::shared_ptr<GraphTemplate> template_;
  std::shared_ptr<GraphExecutable> exec_;
  std::uint64_t exec_version_ = 0;
  std::shared_ptr<Stream> last_stream_;
  Refresh last_refresh_ = Refresh::None;
  bool node_priorities_ = false;
  GraphNodeHandle added(GraphNodeHandle node, Holds holds, sanitizer::AccessSpan accesses);
  // The sanitizer's view of a replay on `stream`: its event waits, its work, its event records.
  void sanitize_replay(Stream& stream, const char* name) const;
  // The footprint's accesses, gathered at the first use after a change (the template and version they describe).
  mutable std::vector<sanitizer::Access> footprint_accesses_;
  mutable const GraphTemplate* footprint_template_ = nullptr;
  mutable std::uint64_t footprint_changes_ = 0;
  GraphHandle body_ = nullptr;  // a conditional node's body in template_'s graph, or null
};

const char* to_string(Graph::Refresh refresh) noexcept;
const char* to_string(GraphNodeKind kind) noexcept;

}  // namespace cuweave
