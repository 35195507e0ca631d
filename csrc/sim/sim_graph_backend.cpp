// The simulator's explicit graphs and executable graphs (GraphBackend); see Note [Simulated capture and graphs]
// in capture_book.hpp.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuweave/backend.hpp"
#include "sim/capture_book.hpp"
#include "sim/device_access.hpp"
#include "sim/fault_plan.hpp"
#include "sim/graph_store.hpp"
#include "sim/handles.hpp"
#include "sim/memory_registry.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_collectives.hpp"
#include "sim/sim_error.hpp"
#include "sim/sim_facets.hpp"
#include "sim/sim_graph.hpp"
#include "sim/sim_kernels.hpp"
#include "sim/sim_tracer.hpp"

namespace cuweave::sim {

namespace {

class SimGraphBackend final : public GraphBackend {
 public:
  SimGraphBackend(Handles& handles, Scheduler& scheduler, CaptureBook& captures, GraphStore& graphs,
                  ConditionBook& conditions, MemoryRegistry& memory, DeviceAccess& access, FaultPlan& faults)
      : handles_(handles), scheduler_(scheduler), captures_(captures), graphs_(graphs), conditions_(conditions),
        memory_(memory), access_(access), faults_(faults) {}

  ConditionHandle create_graph_condition(GraphHandle, unsigned default_value) override {
    return conditions_.make(default_value);
  }
  ConditionalNode add_conditional_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                       ConditionHandle condition, ConditionalKind kind, unsigned bodies) override {
    return graphs_.add_conditional(graph, dependencies, condition, kind, bodies);
  }
  GraphNodeHandle add_set_condition_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                         ConditionHandle condition, const ConditionRule& rule) override {
    memory_.within_range(rule.element, element_bytes(rule.type), "cudaGraphAddKernelNode");
    return graphs_.add(graph, dependencies, SetConditionKernel{condition, rule}, "cudaGraphAddKernelNode");
  }

