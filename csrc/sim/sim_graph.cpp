#include "sim/sim_graph.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <mutex>

#include "sim/device_access.hpp"
#include "sim/freed_memory.hpp"
#include "sim/memory_registry.hpp"
#include "sim/sim_error.hpp"
#include "sim/sim_tracer.hpp"

namespace cuweave::sim {

namespace {

template <typename... Visitors>
struct Overloaded : Visitors... {
  using Visitors::operator()...;
};
template <typename... Visitors>
Overloaded(Visitors...) -> Overloaded<Visitors...>;

// Points `pointer` into the new range of the first remap whose old range holds it.
template <typename T>
bool remap(T*& pointer, const std::vector<PointerRemap>& remaps) {
  if (pointer == nullptr) return false;
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  for (const PointerRemap& remap : remaps) {
    const auto old_base = reinterpret_cast<std::uintptr_t>(remap.old_base);
    if (address >= old_base && address - old_base < remap.bytes) {
      pointer = reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(remap.new_base) + (address - old_base));
      return true;
    }
  }
  return false;
}

unsigned condition_value(GraphRun& run, const ConditionalGraphNode& conditional) {
  auto set = run.conditions.find(conditional.condition);
  return set != run.conditions.end() ? set->second : conditional.default_value;
}

}  // namespace

ConditionalGraphNode new_conditional(const ConditionBook& conditions, ConditionHandle condition, ConditionalKind kind,
                                     unsigned bodies, ConditionalNode& made, const char* call) {
  if (!valid_body_count(kind, bodies)) fail(call, kInvalidValue, kBodyCounts);
  ConditionalGraphNode params{condition, conditions.default_of(condition), kind, {}};
  for (unsigned i = 0; i < bodies; ++i) {
    params.bodies.push_back(std::make_shared<Graph>());
    made.bodies.push_back(params.bodies.back().get());
  }
  return params;
}

ConditionHandle ConditionBook::make(unsigned default_value) {
  std::lock_guard<std::mutex> lock(mutex_);
  const ConditionHandle made = ++last_;
  defaults_[made] = default_value;
  return made;
}

unsigned ConditionBook::default_of(ConditionHandle condition) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = defaults_.find(condition);
  return found == defaults_.end() ? 0 : found->second;
}

const char* forbidden_in_body(const NodeParams& params) {
  if (std::holds_alternative<HostNode>(params)) return "a host function";
  if (std::holds_alternative<CollectiveNode>(params)) return "a collective";
  if (std::holds_alternative<EventRecordNode>(params)) return "an event record node";
  if (std::holds_alternative<EventWaitNode>(params)) return "an event wait node";
  if (std::holds_alternative<MemAllocNode>(params) || std::holds_alternative<MemFreeNode>(params)) {
    return "a memory allocation or free";
  }
  if (const auto* child = std::get_if<ChildGraphNode>(&params)) return forbidden_in_body(*child->graph);
  if (const auto* conditional = std::get_if<ConditionalGraphNode>(&params)) {
    for (const auto& body : conditional->bodies) {
      if (const char* found = forbidden_in_body(*body)) return found;
    }
  }
  return nullptr;
}

const char* forbidden_in_body(const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    if (const char* found = forbidden_in_body(node->params)) return found;
  }
  return nullptr;
}

GraphNodeKind kind_of(const NodeParams& params) {
  return std::visit(Overloaded{
                        [](const CopyNode&) { return GraphNodeKind::Copy; },
                        [](const MemsetNode&) { return GraphNodeKind::Memset; },
                        [](const HostNode&) { return GraphNodeKind::Host; },
                        [](const EventRecordNode&) { return GraphNodeKind::EventRecord; },
                        [](const EventWaitNode&) { return GraphNodeKind::EventWait; },
                        [](const EmptyNode&) { return GraphNodeKind::Empty; },
                        [](const ChildGraphNode&) { return GraphNodeKind::ChildGraph; },
                        [](const ConditionalGraphNode&) { return GraphNodeKind::Conditional; },
                        [](const MemAllocNode&) { return GraphNodeKind::Allocation; },
                        [](const MemFreeNode&) { return GraphNodeKind::Free; },
                        [](const auto&) { return GraphNodeKind::Kernel; },  // the built-in kernels
                    },
                    params);
}

