// CUDA graphs for the CUDA backend: node construction, introspection and pointer replacement.
// Capture, instantiation and launch are single runtime calls and live in cuda_capture_backend.cpp and
// cuda_graph_backend.cpp.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "cuweave/backend.hpp"

namespace cuweave::cuda {

std::vector<GraphNodeInfo> graph_nodes(cudaGraph_t graph);
void set_kernel_node_arguments(cudaGraphNode_t node, void** arguments);
Repointed replace_pointers(cudaGraph_t graph, const std::vector<PointerRemap>& remaps);
// GraphBackend::update_graph_exec_nodes: `nodes` are of the graph `exec` was instantiated from.
bool update_exec_nodes(cudaGraphExec_t exec, const std::vector<cudaGraphNode_t>& nodes);
// Note [Bodies of conditional nodes] (cuda_graphs.cpp): what capture_conditional made, and forgetting it
// with its graph.
void remember_conditional(cudaGraphNode_t node, ConditionalKind kind, std::vector<cudaGraph_t> bodies);
void forget_conditionals(cudaGraph_t graph) noexcept;

}  // namespace cuweave::cuda
