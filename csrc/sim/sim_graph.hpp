// The simulator's graphs: nodes that keep their parameters as data (one descriptor per kind), so that
// graphs can be listed, copied, repointed, updated and run. See Note [Simulated capture and graphs] in
// capture_book.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "cuweave/trace.hpp"

#include "cuweave/arithmetic.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/collective.hpp"
#include "cuweave/strided_copy.hpp"
#include "sim/sim_kernels.hpp"

namespace cuweave::sim {

struct SimEvent;
struct OperationTrace;
class Graph;

struct CopyNode {
  void* destination;
  const void* source;
  std::size_t bytes;
  trace::Direction direction;  // from the memory's kinds when the node was made (an update keeps them, as CUDA's)
};
// A copy done by a kernel (Note [Copies by kernel]): the bytes of a CopyNode, a kernel node in the graph.
struct CopyKernel {
  void* destination;
  const void* source;
  std::size_t bytes;
  trace::Direction direction;
};
struct MemsetNode {
  void* destination;
  int value;
  std::size_t bytes;
};
struct FillKernel {
  void* destination;
  std::size_t count;
  std::vector<unsigned char> pattern;
};
struct StridedCopyKernel {
  StridedCopy copy;
};
struct SpinKernel {
  std::uint64_t nanoseconds;
  std::uint64_t* start_time;
};
struct ArithmeticKernel {
  Arithmetic operation;
};
struct SumPartialsKernel {
  const void* x;
  std::size_t count;
  NumericType type;
};
// Reads the partial of the node it depends on: the SumPartialsKernel a captured sum puts right before it.
struct SumFinalKernel {
  void* out;
  NumericType type;
};
struct HostNode {
  HostFunction function;
  void* user_data;
};
// Event nodes take effect on the whole launch (Note [Simulated capture and graphs]), not when reached.
struct EventRecordNode {
  SimEvent* event;
};
struct EventWaitNode {
  SimEvent* event;
};
struct EmptyNode {};
// Graph memory (Note [Simulated graph memory] in memory_registry.hpp): an allocation node makes its bytes, at the
// address fixed when it was captured, exist from where it runs; a free node ends them.
struct MemAllocNode {
  void* pointer;
  std::size_t bytes;
  int device;
  // Shared by every copy of the node (the captured graph, its executables): the last one gone gives the address
  // back (MemoryRegistry::forget_graph).
  std::shared_ptr<const void> reservation;
};
struct MemFreeNode {
  void* pointer;
};
struct ChildGraphNode {
  std::shared_ptr<Graph> graph;  // this node's own copy, never shared with another graph
};
// Runs its bodies under its condition (ConditionalKind), as CUDA's conditional nodes do.
struct ConditionalGraphNode {
  ConditionHandle condition;
  unsigned default_value;  // the condition's value at the start of every launch, until a node sets it
  ConditionalKind kind;
  std::vector<std::shared_ptr<Graph>> bodies;  // this node's own, never shared with another graph
};
struct SetConditionKernel {
  ConditionHandle condition;
  ConditionRule rule;
};
// One rank's call of a collective: what it does with its buffers, and the rank's communicator.
struct CollectiveCall {
  Collective collective;
  CommunicatorHandle communicator;
};
// The collectives captured together on one stream (one call, or a group's calls on that stream). At every
// launch they take their places among their ranks' collectives and meet the other ranks' (Note [Simulated
// collectives] in sim_collectives.hpp): a launch is cut at these nodes (plan_launch).
struct CollectiveNode {
  std::vector<CollectiveCall> calls;
};

using NodeParams =
    std::variant<CopyNode, CopyKernel, MemsetNode, FillKernel, StridedCopyKernel, SpinKernel, ArithmeticKernel,
                 SumPartialsKernel, SumFinalKernel, HostNode, EventRecordNode, EventWaitNode, EmptyNode, ChildGraphNode,
                 ConditionalGraphNode, SetConditionKernel, CollectiveNode, MemAllocNode, MemFreeNode>;

GraphNodeKind kind_of(const NodeParams& params);

struct Node {
  const Graph* owner;
  std::size_t index;  // creation order within its graph
  NodeParams params;
  std::vector<Node*> dependencies;
};

// Owns its nodes. Not locked: GraphStore and CaptureBook each guard the graphs they hold.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;  // nodes point at each other: copies are made with clone()
  Graph& operator=(const Graph&) = delete;

  // Adds a node after `dependencies`, which the caller has checked are nodes of this graph.
  Node* add(NodeParams params, std::vector<Node*> dependencies);
  std::size_t size() const noexcept { return nodes_.size(); }
  const std::vector<std::unique_ptr<Node>>& nodes() const noexcept { return nodes_; }
  // Every node, dependencies before dependents: among ready nodes the earliest created, or, given
  // `random`, one drawn from it. Nodes for which `in_creation_order` holds, if given, come in the order
  // they were created among themselves.
  std::vector<Node*> topological_order(std::mt19937_64* random = nullptr,
                                       const std::function<bool(const Node&)>& in_creation_order = {}) const;
  // A deep copy (child graphs included): what instantiation, updates and child nodes take.
  std::unique_ptr<Graph> clone() const;

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
};