Node* Graph::add(NodeParams params, std::vector<Node*> dependencies) {
  nodes_.push_back(std::make_unique<Node>(Node{this, nodes_.size(), std::move(params), std::move(dependencies)}));
  return nodes_.back().get();
}

std::vector<Node*> Graph::topological_order(std::mt19937_64* random,
                                            const std::function<bool(const Node&)>& in_creation_order) const {
  std::vector<std::size_t> waiting(nodes_.size(), 0);
  std::vector<std::vector<std::size_t>> dependents(nodes_.size());
  for (const auto& node : nodes_) {
    waiting[node->index] = node->dependencies.size();
    for (const Node* dependency : node->dependencies) dependents[dependency->index].push_back(node->index);
  }
  // The nodes kept in creation order, and which of them may come next; the others wait, parked, once ready.
  std::vector<std::size_t> ordered;
  if (in_creation_order) {
    for (const auto& node : nodes_) {
      if (in_creation_order(*node)) ordered.push_back(node->index);
    }
  }
  std::size_t next_ordered = 0;
  std::vector<bool> parked(nodes_.size(), false);
  auto is_ordered = [&](std::size_t i) { return std::binary_search(ordered.begin(), ordered.end(), i); };
  std::vector<std::size_t> ready;  // a min-heap by creation order, or a bag to draw from
  auto earlier_first = std::greater<std::size_t>();
  auto make_ready = [&](std::size_t i) {
    if (is_ordered(i) && ordered[next_ordered] != i) {
      parked[i] = true;
      return;
    }
    ready.push_back(i);
    if (!random) std::push_heap(ready.begin(), ready.end(), earlier_first);
  };
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (waiting[i] == 0) make_ready(i);
  }
  std::vector<Node*> order;
  order.reserve(nodes_.size());
  while (!ready.empty()) {
    std::size_t next;
    if (random) {
      const std::size_t pick = std::uniform_int_distribution<std::size_t>(0, ready.size() - 1)(*random);
      next = ready[pick];
      ready[pick] = ready.back();
      ready.pop_back();
    } else {
      std::pop_heap(ready.begin(), ready.end(), earlier_first);
      next = ready.back();
      ready.pop_back();
    }
    order.push_back(nodes_[next].get());
    if (is_ordered(next) && ++next_ordered < ordered.size() && parked[ordered[next_ordered]]) {
      make_ready(ordered[next_ordered]);
    }
    for (std::size_t dependent : dependents[next]) {
      if (--waiting[dependent] == 0) make_ready(dependent);
    }
  }
  return order;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto copy = std::make_unique<Graph>();
  // Dependencies exist before their dependents, so creation order copies each node after its dependencies.
  for (const auto& node : nodes_) {
    std::vector<Node*> dependencies;
    dependencies.reserve(node->dependencies.size());
    for (const Node* dependency : node->dependencies) dependencies.push_back(copy->nodes_[dependency->index].get());
    NodeParams params = node->params;
    if (auto* child = std::get_if<ChildGraphNode>(&params)) child->graph = child->graph->clone();
    if (auto* conditional = std::get_if<ConditionalGraphNode>(&params)) {
      for (auto& body : conditional->bodies) body = body->clone();
    }
    copy->add(std::move(params), std::move(dependencies));
  }
  return copy;
}

namespace {
// "DtoH" and the like: which ends of a copy are device memory.
std::string copy_ends(trace::Direction direction) {
  switch (direction) {
    case trace::Direction::HostToDevice: return "HtoD";
    case trace::Direction::DeviceToHost: return "DtoH";
    case trace::Direction::DeviceToDevice:
    case trace::Direction::PeerToPeer: return "DtoD";
    default: return "HtoH";
  }
}
}  // namespace