  GraphHandle create_graph() override { return graphs_.create(); }
  void destroy_graph(GraphHandle graph) noexcept override { graphs_.destroy_graph(graph); }
  GraphNodeHandle add_kernel_node(GraphHandle, const std::vector<GraphNodeHandle>&, KernelHandle, Dim3, Dim3,
                                  std::size_t, void**) override {
    fail_needs_gpu("cudaGraphAddKernelNode", kCompiledKernelsNeedGpu);
  }
  GraphNodeHandle add_copy_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies, void* destination,
                                const void* source, std::size_t bytes) override {
    memory_.within_range(source, bytes, "cudaGraphAddMemcpyNode1D");
    memory_.within_range(destination, bytes, "cudaGraphAddMemcpyNode1D");
    const CopyNode copy{destination, source, bytes, copy_direction(memory_, destination, source)};
    return graphs_.add(graph, dependencies, copy, "cudaGraphAddMemcpyNode1D");
  }
  GraphNodeHandle add_memset_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                  void* destination, int value, std::size_t bytes) override {
    memory_.within_range(destination, bytes, "cudaGraphAddMemsetNode");
    return graphs_.add(graph, dependencies, MemsetNode{destination, value, bytes}, "cudaGraphAddMemsetNode");
  }
  GraphNodeHandle add_host_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                HostFunction function, void* user_data) override {
    if (function == nullptr) fail("cudaGraphAddHostNode", kInvalidValue, "the host function is null");
    return graphs_.add(graph, dependencies, HostNode{function, user_data}, "cudaGraphAddHostNode");
  }
  GraphNodeHandle add_event_record_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                        EventHandle event) override {
    SimEvent* recorded = handles_.resolve_event(event, "cudaGraphAddEventRecordNode");
    return graphs_.add(graph, dependencies, EventRecordNode{recorded}, "cudaGraphAddEventRecordNode");
  }
  GraphNodeHandle add_event_wait_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                      EventHandle event) override {
    SimEvent* awaited = handles_.resolve_event(event, "cudaGraphAddEventWaitNode");
    return graphs_.add(graph, dependencies, EventWaitNode{awaited}, "cudaGraphAddEventWaitNode");
  }
  GraphNodeHandle add_empty_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies) override {
    return graphs_.add(graph, dependencies, EmptyNode{}, "cudaGraphAddEmptyNode");
  }
  GraphNodeHandle add_child_graph_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                       GraphHandle child) override {
    return graphs_.add_child(graph, dependencies, child, "cudaGraphAddChildGraphNode");
  }
  std::vector<GraphNodeInfo> graph_nodes(GraphHandle graph) override { return graphs_.nodes(graph); }
  void set_kernel_node_arguments(GraphNodeHandle, void**) override {
    fail_needs_gpu("cudaGraphKernelNodeSetParams", kCompiledKernelsNeedGpu);
  }
  void set_copy_node(GraphNodeHandle node, void* destination, const void* source, std::size_t bytes) override {
    memory_.within_range(source, bytes, "cudaGraphMemcpyNodeSetParams1D");
    memory_.within_range(destination, bytes, "cudaGraphMemcpyNodeSetParams1D");
    graphs_.set_copy(node, CopyNode{destination, source, bytes, copy_direction(memory_, destination, source)});
  }
  Repointed replace_pointers(GraphHandle graph, const std::vector<PointerRemap>& remaps) override {
    return graphs_.replace_pointers(graph, remaps);
  }

  // The simulator runs kernels in each stream's order without priorities, so node priorities change nothing here.
  GraphExecHandle instantiate_graph(GraphHandle graph, bool, bool free_on_launch) override {
    return graphs_.instantiate(graph, free_on_launch);
  }
  void destroy_graph_exec(GraphExecHandle exec) noexcept override {
    // As CUDA's cudaGraphExecDestroy, which waits for the device's queued work (seen on an H100, CUDA 13, for a
    // graph whose launches had finished long before; Note [Releases behind a pause]). The simulator's executables
    // know no device: it waits for every device's. Not while exploring schedules, where queued work runs only as
    // the test's thread waits, and a destroy may come on a thread of cuweave's own.
    if (!scheduler_.seed()) {
      for (int device = 0; device < handles_.devices(); ++device) {
        try {
          scheduler_.synchronize_device(device);
        } catch (...) {
          // The device's work failed: the destroy goes on, as CUDA's does.
        }
      }
    }
    graphs_.destroy_exec(exec);
  }
  void upload_graph(GraphExecHandle exec, StreamHandle handle) override {
    graphs_.launchable(exec, "cudaGraphUpload");  // nothing to upload: checks the handles only
    handles_.resolve_stream(handle, "cudaGraphUpload");
  }
  void launch_graph(GraphExecHandle exec, StreamHandle handle) override {
    SimStream* stream = handles_.resolve_stream(handle, "cudaGraphLaunch");
    Launchable launchable = graphs_.launchable(exec, "cudaGraphLaunch");
    if (holds_memory_nodes(*launchable.graph)) captures_.check_memory_graph_launch(stream, "cudaGraphLaunch");
    captures_.capture_or_run(
        stream, "cudaGraphLaunch",
        [&] { return chain(ChildGraphNode{std::shared_ptr<Graph>(launchable.graph->clone())}); },
        [&] { launch(stream, launchable); });
  }
  bool update_graph_exec(GraphExecHandle exec, GraphHandle graph) override { return graphs_.update(exec, graph); }
  bool update_graph_exec_nodes(GraphExecHandle exec, GraphHandle graph,
                               const std::vector<GraphNodeHandle>& nodes) override {
    return graphs_.update_nodes(exec, graph, nodes);
  }

 private:
  // One scheduler operation that runs the whole graph (Note [Simulated capture and graphs]), or one per
  // piece where it meets collectives (Note [Simulated collectives]).
  void launch(SimStream* stream, const Launchable& launchable) {
    if (faults_.strikes(FaultKind::Launch, "cudaGraphLaunch")) {  // Note [Injected faults]
      FaultPlan::fail(FaultKind::Launch, "cudaGraphLaunch");
    }
    std::vector<SimEvent*> waits, records;
    collect_events(*launchable.graph, waits, records);
    for (const auto* events : {&waits, &records}) {
      for (SimEvent* event : *events) {
        if (!scheduler_.known(event)) {
          fail("cudaGraphLaunch", kInvalidResourceHandle, "an event that the graph's event nodes name was destroyed");
        }
      }
    }
    const std::optional<std::uint64_t> order_seed = scheduler_.exploring_draw();
    std::shared_ptr<const Graph> graph = launchable.graph;
    std::shared_ptr<OperationTrace> trace =
        traced(trace::Kind::Graph, *stream, "graph (" + std::to_string(graph->size()) + " nodes)");
    auto run = std::make_shared<GraphRun>();
    run->memory = &memory_;
    run->access = &access_;
    run->device = stream->device;
    if (order_seed) run->order.emplace(*order_seed);
    run->take_time = !order_seed;  // when exploring, nothing takes time
    run->traced = trace.get();
    std::vector<Step> steps;
    // What the previous launch allocated and left unfreed is freed as this one starts, by an executable that frees
    // on launch; any other launch is refused while it lives (Note [Simulated graph memory]).
    std::vector<void*> unfreed = unfreed_allocations(*graph);
    if (!unfreed.empty() && !memory_.launched_graph_memory(unfreed, launchable.free_on_launch)) {
      fail("cudaGraphLaunch", kInvalidValue,
           "memory this graph allocated at its last launch and never freed still lives; free it first, or "
           "instantiate with cudaGraphInstantiateFlagAutoFreeOnLaunch");
    }
    if (!unfreed.empty() && launchable.free_on_launch) {
      steps.push_back(Step{[&memory = memory_, unfreed] {
                             for (void* pointer : unfreed) memory.graph_free(pointer);
                           },
                           {}, {}, nullptr});
    }
    if (!holds_collectives(*graph)) {
      steps.push_back(Step{[graph, run] { run_graph(*graph, *run); }, {}, {}, nullptr});
    } else {
      // Cut where it meets collectives (Note [Simulated collectives]), whose places are taken now.
      for (const LaunchPiece& piece : plan_launch(*graph, run->order ? &*run->order : nullptr)) {
        if (piece.collective) {
          for (Step& step : collective_steps(*piece.collective, faults_)) steps.push_back(std::move(step));
        } else {
          steps.push_back(Step{[graph, run, nodes = piece.nodes] {
                                 for (const Node* node : nodes) run_node(*node, *run);
                               },
                               {}, {}, nullptr});
        }
      }
    }
    scheduler_.enqueue_launch(stream, std::move(steps), waits, records, launchable.launches, trace);
  }

  Handles& handles_;
  Scheduler& scheduler_;
  CaptureBook& captures_;
  GraphStore& graphs_;
  ConditionBook& conditions_;
  MemoryRegistry& memory_;
  DeviceAccess& access_;
  FaultPlan& faults_;
};

}  // namespace

std::unique_ptr<GraphBackend> make_graph_backend(SimState& sim) {
  return std::make_unique<SimGraphBackend>(sim.handles, sim.scheduler, sim.captures, sim.graphs, sim.conditions,
                                           sim.memory, sim.access, sim.faults);
}

}  // namespace cuweave::sim