// What graph_nodes() reports (the CUDA backend uses the same words): kernel name, bytes, direction.
std::string label(const Node& node);
// Repoints every pointer parameter inside a remap's old range, child graphs included; returns how many.
std::size_t replace_pointers(Graph& graph, const std::vector<PointerRemap>& remaps);
// The same for one node (its child graph or conditional bodies included).
std::size_t replace_pointers(Node& node, const std::vector<PointerRemap>& remaps);
// Same node count, same kinds at the same topological positions, same dependencies (child graphs too).
bool same_topology(const Graph& a, const Graph& b);
// Whether `graph` (child graphs and conditional bodies included) holds allocation or free nodes: CUDA then
// refuses to clone it, to embed a copy of it, to launch it inside a capture, and a second executable of it.
bool holds_memory_nodes(const Graph& graph);
// The addresses `graph`'s allocation nodes allocate and that none of its free nodes frees: memory a launch
// leaves allocated.
std::vector<void*> unfreed_allocations(const Graph& graph);
// The events that `graph`'s event nodes (child graphs included) wait for and record.
void collect_events(const Graph& graph, std::vector<SimEvent*>& waits, std::vector<SimEvent*>& records);

// The conditions of one simulator's graphs (cudaGraphConditionalHandleCreate), with the values they take at the
// start of every launch (CUDA's cudaGraphCondAssignDefault).
class ConditionBook {
 public:
  ConditionBook() = default;
  ConditionBook(const ConditionBook&) = delete;
  ConditionBook& operator=(const ConditionBook&) = delete;

  ConditionHandle make(unsigned default_value);
  unsigned default_of(ConditionHandle condition) const;  // 0 for a handle this book did not make

 private:
  mutable std::mutex mutex_;
  ConditionHandle last_ = 0;                                // LOCK: mutex_
  std::unordered_map<ConditionHandle, unsigned> defaults_;  // LOCK: mutex_
};

// The parameters of a new conditional node on `condition` (made by `conditions`) with `bodies` empty bodies,
// whose handles `made` receives (its node is left for the caller to add); fails with cudaErrorInvalidValue for
// `call` on a body count CUDA refuses.
ConditionalGraphNode new_conditional(const ConditionBook& conditions, ConditionHandle condition, ConditionalKind kind,
                                     unsigned bodies, ConditionalNode& made, const char* call);
// What a node kind CUDA refuses inside conditional bodies (host functions, event nodes) is called, if
// `graph` (child graphs and nested bodies included) holds one; else null.
const char* forbidden_in_body(const Graph& graph);
const char* forbidden_in_body(const NodeParams& params);

// The state of one launch while it runs.
class DeviceAccess;
class MemoryRegistry;

struct GraphRun {
  MemoryRegistry* memory = nullptr;      // where allocation and free nodes make and end graph memory
  DeviceAccess* access = nullptr;        // where a node touching freed memory loses the device's context
  int device = 0;                        // the device of the launch's stream
  bool faulted = false;                  // a node faulted: no further node of the launch runs
  std::optional<std::mt19937_64> order;  // exploring: draw a random topological order from it
  bool take_time = true;                 // spin kernels sleep (not when exploring)
  std::unordered_map<const Node*, SumPartial> partial_sums;
  const OperationTrace* traced = nullptr;  // the replay's activity when traced: its work nodes are delivered too
  std::unordered_map<ConditionHandle, unsigned> conditions;  // set during this launch; absent: the default
};
// Runs every node of `graph` in a topological order, on the calling thread (never a collective node: a
// graph holding them is launched by plan_launch's pieces).
void run_graph(const Graph& graph, GraphRun& run);
// Runs one node (not a collective node) as run_graph does; none once a node of the launch faulted (Note [Work on
// freed memory]).
void run_node(const Node& node, GraphRun& run);

// Whether `graph` (child graphs included) holds collective nodes.
bool holds_collectives(const Graph& graph);
// A launch of a graph holding collectives, cut where it meets them: runs of other nodes, and the collective
// nodes between them, in one topological order (drawn from `random` when given) that is the same on every
// rank: the collective nodes (and child graphs holding some, flattened) keep the order of their capture.
struct LaunchPiece {
  std::vector<const Node*> nodes;              // run one after another with run_node
  const CollectiveNode* collective = nullptr;  // or, when set, this collective node alone
};
std::vector<LaunchPiece> plan_launch(const Graph& graph, std::mt19937_64* random);

}  // namespace cuweave::sim