std::string label(const Node& node) {
  return std::visit(
      Overloaded{
          [](const CopyNode& copy) {
            return "copy " + std::to_string(copy.bytes) + " bytes " + copy_ends(copy.direction);
          },
          [](const CopyKernel& copy) { return "copy_kernel " + copy_ends(copy.direction); },
          [](const MemsetNode& memset) { return "memset " + std::to_string(memset.bytes) + " bytes"; },
          [](const FillKernel&) { return std::string("fill"); },
          [](const StridedCopyKernel&) { return std::string("copy_strided"); },
          [](const SpinKernel&) { return std::string("spin"); },
          [](const ArithmeticKernel& kernel) { return std::string(arithmetic_name(kernel.operation.op)); },
          [](const SumPartialsKernel&) { return std::string("sum_partials"); },
          [](const SumFinalKernel&) { return std::string("sum_final"); },
          [](const HostNode&) { return std::string("host function"); },
          [](const EventRecordNode&) { return std::string("record event"); },
          [](const EventWaitNode&) { return std::string("wait event"); },
          [](const EmptyNode&) { return std::string("empty"); },
          [](const ChildGraphNode& child) { return "graph (" + std::to_string(child.graph->size()) + " nodes)"; },
          [](const ConditionalGraphNode& conditional) {
            std::string sizes;
            for (const auto& body : conditional.bodies) {
              sizes += (sizes.empty() ? "" : " | ") + std::to_string(body->size());
            }
            return std::string(to_string(conditional.kind)) + " (" + sizes + " nodes)";
          },
          [](const SetConditionKernel&) { return std::string("set_condition"); },
          [](const MemAllocNode& allocation) { return "alloc " + std::to_string(allocation.bytes) + " bytes"; },
          [](const MemFreeNode&) { return std::string("free"); },
          [](const CollectiveNode& collective) {
            std::string names;
            for (const CollectiveCall& call : collective.calls) {
              names += names.empty() ? "collectives." : " + collectives.";
              names += to_string(call.collective.kind);
            }
            return names;
          },
      },
      node.params);
}

std::size_t replace_pointers(Graph& graph, const std::vector<PointerRemap>& remaps) {
  std::size_t changed = 0;
  for (const auto& node : graph.nodes()) changed += replace_pointers(*node, remaps);
  return changed;
}

std::size_t replace_pointers(Node& node, const std::vector<PointerRemap>& remaps) {
  std::size_t changed = 0;
  std::visit(Overloaded{
                 [&](CopyNode& copy) {
                   changed += remap(copy.destination, remaps);
                   changed += remap(copy.source, remaps);
                 },
                 [&](CopyKernel& copy) {
                   changed += remap(copy.destination, remaps);
                   changed += remap(copy.source, remaps);
                 },
                 [&](MemsetNode& memset) { changed += remap(memset.destination, remaps); },
                 [&](FillKernel& fill) { changed += remap(fill.destination, remaps); },
                 [&](StridedCopyKernel& kernel) {
                   changed += remap(kernel.copy.destination, remaps);
                   changed += remap(kernel.copy.source, remaps);
                 },
                 [&](SpinKernel& spin) { changed += remap(spin.start_time, remaps); },
                 [&](ArithmeticKernel& kernel) {
                   changed += remap(kernel.operation.out, remaps);
                   changed += remap(kernel.operation.x, remaps);
                   changed += remap(kernel.operation.y, remaps);
                 },
                 [&](SumPartialsKernel& partials) { changed += remap(partials.x, remaps); },
                 [&](SumFinalKernel& final_step) { changed += remap(final_step.out, remaps); },
                 [&](ChildGraphNode& child) { changed += replace_pointers(*child.graph, remaps); },
                 [&](ConditionalGraphNode& conditional) {
                   for (auto& body : conditional.bodies) changed += replace_pointers(*body, remaps);
                 },
                 [&](SetConditionKernel& kernel) { changed += remap(kernel.rule.element, remaps); },
                 [&](CollectiveNode& collective) {
                   for (CollectiveCall& call : collective.calls) {
                     changed += remap(call.collective.send, remaps);
                     changed += remap(call.collective.recv, remaps);
                   }
                 },
                 [](auto&) {},  // host functions, events, empty nodes: no memory of their own
             },
             node.params);
  return changed;
}

