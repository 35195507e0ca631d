// The CUDA backend's explicit graphs and executable graphs (GraphBackend); the longer node work is in
// cuda_graphs.cpp.
#include <cuda.h>
#include <cuda_runtime.h>

#include <vector>

#include "cuda/builtin_kernels.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_facets.hpp"
#include "cuda/cuda_graphs.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/driver_api.hpp"
#include "cuweave/graph_backend.hpp"

namespace cuweave::cuda {

namespace {

class CudaGraphBackend final : public GraphBackend {
 public:
  ConditionHandle create_graph_condition(GraphHandle graph, unsigned default_value) override {
    cudaGraphConditionalHandle condition = 0;
    CUWEAVE_CUDA_TRY(
        cudaGraphConditionalHandleCreate(&condition, as_graph(graph), default_value, cudaGraphCondAssignDefault));
    return condition;
  }

  ConditionalNode add_conditional_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                       ConditionHandle condition, ConditionalKind kind, unsigned bodies) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = condition;
    params.conditional.type = kind == ConditionalKind::If      ? cudaGraphCondTypeIf
                              : kind == ConditionalKind::While ? cudaGraphCondTypeWhile
                                                               : cudaGraphCondTypeSwitch;
    params.conditional.size = bodies;
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddNode(&node, as_graph(graph), deps.data(), nullptr, deps.size(), &params));
    ConditionalNode made;
    made.node = node;
    std::vector<cudaGraph_t> body_graphs(params.conditional.phGraph_out, params.conditional.phGraph_out + bodies);
    for (cudaGraph_t body : body_graphs) made.bodies.push_back(body);
    remember_conditional(node, kind, std::move(body_graphs));
    return made;
  }

  GraphNodeHandle add_set_condition_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                         ConditionHandle condition, const ConditionRule& rule) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(add_set_condition_kernel_node(&node, as_graph(graph), deps.data(), deps.size(), condition, rule));
    return node;
  }

  GraphHandle create_graph() override {
    cudaGraph_t graph = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphCreate(&graph, 0));
    return graph;
  }

  void destroy_graph(GraphHandle graph) noexcept override {
    forget_conditionals(as_graph(graph));
    CUWEAVE_CUDA_TRY_QUIET(cudaGraphDestroy(as_graph(graph)));
  }

  GraphNodeHandle add_kernel_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                  KernelHandle kernel, Dim3 grid, Dim3 block, std::size_t shared_bytes,
                                  void** arguments) override {
    CUDA_KERNEL_NODE_PARAMS params{};
    params.func = static_cast<CUfunction>(kernel);
    params.gridDimX = grid.x;
    params.gridDimY = grid.y;
    params.gridDimZ = grid.z;
    params.blockDimX = block.x;
    params.blockDimY = block.y;
    params.blockDimZ = block.z;
    params.sharedMemBytes = static_cast<unsigned>(shared_bytes);
    params.kernelParams = arguments;
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_DRIVER_TRY(driver().graph_add_kernel_node(reinterpret_cast<CUgraphNode*>(&node),
                                                      reinterpret_cast<CUgraph>(graph),
                                                      reinterpret_cast<const CUgraphNode*>(deps.data()), deps.size(),
                                                      &params));
    return node;
  }

  GraphNodeHandle add_copy_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                void* destination, const void* source, std::size_t bytes) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddMemcpyNode1D(&node, as_graph(graph), deps.data(), deps.size(), destination, source,
                                              bytes, cudaMemcpyDefault));
    return node;
  }

  GraphNodeHandle add_memset_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                  void* destination, int value, std::size_t bytes) override {
    cudaMemsetParams params{};
    params.dst = destination;
    params.value = static_cast<unsigned>(value) & 0xffu;
    params.elementSize = 1;
    params.width = bytes;
    params.height = 1;
    params.pitch = bytes;
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddMemsetNode(&node, as_graph(graph), deps.data(), deps.size(), &params));
    return node;
  }

  GraphNodeHandle add_host_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                HostFunction function, void* user_data) override {
    cudaHostNodeParams params{};
    params.fn = function;
    params.userData = user_data;
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddHostNode(&node, as_graph(graph), deps.data(), deps.size(), &params));
    return node;
  }

  GraphNodeHandle add_event_record_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                        EventHandle event) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(
        cudaGraphAddEventRecordNode(&node, as_graph(graph), deps.data(), deps.size(), as_event(event)));
    return node;
  }

  GraphNodeHandle add_event_wait_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                      EventHandle event) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddEventWaitNode(&node, as_graph(graph), deps.data(), deps.size(), as_event(event)));
    return node;
  }

  GraphNodeHandle add_empty_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(cudaGraphAddEmptyNode(&node, as_graph(graph), deps.data(), deps.size()));
    return node;
  }

  GraphNodeHandle add_child_graph_node(GraphHandle graph, const std::vector<GraphNodeHandle>& dependencies,
                                       GraphHandle child) override {
    const auto deps = as_nodes(dependencies);
    cudaGraphNode_t node = nullptr;
    CUWEAVE_CUDA_TRY(
        cudaGraphAddChildGraphNode(&node, as_graph(graph), deps.data(), deps.size(), as_graph(child)));
    return node;
  }

  std::vector<GraphNodeInfo> graph_nodes(GraphHandle graph) override { return cuda::graph_nodes(as_graph(graph)); }

  void set_kernel_node_arguments(GraphNodeHandle node, void** arguments) override {
    cuda::set_kernel_node_arguments(as_node(node), arguments);
  }

  void set_copy_node(GraphNodeHandle node, void* destination, const void* source, std::size_t bytes) override {
    CUWEAVE_CUDA_TRY(cudaGraphMemcpyNodeSetParams1D(as_node(node), destination, source, bytes, cudaMemcpyDefault));
  }

  Repointed replace_pointers(GraphHandle graph, const std::vector<PointerRemap>& remaps) override {
    return cuda::replace_pointers(as_graph(graph), remaps);
  }

  GraphExecHandle instantiate_graph(GraphHandle graph, bool node_priorities, bool free_on_launch) override {
    cudaGraphExec_t exec = nullptr;
    unsigned long long flags = node_priorities ? cudaGraphInstantiateFlagUseNodePriority : 0;
    if (free_on_launch) flags |= cudaGraphInstantiateFlagAutoFreeOnLaunch;  // with node priorities: probe case J
    CUWEAVE_CUDA_TRY(cudaGraphInstantiate(&exec, as_graph(graph), flags));
    return exec;
  }

  void destroy_graph_exec(GraphExecHandle exec) noexcept override {
    CUWEAVE_CUDA_TRY_QUIET(cudaGraphExecDestroy(as_exec(exec)));
  }

  void upload_graph(GraphExecHandle exec, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(cudaGraphUpload(as_exec(exec), as_stream(stream)));
  }

  void launch_graph(GraphExecHandle exec, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(cudaGraphLaunch(as_exec(exec), as_stream(stream)));
  }

  bool update_graph_exec(GraphExecHandle exec, GraphHandle graph) override {
    cudaGraphExecUpdateResultInfo info{};
    const cudaError_t status = cudaGraphExecUpdate(as_exec(exec), as_graph(graph), &info);
    if (status == cudaErrorGraphExecUpdateFailure) {
      (void)cudaGetLastError();
      return false;  // topology or node kinds changed: the caller instantiates anew
    }
    CUWEAVE_CUDA_TRY(status);
    return true;
  }

  bool update_graph_exec_nodes(GraphExecHandle exec, GraphHandle, const std::vector<GraphNodeHandle>& nodes) override {
    return cuda::update_exec_nodes(as_exec(exec), as_nodes(nodes));
  }
};

}  // namespace

std::unique_ptr<GraphBackend> make_graph_backend() {
  return std::make_unique<CudaGraphBackend>();
}

}  // namespace cuweave::cuda
