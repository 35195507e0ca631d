#include "sim/graph_store.hpp"

#include <algorithm>

#include "sim/sim_error.hpp"

namespace cuweave::sim {

Graph& GraphStore::graph_of(GraphHandle handle, const char* call) {
  auto it = graphs_.find(static_cast<const Graph*>(handle));
  if (it != graphs_.end()) return *it->second;
  auto body = bodies_.find(static_cast<const Graph*>(handle));
  if (body == bodies_.end()) fail(call, kInvalidValue, "invalid graph handle");
  return *body->second;
}

void GraphStore::register_nodes(Graph& graph) {
  for (const auto& node : graph.nodes()) {
    nodes_[node.get()] = &graph;
    if (auto* conditional = std::get_if<ConditionalGraphNode>(&node->params)) {
      for (const auto& body : conditional->bodies) {
        bodies_[body.get()] = body.get();
        register_nodes(*body);
      }
    }
  }
}

void GraphStore::unregister_nodes(const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    nodes_.erase(node.get());
    if (const auto* conditional = std::get_if<ConditionalGraphNode>(&node->params)) {
      for (const auto& body : conditional->bodies) {
        bodies_.erase(body.get());
        unregister_nodes(*body);
      }
    }
  }
}

GraphExec& GraphStore::exec_of(GraphExecHandle handle, const char* call) {
  auto it = execs_.find(static_cast<const GraphExec*>(handle));
  if (it == execs_.end()) fail(call, kInvalidValue, "invalid executable graph handle");
  return *it->second;
}

GraphHandle GraphStore::create() { return adopt(std::make_unique<Graph>()); }

GraphHandle GraphStore::adopt(std::unique_ptr<Graph> graph) {
  std::lock_guard<std::mutex> lock(mutex_);
  Graph* adopted = graph.get();
  register_nodes(*adopted);
  graphs_[adopted] = std::move(graph);
  return adopted;
}

void GraphStore::destroy_graph(GraphHandle handle) noexcept {
  std::unique_ptr<Graph> graph;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = graphs_.find(static_cast<const Graph*>(handle));
    if (it == graphs_.end()) return;
    graph = std::move(it->second);
    graphs_.erase(it);
    unregister_nodes(*graph);
    for (auto& [key, exec] : execs_) {  // its address may name another graph later
      if (exec->instantiated_from == graph.get()) exec->instantiated_from = nullptr;
    }
  }
}

GraphNodeHandle GraphStore::add(GraphHandle handle, const std::vector<GraphNodeHandle>& dependencies, NodeParams params,
                                const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  Graph& graph = graph_of(handle, call);
  std::vector<Node*> after;
  for (GraphNodeHandle dependency : dependencies) {
    auto it = nodes_.find(static_cast<const Node*>(dependency));
    if (it == nodes_.end() || it->second != &graph) fail(call, kInvalidValue, "a dependency is not a node of this graph");
    if (std::find(after.begin(), after.end(), dependency) != after.end()) {
      fail(call, kInvalidValue, "a dependency is listed twice");
    }
    after.push_back(static_cast<Node*>(dependency));
  }
  Node* node = graph.add(std::move(params), std::move(after));
  nodes_[node] = &graph;
  if (auto* conditional = std::get_if<ConditionalGraphNode>(&node->params)) {
    for (const auto& body : conditional->bodies) bodies_[body.get()] = body.get();
  }
  return node;
}

ConditionalNode GraphStore::add_conditional(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                            ConditionHandle condition, ConditionalKind kind, unsigned bodies) {
  constexpr const char* kCall = "cudaGraphAddNode";
  ConditionalNode made;
  ConditionalGraphNode params = new_conditional(conditions_, condition, kind, bodies, made, kCall);
  made.node = add(graph, dependencies, std::move(params), kCall);
  return made;
}

GraphNodeHandle GraphStore::add_child(GraphHandle handle, const std::vector<GraphNodeHandle>& dependencies,
                                      GraphHandle child, const char* call) {
  if (child == handle) fail(call, kInvalidValue, "a graph cannot contain itself");
  return add(handle, dependencies, ChildGraphNode{copy_of(child, call)}, call);
}

std::shared_ptr<Graph> GraphStore::copy_of(GraphHandle handle, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Graph& graph = graph_of(handle, call);
  if (holds_memory_nodes(graph)) {  // Note [Simulated graph memory]
    fail(call, kNotSupported, "a graph holding memory allocation or free nodes cannot be copied into another");
  }
  return graph.clone();
}