bool same_topology(const Graph& a, const Graph& b) {
  if (a.size() != b.size()) return false;
  const std::vector<Node*> order_a = a.topological_order();
  const std::vector<Node*> order_b = b.topological_order();
  std::unordered_map<const Node*, std::size_t> position_a, position_b;
  for (std::size_t i = 0; i < order_a.size(); ++i) {
    position_a[order_a[i]] = i;
    position_b[order_b[i]] = i;
  }
  auto dependency_positions = [](const Node& node, const std::unordered_map<const Node*, std::size_t>& position) {
    std::vector<std::size_t> positions;
    for (const Node* dependency : node.dependencies) positions.push_back(position.at(dependency));
    std::sort(positions.begin(), positions.end());
    return positions;
  };
  for (std::size_t i = 0; i < order_a.size(); ++i) {
    const Node& node_a = *order_a[i];
    const Node& node_b = *order_b[i];
    if (kind_of(node_a.params) != kind_of(node_b.params)) return false;
    if (dependency_positions(node_a, position_a) != dependency_positions(node_b, position_b)) return false;
    const auto* child_a = std::get_if<ChildGraphNode>(&node_a.params);
    const auto* child_b = std::get_if<ChildGraphNode>(&node_b.params);
    if (child_a && !same_topology(*child_a->graph, *child_b->graph)) return false;
    const auto* conditional_a = std::get_if<ConditionalGraphNode>(&node_a.params);
    const auto* conditional_b = std::get_if<ConditionalGraphNode>(&node_b.params);
    if (conditional_a) {
      if (conditional_a->kind != conditional_b->kind || conditional_a->bodies.size() != conditional_b->bodies.size()) {
        return false;
      }
      for (std::size_t body = 0; body < conditional_a->bodies.size(); ++body) {
        if (!same_topology(*conditional_a->bodies[body], *conditional_b->bodies[body])) return false;
      }
    }
  }
  return true;
}

void collect_events(const Graph& graph, std::vector<SimEvent*>& waits, std::vector<SimEvent*>& records) {
  for (const auto& node : graph.nodes()) {
    if (const auto* wait = std::get_if<EventWaitNode>(&node->params)) waits.push_back(wait->event);
    if (const auto* record = std::get_if<EventRecordNode>(&node->params)) records.push_back(record->event);
    if (const auto* child = std::get_if<ChildGraphNode>(&node->params)) collect_events(*child->graph, waits, records);
    if (const auto* conditional = std::get_if<ConditionalGraphNode>(&node->params)) {
      for (const auto& body : conditional->bodies) collect_events(*body, waits, records);
    }
  }
}

namespace {
// As CUDA: if runs body 0 on a non-zero value, else body 1 where there is one; while runs its body as long
// as the value is non-zero (checked before each round); switch runs the body the value names, if any.
void run_conditional(const ConditionalGraphNode& conditional, GraphRun& run) {
  switch (conditional.kind) {
    case ConditionalKind::If: {
      const unsigned value = condition_value(run, conditional);
      if (value != 0) {
        run_graph(*conditional.bodies[0], run);
      } else if (conditional.bodies.size() > 1) {
        run_graph(*conditional.bodies[1], run);
      }
      return;
    }
    case ConditionalKind::While:
      while (!run.faulted && condition_value(run, conditional) != 0) run_graph(*conditional.bodies[0], run);
      return;
    case ConditionalKind::Switch: {
      const unsigned value = condition_value(run, conditional);
      if (value < conditional.bodies.size()) run_graph(*conditional.bodies[value], run);
      return;
    }
  }
}
}  // namespace

