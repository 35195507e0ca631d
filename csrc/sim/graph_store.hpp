// The graphs and executable graphs the simulator has handed out: handle checks, and every change to them,
// under one lock. See Note [Simulated capture and graphs] in capture_book.hpp.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuweave/backend.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_graph.hpp"

namespace cuweave::sim {

struct GraphExec {
  const Graph* instantiated_from = nullptr;                  // whose nodes name this executable's (CUDA's rule)
  std::shared_ptr<const Graph> graph;                        // LOCK: GraphStore::mutex_ (replaced whole by updates)
  std::shared_ptr<Serial> launches = std::make_shared<Serial>();  // one launch at a time, as CUDA runs them
  bool free_on_launch = false;  // Note [Simulated graph memory]
};

// What a launch needs, kept alive by the launch itself.
struct Launchable {
  std::shared_ptr<const Graph> graph;
  std::shared_ptr<Serial> launches;
  bool free_on_launch;
};

class GraphStore {
 public:
  // Graphs whose conditions `conditions` makes.
  explicit GraphStore(const ConditionBook& conditions) : conditions_(conditions) {}
  GraphStore(const GraphStore&) = delete;
  GraphStore& operator=(const GraphStore&) = delete;

  GraphHandle create();
  GraphHandle adopt(std::unique_ptr<Graph> graph);  // a captured graph
  void destroy_graph(GraphHandle graph) noexcept;
  // Adds a node after `dependencies`, which must be distinct nodes of `graph` (else cudaErrorInvalidValue).
  GraphNodeHandle add(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies, NodeParams params,
                      const char* call);
  // A conditional node with `bodies` empty bodies, which are graphs node-adding calls then take.
  ConditionalNode add_conditional(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                  ConditionHandle condition, ConditionalKind kind, unsigned bodies);
  // Adds a copy of `child`.
  GraphNodeHandle add_child(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies, GraphHandle child,
                            const char* call);
  // A deep copy of `graph`, to embed as a child (add_child, capture_graph).
  std::shared_ptr<Graph> copy_of(GraphHandle graph, const char* call);
  std::vector<GraphNodeInfo> nodes(GraphHandle graph);
  void set_copy(GraphNodeHandle node, const CopyNode& copy);
  Repointed replace_pointers(GraphHandle graph, const std::vector<PointerRemap>& remaps);

  GraphExecHandle instantiate(GraphHandle graph, bool free_on_launch);
  void destroy_exec(GraphExecHandle exec) noexcept;
  Launchable launchable(GraphExecHandle exec, const char* call);
  bool update(GraphExecHandle exec, GraphHandle graph);
  // GraphBackend::update_graph_exec_nodes. A node of another graph than the one `exec` was instantiated from
  // fails with cudaErrorInvalidValue, as CUDA's cudaGraphExec*NodeSetParams do.
  bool update_nodes(GraphExecHandle exec, GraphHandle graph, const std::vector<GraphNodeHandle>& nodes);

 private:
  // The caller holds mutex_.
  Graph& graph_of(GraphHandle handle, const char* call);
  GraphExec& exec_of(GraphExecHandle handle, const char* call);
  // The nodes of `graph` and of its conditional nodes' bodies (recursively), and those bodies.
  void register_nodes(Graph& graph);
  void unregister_nodes(const Graph& graph);

  const ConditionBook& conditions_;
  std::mutex mutex_;
  std::unordered_map<const Graph*, std::unique_ptr<Graph>> graphs_;        // LOCK: mutex_
  std::unordered_map<const Node*, const Graph*> nodes_;                   // LOCK: mutex_ (nodes of graphs_, bodies too)
  std::unordered_map<const Graph*, Graph*> bodies_;  // LOCK: mutex_ (of graphs_' conditional nodes, owned by them)
  std::unordered_map<const GraphExec*, std::unique_ptr<GraphExec>> execs_;  // LOCK: mutex_
};

}  // namespace cuweave::sim