std::vector<GraphNodeInfo> GraphStore::nodes(GraphHandle handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<GraphNodeInfo> infos;
  for (const Node* node : graph_of(handle, "cudaGraphGetNodes").topological_order()) {
    GraphNodeInfo info;
    info.node = const_cast<Node*>(node);
    info.kind = kind_of(node->params);
    info.label = label(*node);
    info.dependencies.assign(node->dependencies.begin(), node->dependencies.end());
    infos.push_back(std::move(info));
  }
  return infos;
}

void GraphStore::set_copy(GraphNodeHandle handle, const CopyNode& copy) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto* node = static_cast<Node*>(handle);
  if (!nodes_.count(node)) fail("cudaGraphMemcpyNodeSetParams1D", kInvalidValue, "invalid graph node handle");
  auto* params = std::get_if<CopyNode>(&node->params);
  if (!params) fail("cudaGraphMemcpyNodeSetParams1D", kInvalidValue, "this node is not a copy node");
  *params = copy;
}

Repointed GraphStore::replace_pointers(GraphHandle handle, const std::vector<PointerRemap>& remaps) {
  std::lock_guard<std::mutex> lock(mutex_);
  Repointed repointed;
  for (const auto& node : graph_of(handle, "cudaGraphNodeSetParams").nodes()) {
    if (const std::size_t changed = sim::replace_pointers(*node, remaps)) {
      repointed.pointers += changed;
      repointed.nodes.push_back(node.get());
    }
  }
  return repointed;
}

GraphExecHandle GraphStore::instantiate(GraphHandle handle, bool free_on_launch) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto exec = std::make_unique<GraphExec>();
  const Graph& graph = graph_of(handle, "cudaGraphInstantiate");
  if (holds_memory_nodes(graph)) {  // Note [Simulated graph memory]: one executable at a time
    for (const auto& [other, _] : execs_) {
      if (other->instantiated_from == &graph) {
        fail("cudaGraphInstantiate", kNotSupported,
             "a graph holding memory allocation or free nodes has an executable already; destroy it first");
      }
    }
  }
  exec->instantiated_from = &graph;
  exec->free_on_launch = free_on_launch;
  exec->graph = graph.clone();
  GraphExec* instantiated = exec.get();
  execs_[instantiated] = std::move(exec);
  return instantiated;
}

void GraphStore::destroy_exec(GraphExecHandle handle) noexcept {
  std::unique_ptr<GraphExec> exec;  // queued launches keep its graph and Serial alive
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = execs_.find(static_cast<const GraphExec*>(handle));
  if (it == execs_.end()) return;
  exec = std::move(it->second);
  execs_.erase(it);
}

Launchable GraphStore::launchable(GraphExecHandle handle, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  GraphExec& exec = exec_of(handle, call);
  return Launchable{exec.graph, exec.launches, exec.free_on_launch};
}

bool GraphStore::update(GraphExecHandle exec_handle, GraphHandle graph_handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  GraphExec& exec = exec_of(exec_handle, "cudaGraphExecUpdate");
  const Graph& graph = graph_of(graph_handle, "cudaGraphExecUpdate");
  if (!same_topology(*exec.graph, graph)) return false;
  exec.graph = graph.clone();  // launches already queued keep the graph they were given
  return true;
}

bool GraphStore::update_nodes(GraphExecHandle exec_handle, GraphHandle graph_handle,
                              const std::vector<GraphNodeHandle>& nodes) {
  constexpr const char* kCall = "cudaGraphExecKernelNodeSetParams";
  std::lock_guard<std::mutex> lock(mutex_);
  GraphExec& exec = exec_of(exec_handle, kCall);
  const Graph& graph = graph_of(graph_handle, kCall);
  for (GraphNodeHandle handle : nodes) {
    const auto* node = static_cast<const Node*>(handle);
    if (!nodes_.count(node) || node->owner != &graph || exec.instantiated_from != &graph) {
      fail(kCall, kInvalidValue, "the node is not of the graph the executable was instantiated from");
    }
    if (std::holds_alternative<ConditionalGraphNode>(node->params)) return false;  // only the whole update
  }
  // Launches already queued keep the graph they were given; the new one differs in these nodes only.
  std::unique_ptr<Graph> updated = exec.graph->clone();
  for (GraphNodeHandle handle : nodes) {
    const auto* node = static_cast<const Node*>(handle);
    Node& copy = *updated->nodes().at(node->index);
    if (kind_of(copy.params) != kind_of(node->params)) {
      fail(kCall, kInvalidValue, "the node's kind differs from the executable's node");
    }
    copy.params = node->params;
    if (auto* child = std::get_if<ChildGraphNode>(&copy.params)) child->graph = child->graph->clone();
  }
  exec.graph = std::move(updated);
  return true;
}

}  // namespace cuweave::sim