// A replay runs each node only while the device or page-locked memory it touches exists (Note [Work on freed
// memory]): a graph keeps the addresses its nodes were made with, and nothing keeps that memory alive. A copy's
// sides are checked as its direction names them device memory (its host side may be pageable).
namespace {

// The memory `params` touches that must exist as it runs (null entries: none).
std::array<const void*, 3> memory_that_must_exist(const NodeParams& params) {
  auto copy_sides = [](const void* destination, const void* source, trace::Direction direction) {
    const bool device_source = direction == trace::Direction::DeviceToHost ||
                               direction == trace::Direction::DeviceToDevice ||
                               direction == trace::Direction::PeerToPeer;
    const bool device_destination = direction == trace::Direction::HostToDevice ||
                                    direction == trace::Direction::DeviceToDevice ||
                                    direction == trace::Direction::PeerToPeer;
    return std::array<const void*, 3>{device_destination ? destination : nullptr,
                                      device_source ? source : nullptr, nullptr};
  };
  return std::visit(
      Overloaded{
          [&](const CopyNode& copy) { return copy_sides(copy.destination, copy.source, copy.direction); },
          [&](const CopyKernel& copy) { return copy_sides(copy.destination, copy.source, copy.direction); },
          [](const MemsetNode& memset) {
            return std::array<const void*, 3>{memset.bytes ? memset.destination : nullptr, nullptr, nullptr};
          },
          [](const FillKernel& fill) {
            return std::array<const void*, 3>{fill.count ? fill.destination : nullptr, nullptr, nullptr};
          },
          [](const StridedCopyKernel& kernel) {
            if (kernel.copy.count() == 0) return std::array<const void*, 3>{};
            return std::array<const void*, 3>{kernel.copy.destination, kernel.copy.source, nullptr};
          },
          [](const ArithmeticKernel& kernel) {
            const Arithmetic& operation = kernel.operation;
            if (operation.count == 0) return std::array<const void*, 3>{};
            return std::array<const void*, 3>{operation.out, operation.x, operation.y};
          },
          [](const SumPartialsKernel& partials) {
            return std::array<const void*, 3>{partials.count ? partials.x : nullptr, nullptr, nullptr};
          },
          [](const SumFinalKernel& final_step) {
            return std::array<const void*, 3>{final_step.out, nullptr, nullptr};
          },
          [](const SetConditionKernel& kernel) {
            return std::array<const void*, 3>{kernel.rule.element, nullptr, nullptr};
          },
          [](const auto&) { return std::array<const void*, 3>{}; },
      },
      params);
}

// Whether `node` touches memory that no longer exists: then its device's context is lost (Note [Work on freed
// memory]).
bool faults_on_freed_memory(const Node& node, GraphRun& run) {
  for (const void* pointer : memory_that_must_exist(node.params)) {
    if (pointer == nullptr || run.memory->find(pointer)) continue;
    run.access->lose_context(run.device, std::string(kTouchedFreedMemory) + " (a graph's replay)");
    run.faulted = true;
    return true;
  }
  return false;
}

}  // namespace

void run_node(const Node& node, GraphRun& run) {
  if (run.faulted) return;
  if (run.access && faults_on_freed_memory(node, run)) return;
  const GraphNodeKind kind = kind_of(node.params);
  const bool traced_node =
      run.traced && (kind == GraphNodeKind::Kernel || kind == GraphNodeKind::Copy || kind == GraphNodeKind::Memset);
  const std::uint64_t start_ns = traced_node ? SimTracer::clock_ns() : 0;
  std::visit(Overloaded{
                 [](const CopyNode& copy) { std::memcpy(copy.destination, copy.source, copy.bytes); },
                 [](const CopyKernel& copy) { std::memcpy(copy.destination, copy.source, copy.bytes); },
                 [](const MemsetNode& memset) { std::memset(memset.destination, memset.value, memset.bytes); },
                 [](const FillKernel& fill) { run_fill(fill.destination, fill.count, fill.pattern); },
                 [](const StridedCopyKernel& kernel) { run_copy_strided(kernel.copy); },
                 [&](const SpinKernel& spin) { run_spin(spin.nanoseconds, spin.start_time, run.take_time); },
                 [](const ArithmeticKernel& kernel) { run_arithmetic(kernel.operation); },
                 [&](const SumPartialsKernel& partials) {
                   run.partial_sums[&node] = run_sum_partials(partials.x, partials.count, partials.type);
                 },
                 [&](const SumFinalKernel& final_step) {
                   SumPartial partial;
                   for (const Node* dependency : node.dependencies) {
                     auto found = run.partial_sums.find(dependency);
                     if (found != run.partial_sums.end()) partial = found->second;
                   }
                   run_sum_final(final_step.out, partial, final_step.type);
                 },
                 [](const HostNode& host) { host.function(host.user_data); },
                 [&](const ChildGraphNode& child) { run_graph(*child.graph, run); },
                 [&](const SetConditionKernel& kernel) {
                   run.conditions[kernel.condition] = evaluate_condition(kernel.rule.element, kernel.rule.type,
                                                                         kernel.rule.comparison, kernel.rule.threshold);
                 },
                 [&](const ConditionalGraphNode& conditional) { run_conditional(conditional, run); },
                 [&](const MemAllocNode& allocation) { run.memory->graph_allocate(allocation.pointer); },
                 [&](const MemFreeNode& free) { run.memory->graph_free(free.pointer); },
                 // Event nodes act on the whole launch; empty nodes only order; collective nodes are pieces of
                 // a launch of their own (plan_launch).
                 [](const auto&) {},
             },
             node.params);
  if (traced_node) deliver_node(*run.traced, node, start_ns);
}

