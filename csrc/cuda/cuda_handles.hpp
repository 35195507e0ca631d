// The CUDA types behind the backend's opaque handles (Note [Backend facets] in cuweave/backend.hpp).
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "cuweave/backend_handles.hpp"

namespace cuweave::cuda {

inline cudaStream_t as_stream(StreamHandle handle) { return static_cast<cudaStream_t>(handle); }
inline cudaEvent_t as_event(EventHandle handle) { return static_cast<cudaEvent_t>(handle); }
inline cudaGraph_t as_graph(GraphHandle handle) { return static_cast<cudaGraph_t>(handle); }
inline cudaGraphExec_t as_exec(GraphExecHandle handle) { return static_cast<cudaGraphExec_t>(handle); }
inline cudaGraphNode_t as_node(GraphNodeHandle handle) { return static_cast<cudaGraphNode_t>(handle); }

inline std::vector<cudaGraphNode_t> as_nodes(const std::vector<GraphNodeHandle>& handles) {
  std::vector<cudaGraphNode_t> nodes;
  nodes.reserve(handles.size());
  for (GraphNodeHandle handle : handles) nodes.push_back(as_node(handle));
  return nodes;
}

}  // namespace cuweave::cuda
