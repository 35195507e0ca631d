// The backend's explicit graphs: graphs built node by node (conditional nodes included), inspected and
// edited, then instantiated, updated and replayed (Note [Backend facets] in backend.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cuweave/backend_handles.hpp"
#include "cuweave/condition.hpp"

namespace cuweave {

enum class GraphNodeKind {
  Kernel, Copy, Memset, Host, EventRecord, EventWait, Empty, ChildGraph, Allocation, Free, Conditional, Other
};

// A conditional node added to a graph or a capture, and its bodies (graphs the node owns: if, optional else;
// one while body; the cases of a switch).
struct ConditionalNode {
  GraphNodeHandle node = nullptr;
  std::vector<GraphHandle> bodies;
};

struct GraphNodeInfo {
  GraphNodeHandle node = nullptr;
  GraphNodeKind kind = GraphNodeKind::Other;
  std::string label;                          // what a reader of a drawing needs: kernel name, bytes, direction
  std::vector<GraphNodeHandle> dependencies;  // nodes this one runs after
};

// Replaces pointers into [old_base, old_base + bytes) by the same offset from new_base.
struct PointerRemap {
  const void* old_base = nullptr;
  const void* new_base = nullptr;
  std::size_t bytes = 0;
};

// What replace_pointers changed: how many pointers, and the nodes of the graph given whose parameters changed (a
// child graph's or a conditional's node for a change inside it), each once.
struct Repointed {
  std::size_t pointers = 0;
  std::vector<GraphNodeHandle> nodes;
};

class GraphBackend {
 public:
  virtual ~GraphBackend() = default;

  // Graphs. Nodes are added after `dependencies` (nodes of the same graph).
  virtual GraphHandle create_graph() = 0;
  virtual void destroy_graph(GraphHandle graph) noexcept = 0;
  virtual GraphNodeHandle add_kernel_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                          KernelHandle kernel, Dim3 grid, Dim3 block, std::size_t shared_bytes,
                                          void** arguments) = 0;
  virtual GraphNodeHandle add_copy_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                        void* destination, const void* source, std::size_t bytes) = 0;
  virtual GraphNodeHandle add_memset_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                          void* destination, int value, std::size_t bytes) = 0;
  virtual GraphNodeHandle add_host_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                        HostFunction function, void* user_data) = 0;
  virtual GraphNodeHandle add_event_record_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                                EventHandle event) = 0;
  virtual GraphNodeHandle add_event_wait_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                              EventHandle event) = 0;
  virtual GraphNodeHandle add_empty_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies) = 0;
  // Embeds a copy of `child` (later changes to `child` do not reach this graph).
  virtual GraphNodeHandle add_child_graph_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                               GraphHandle child) = 0;

  // Conditional nodes of graphs built node by node (Note [Conditional nodes] in conditional.hpp): a condition
  // of `graph` (the graph that will hold its node), reset to `default_value` at the start of every replay; a
  // conditional node with `bodies` empty bodies; a node of the built-in kernel setting a condition.
  virtual ConditionHandle create_graph_condition(GraphHandle graph, unsigned default_value) = 0;
  virtual ConditionalNode add_conditional_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                               ConditionHandle condition, ConditionalKind kind, unsigned bodies) = 0;
  virtual GraphNodeHandle add_set_condition_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                                 ConditionHandle condition, const ConditionRule& rule) = 0;

  // Every node of `graph`, dependencies before dependents.
  virtual std::vector<GraphNodeInfo> graph_nodes(GraphHandle graph) = 0;
  // New arguments for a kernel node (same kernel, `arguments` as for KernelBackend::launch_kernel).
  virtual void set_kernel_node_arguments(GraphNodeHandle node, void** arguments) = 0;
  virtual void set_copy_node(GraphNodeHandle node, void* destination, const void* source, std::size_t bytes) = 0;
  // Repoints kernel arguments, copies and memsets of `graph` (child graphs and conditional bodies included)
  // from old to new buffers.
  virtual Repointed replace_pointers(GraphHandle graph, const std::vector<PointerRemap>& remaps) = 0;

  // Executable graphs.
  // `node_priorities`: each kernel node runs at the priority it was captured or added with, not at the priority
  // of the stream a replay goes to (CUDA: cudaGraphInstantiateFlagUseNodePriority). `free_on_launch`: each launch
  // first frees what the graph's allocation nodes made at the last launch and no free node freed (CUDA:
  // cudaGraphInstantiateFlagAutoFreeOnLaunch); without it such a launch is refused while that memory lives.
  virtual GraphExecHandle instantiate_graph(GraphHandle graph, bool node_priorities, bool free_on_launch) = 0;
  virtual void destroy_graph_exec(GraphExecHandle exec) noexcept = 0;
  virtual void upload_graph(GraphExecHandle exec, StreamHandle stream) = 0;
  virtual void launch_graph(GraphExecHandle exec, StreamHandle stream) = 0;
  // Gives `exec` the parameters of `graph`, which must have its topology; false (and `exec` unchanged)
  // when the topology or node kinds differ, so the caller instantiates anew.
  virtual bool update_graph_exec(GraphExecHandle exec, GraphHandle graph) = 0;
  // Gives `exec`'s copies of `nodes` the parameters those nodes have in `graph`, the graph `exec` was
  // instantiated from (CUDA: cudaGraphExec*NodeSetParams), leaving its other nodes as they are; false, with
  // `exec` unchanged or partly changed, when a node is of a kind only update_graph_exec reaches (a conditional
  // node) or CUDA refuses the change: the caller then updates the whole executable.
  virtual bool update_graph_exec_nodes(GraphExecHandle exec, GraphHandle graph,
                                       const std::vector<GraphNodeHandle>& nodes) = 0;
};

}  // namespace cuweave