void run_graph(const Graph& graph, GraphRun& run) {
  for (const Node* node : graph.topological_order(run.order ? &*run.order : nullptr)) run_node(*node, run);
}

bool holds_memory_nodes(const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    if (std::holds_alternative<MemAllocNode>(node->params) || std::holds_alternative<MemFreeNode>(node->params)) {
      return true;
    }
    if (const auto* child = std::get_if<ChildGraphNode>(&node->params)) {
      if (holds_memory_nodes(*child->graph)) return true;
    }
    if (const auto* conditional = std::get_if<ConditionalGraphNode>(&node->params)) {
      for (const auto& body : conditional->bodies) {
        if (holds_memory_nodes(*body)) return true;
      }
    }
  }
  return false;
}

std::vector<void*> unfreed_allocations(const Graph& graph) {
  std::vector<void*> allocated;
  std::vector<void*> freed;
  for (const auto& node : graph.nodes()) {
    if (const auto* allocation = std::get_if<MemAllocNode>(&node->params)) allocated.push_back(allocation->pointer);
    if (const auto* free = std::get_if<MemFreeNode>(&node->params)) freed.push_back(free->pointer);
  }
  allocated.erase(std::remove_if(allocated.begin(), allocated.end(),
                                 [&freed](void* pointer) {
                                   return std::find(freed.begin(), freed.end(), pointer) != freed.end();
                                 }),
                  allocated.end());
  return allocated;
}

bool holds_collectives(const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    if (std::holds_alternative<CollectiveNode>(node->params)) return true;
    const auto* child = std::get_if<ChildGraphNode>(&node->params);
    if (child && holds_collectives(*child->graph)) return true;
  }
  return false;
}

namespace {
void plan_into(const Graph& graph, std::mt19937_64* random, std::vector<LaunchPiece>& pieces) {
  auto meets_collectives = [](const Node& node) {
    const auto* child = std::get_if<ChildGraphNode>(&node.params);
    return std::holds_alternative<CollectiveNode>(node.params) || (child && holds_collectives(*child->graph));
  };
  for (const Node* node : graph.topological_order(random, meets_collectives)) {
    if (const auto* collective = std::get_if<CollectiveNode>(&node->params)) {
      pieces.push_back(LaunchPiece{{}, collective});
    } else if (meets_collectives(*node)) {
      plan_into(*std::get<ChildGraphNode>(node->params).graph, random, pieces);
    } else {
      if (pieces.empty() || pieces.back().collective) pieces.emplace_back();
      pieces.back().nodes.push_back(node);
    }
  }
}
}  // namespace

std::vector<LaunchPiece> plan_launch(const Graph& graph, std::mt19937_64* random) {
  std::vector<LaunchPiece> pieces;
  plan_into(graph, random, pieces);
  return pieces;
}

}  // namespace cuweave::sim
