#include "cuda/cuda_graphs.hpp"

#include <cuda.h>
#include <cxxabi.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda/cuda_check.hpp"
#include "cuda/driver_api.hpp"
#include "cuda/pointer_attributes.hpp"
#include "cuweave/errors.hpp"

namespace cuweave::cuda {

namespace {

CUDA_KERNEL_NODE_PARAMS kernel_params(cudaGraphNode_t node) {
  CUDA_KERNEL_NODE_PARAMS params{};
  CUWEAVE_DRIVER_TRY(driver().graph_kernel_node_get_params(reinterpret_cast<CUgraphNode>(node), &params));
  return params;
}

std::vector<cudaGraphNode_t> all_nodes(cudaGraph_t graph) {
  std::size_t count = 0;
  CUWEAVE_CUDA_TRY(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) CUWEAVE_CUDA_TRY(cudaGraphGetNodes(graph, nodes.data(), &count));
  nodes.resize(count);
  return nodes;
}

// Note [Bodies of conditional nodes]
// CUDA 13.0's runtime has no call that returns a conditional node's parameters, its bodies included: they
// are known only where the node is made (capture_conditional). So the backend remembers them by node, to
// list and repoint what the bodies hold, and forgets a graph's nodes when the graph is destroyed. A
// conditional node in a copy of a graph (a child graph node, a replay captured into another graph) is a
// new node whose bodies cannot be found: a listing names it without its bodies' sizes, and repointing
// buffers inside it is refused, rather than leaving the old pointers there.
struct ConditionalRecord {
  ConditionalKind kind;
  std::vector<cudaGraph_t> bodies;
};
std::mutex& conditionals_mutex() {
  static auto* mutex = new std::mutex;  // leaked: graphs may be destroyed during interpreter exit
  return *mutex;
}
std::unordered_map<cudaGraphNode_t, ConditionalRecord>& conditionals() {  // LOCK: conditionals_mutex()
  static auto* records = new std::unordered_map<cudaGraphNode_t, ConditionalRecord>;
  return *records;
}
const ConditionalRecord* conditional_record(cudaGraphNode_t node) {
  std::lock_guard<std::mutex> lock(conditionals_mutex());
  auto it = conditionals().find(node);
  return it == conditionals().end() ? nullptr : &it->second;  // records are erased only with their graph
}

std::vector<cudaGraphNode_t> all_nodes(cudaGraph_t graph);

std::string conditional_label(cudaGraphNode_t node) {
  const ConditionalRecord* record = conditional_record(node);
  if (!record) return "conditional";
  std::string sizes;
  for (cudaGraph_t body : record->bodies) {
    sizes += (sizes.empty() ? "" : " | ") + std::to_string(all_nodes(body).size());
  }
  return std::string(to_string(record->kind)) + " (" + sizes + " nodes)";
}

std::vector<cudaGraphNode_t> dependencies_of(cudaGraphNode_t node) {
  std::size_t count = 0;
  CUWEAVE_CUDA_TRY(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> dependencies(count);
  if (count > 0) CUWEAVE_CUDA_TRY(cudaGraphNodeGetDependencies(node, dependencies.data(), nullptr, &count));
  dependencies.resize(count);
  return dependencies;
}

bool on_device(const void* pointer);

// cuweave's built-in kernels by the name in their symbol; anything else by its demangled name.
std::string kernel_label(const CUDA_KERNEL_NODE_PARAMS& params) {
  const char* mangled = nullptr;
  const CUresult named = params.kern ? driver().kernel_name(&mangled, params.kern)
                                     : driver().function_name(&mangled, params.func);
  if (named != CUDA_SUCCESS || !mangled) return "kernel";
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  if (name.find("cuweave::cuda::") != std::string::npos) {
    if (name.find("fill_kernel") != std::string::npos) return "fill";
    if (name.find("spin_kernel") != std::string::npos) return "spin";
    if (name.find("partial_sums_kernel") != std::string::npos) return "sum_partials";
    if (name.find("final_sum_kernel") != std::string::npos) return "sum_final";
    if (name.find("set_condition_kernel") != std::string::npos) return "set_condition";
    if (name.find("copy_strided_kernel") != std::string::npos) return "copy_strided";
    if (name.find("copy_kernel") != std::string::npos && params.kernelParams) {  // (destination, source, count)
      const void* destination = *static_cast<void* const*>(params.kernelParams[0]);
      const void* source = *static_cast<void* const*>(params.kernelParams[1]);
      return std::string("copy_kernel ") + (on_device(source) ? "D" : "H") + "to" + (on_device(destination) ? "D" : "H");
    }
    const auto op = name.find("(cuweave::ArithmeticOp)");
    if (name.find("arithmetic_kernel") != std::string::npos && op != std::string::npos) {
      static const char* const ops[] = {"scale", "axpy", "add", "add_scalar"};
      const int index = std::atoi(name.c_str() + op + std::strlen("(cuweave::ArithmeticOp)"));
      if (index >= 0 && index < 4) return ops[index];
    }
  }
  // "void ns::name<T>(args)" -> "ns::name<T>"
  const auto open = name.find('(');
  if (open != std::string::npos) name.resize(open);
  if (name.rfind("void ", 0) == 0) name.erase(0, 5);
  return name;
}

bool on_device(const void* pointer) {
  const cudaMemoryType type = pointer_attributes(pointer).type;
  return type == cudaMemoryTypeDevice || type == cudaMemoryTypeManaged;
}

std::string copy_label(const cudaMemcpy3DParms& params) {
  const std::size_t bytes = params.extent.width * params.extent.height * params.extent.depth;
  std::string direction;
  if (params.srcArray || params.dstArray) {
    direction = "array";
  } else {
    direction = std::string(on_device(params.srcPtr.ptr) ? "D" : "H") + "to" + (on_device(params.dstPtr.ptr) ? "D" : "H");
  }
  return "copy " + std::to_string(bytes) + " bytes " + direction;
}

std::string node_label(cudaGraphNode_t node, cudaGraphNodeType type, GraphNodeKind& kind) {
  switch (type) {
    case cudaGraphNodeTypeKernel: {
      kind = GraphNodeKind::Kernel;
      return kernel_label(kernel_params(node));
    }
    case cudaGraphNodeTypeMemcpy: {
      kind = GraphNodeKind::Copy;
      cudaMemcpy3DParms params{};
      CUWEAVE_CUDA_TRY(cudaGraphMemcpyNodeGetParams(node, &params));
      return copy_label(params);
    }
    case cudaGraphNodeTypeMemset: {
      kind = GraphNodeKind::Memset;
      cudaMemsetParams params{};
      CUWEAVE_CUDA_TRY(cudaGraphMemsetNodeGetParams(node, &params));
      return "memset " + std::to_string(params.width * params.height * params.elementSize) + " bytes";
    }
    case cudaGraphNodeTypeHost: kind = GraphNodeKind::Host; return "host function";
    case cudaGraphNodeTypeEventRecord: kind = GraphNodeKind::EventRecord; return "record event";
    case cudaGraphNodeTypeWaitEvent: kind = GraphNodeKind::EventWait; return "wait event";
    case cudaGraphNodeTypeEmpty: kind = GraphNodeKind::Empty; return "empty";
    case cudaGraphNodeTypeGraph: {
      kind = GraphNodeKind::ChildGraph;
      cudaGraph_t child = nullptr;
      CUWEAVE_CUDA_TRY(cudaGraphChildGraphNodeGetGraph(node, &child));
      return "graph (" + std::to_string(all_nodes(child).size()) + " nodes)";
    }
    case cudaGraphNodeTypeMemAlloc: {
      kind = GraphNodeKind::Allocation;
      cudaMemAllocNodeParams params{};
      CUWEAVE_CUDA_TRY(cudaGraphMemAllocNodeGetParams(node, &params));
      return "allocate " + std::to_string(params.bytesize) + " bytes";
    }
    case cudaGraphNodeTypeMemFree: kind = GraphNodeKind::Free; return "free";
    case cudaGraphNodeTypeConditional: kind = GraphNodeKind::Conditional; return conditional_label(node);
    default: kind = GraphNodeKind::Other; return "node type " + std::to_string(static_cast<int>(type));
  }
}

using ParameterLayout = std::vector<std::pair<std::size_t, std::size_t>>;  // (offset, size) per parameter

// The kernel's parameters as (offset, size) pairs.
ParameterLayout parameter_layout(const CUDA_KERNEL_NODE_PARAMS& params) {
  ParameterLayout layout;
  for (std::size_t index = 0;; ++index) {
    std::size_t offset = 0, size = 0;
    const CUresult status = params.kern ? driver().kernel_parameter(params.kern, index, &offset, &size)
                                        : driver().function_parameter(params.func, index, &offset, &size);
    if (status != CUDA_SUCCESS) break;  // past the last parameter
    layout.emplace_back(offset, size);
  }
  return layout;
}

// Note [Parameter layouts within one walk]
// CUDA tells a kernel's parameter count only by failing on the index past the last, and that failing call is the
// walk's dearest (1.8 µs, against 0.05 µs for a node's parameters, on an H200): for a woven step of 50 kernel
// nodes, most of Graph.rebind. A graph's nodes launch a few kernels many times, so one walk asks for each
// kernel's layout once. They are kept for that walk only: once a module is unloaded, its kernel's address may
// come back as another kernel's, of another layout.
class ParameterLayouts {
 public:
  const ParameterLayout& of(const CUDA_KERNEL_NODE_PARAMS& params) {
    const Key key{params.kern != nullptr, params.kern ? static_cast<const void*>(params.kern)
                                                      : static_cast<const void*>(params.func)};
    auto found = layouts_.find(key);
    if (found == layouts_.end()) found = layouts_.emplace(key, parameter_layout(params)).first;
    return found->second;
  }

 private:
  using Key = std::pair<bool, const void*>;  // (a CUkernel, else a CUfunction; its handle)
  std::map<Key, ParameterLayout> layouts_;
};

bool remap(std::uint64_t& value, const std::vector<PointerRemap>& remaps) {
  for (const PointerRemap& r : remaps) {
    const auto old_base = reinterpret_cast<std::uintptr_t>(r.old_base);
    if (value >= old_base && value - old_base < r.bytes) {
      value = reinterpret_cast<std::uintptr_t>(r.new_base) + (value - old_base);
      return true;
    }
  }
  return false;
}

bool remap_pointer(void*& pointer, const std::vector<PointerRemap>& remaps) {
  auto value = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(pointer));
  if (!remap(value, remaps)) return false;
  pointer = reinterpret_cast<void*>(static_cast<std::uintptr_t>(value));
  return true;
}

// Kernel parameters are scanned word by word: a pointer may also sit inside a by-value struct
// (as other libraries pass their tensors), always 8-byte aligned.
std::size_t replace_in_kernel(cudaGraphNode_t node, const std::vector<PointerRemap>& remaps,
                              ParameterLayouts& layouts) {
  CUDA_KERNEL_NODE_PARAMS params = kernel_params(node);
  if (!params.kernelParams) return 0;
  const ParameterLayout& layout = layouts.of(params);
  std::vector<std::vector<unsigned char>> values(layout.size());
  std::vector<void*> pointers(layout.size());
  std::size_t replaced = 0;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const auto [offset, size] = layout[i];
    values[i].assign(static_cast<unsigned char*>(params.kernelParams[i]),
                     static_cast<unsigned char*>(params.kernelParams[i]) + size);
    for (std::size_t at = (8 - offset % 8) % 8; at + 8 <= size; at += 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, values[i].data() + at, 8);
      if (remap(word, remaps)) {
        std::memcpy(values[i].data() + at, &word, 8);
        ++replaced;
      }
    }
    pointers[i] = values[i].data();
  }
  if (replaced > 0) {
    params.kernelParams = pointers.data();
    params.extra = nullptr;
    CUWEAVE_DRIVER_TRY(driver().graph_kernel_node_set_params(reinterpret_cast<CUgraphNode>(node), &params));
  }
  return replaced;
}

std::size_t replace_in_copy(cudaGraphNode_t node, const std::vector<PointerRemap>& remaps) {
  cudaMemcpy3DParms params{};
  CUWEAVE_CUDA_TRY(cudaGraphMemcpyNodeGetParams(node, &params));
  std::size_t replaced = 0;
  if (!params.srcArray && remap_pointer(params.srcPtr.ptr, remaps)) ++replaced;
  if (!params.dstArray && remap_pointer(params.dstPtr.ptr, remaps)) ++replaced;
  if (replaced > 0) CUWEAVE_CUDA_TRY(cudaGraphMemcpyNodeSetParams(node, &params));
  return replaced;
}

std::size_t replace_in_memset(cudaGraphNode_t node, const std::vector<PointerRemap>& remaps) {
  cudaMemsetParams params{};
  CUWEAVE_CUDA_TRY(cudaGraphMemsetNodeGetParams(node, &params));
  if (!remap_pointer(params.dst, remaps)) return 0;
  CUWEAVE_CUDA_TRY(cudaGraphMemsetNodeSetParams(node, &params));
  return 1;
}

}  // namespace

std::vector<GraphNodeInfo> graph_nodes(cudaGraph_t graph) {
  const std::vector<cudaGraphNode_t> nodes = all_nodes(graph);
  // Kahn's algorithm, taking ready nodes in the runtime's order, so the listing is stable.
  std::map<cudaGraphNode_t, std::vector<cudaGraphNode_t>> dependencies;
  std::map<cudaGraphNode_t, std::size_t> waiting;
  for (cudaGraphNode_t node : nodes) {
    dependencies[node] = dependencies_of(node);
    waiting[node] = dependencies[node].size();
  }
  std::vector<GraphNodeInfo> ordered;
  std::vector<bool> placed(nodes.size(), false);
  while (ordered.size() < nodes.size()) {
    bool progress = false;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (placed[i] || waiting[nodes[i]] != 0) continue;
      placed[i] = true;
      progress = true;
      cudaGraphNodeType type{};
      CUWEAVE_CUDA_TRY(cudaGraphNodeGetType(nodes[i], &type));
      GraphNodeInfo info;
      info.node = nodes[i];
      info.label = node_label(nodes[i], type, info.kind);
      for (cudaGraphNode_t dependency : dependencies[nodes[i]]) info.dependencies.push_back(dependency);
      ordered.push_back(std::move(info));
      for (cudaGraphNode_t other : nodes) {
        for (cudaGraphNode_t dependency : dependencies[other]) {
          if (dependency == nodes[i]) --waiting[other];
        }
      }
    }
    if (!progress) break;  // a cycle cannot be built through the runtime; stop rather than loop
  }
  return ordered;
}

void set_kernel_node_arguments(cudaGraphNode_t node, void** arguments) {
  CUDA_KERNEL_NODE_PARAMS params = kernel_params(node);
  params.kernelParams = arguments;
  params.extra = nullptr;
  CUWEAVE_DRIVER_TRY(driver().graph_kernel_node_set_params(reinterpret_cast<CUgraphNode>(node), &params));
}

namespace {

Repointed replace_pointers_within(cudaGraph_t graph, const std::vector<PointerRemap>& remaps, ParameterLayouts& layouts) {
  Repointed repointed;
  for (cudaGraphNode_t node : all_nodes(graph)) {
    cudaGraphNodeType type{};
    CUWEAVE_CUDA_TRY(cudaGraphNodeGetType(node, &type));
    std::size_t replaced = 0;
    switch (type) {
      case cudaGraphNodeTypeKernel: replaced = replace_in_kernel(node, remaps, layouts); break;
      case cudaGraphNodeTypeMemcpy: replaced = replace_in_copy(node, remaps); break;
      case cudaGraphNodeTypeMemset: replaced = replace_in_memset(node, remaps); break;
      case cudaGraphNodeTypeGraph: {
        cudaGraph_t child = nullptr;
        CUWEAVE_CUDA_TRY(cudaGraphChildGraphNodeGetGraph(node, &child));
        replaced = replace_pointers_within(child, remaps, layouts).pointers;
        break;
      }
      case cudaGraphNodeTypeConditional: {
        const ConditionalRecord* record = conditional_record(node);
        if (!record) {
          throw InvalidArgument(
              "cannot repoint buffers inside a conditional node of a copied graph (a graph replayed inside a "
              "capture, or a child graph): CUDA 13.0 does not say where its bodies are. Capture the conditional "
              "work directly instead");
        }
        for (cudaGraph_t body : record->bodies) replaced += replace_pointers_within(body, remaps, layouts).pointers;
        break;
      }
      default: break;
    }
    if (replaced > 0) {
      repointed.pointers += replaced;
      repointed.nodes.push_back(node);
    }
  }
  return repointed;
}

}  // namespace

Repointed replace_pointers(cudaGraph_t graph, const std::vector<PointerRemap>& remaps) {
  ParameterLayouts layouts;  // Note [Parameter layouts within one walk]
  return replace_pointers_within(graph, remaps, layouts);
}

namespace {

// A node parameter call's status: true when applied, false when CUDA refused the change (the caller falls
// back to the whole executable's update); any other failure throws.
bool applied(cudaError_t status, const char* call) {
  if (status == cudaErrorInvalidValue || status == cudaErrorNotSupported || status == cudaErrorGraphExecUpdateFailure) {
    (void)cudaGetLastError();
    return false;
  }
  if (status != cudaSuccess) throw_cuda_error(status, call, __FILE__, __LINE__);
  return true;
}

// `exec`'s copy of a copy, memset or child graph node takes the parameters `node` has now; `call` names the call.
cudaError_t set_exec_node_params(cudaGraphExec_t exec, cudaGraphNode_t node, cudaGraphNodeType type,
                                 const char*& call) {
  if (type == cudaGraphNodeTypeMemcpy) {
    cudaMemcpy3DParms params{};
    CUWEAVE_CUDA_TRY(cudaGraphMemcpyNodeGetParams(node, &params));
    call = "cudaGraphExecMemcpyNodeSetParams";
    return cudaGraphExecMemcpyNodeSetParams(exec, node, &params);
  }
  if (type == cudaGraphNodeTypeMemset) {
    cudaMemsetParams params{};
    CUWEAVE_CUDA_TRY(cudaGraphMemsetNodeGetParams(node, &params));
    call = "cudaGraphExecMemsetNodeSetParams";
    return cudaGraphExecMemsetNodeSetParams(exec, node, &params);
  }
  cudaGraph_t child = nullptr;  // the child's parameters, its topology unchanged
  CUWEAVE_CUDA_TRY(cudaGraphChildGraphNodeGetGraph(node, &child));
  call = "cudaGraphExecChildGraphNodeSetParams";
  return cudaGraphExecChildGraphNodeSetParams(exec, node, child);
}

}  // namespace

bool update_exec_nodes(cudaGraphExec_t exec, const std::vector<cudaGraphNode_t>& nodes) {
  std::vector<cudaGraphNodeType> types(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    CUWEAVE_CUDA_TRY(cudaGraphNodeGetType(nodes[i], &types[i]));
    const bool reached = types[i] == cudaGraphNodeTypeKernel || types[i] == cudaGraphNodeTypeMemcpy ||
                         types[i] == cudaGraphNodeTypeMemset || types[i] == cudaGraphNodeTypeGraph;
    if (!reached) return false;  // a conditional node: its bodies change only with the whole executable
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (types[i] == cudaGraphNodeTypeKernel) {
      const CUDA_KERNEL_NODE_PARAMS params = kernel_params(nodes[i]);
      const CUresult status = driver().graph_exec_kernel_node_set_params(
          reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUgraphNode>(nodes[i]), &params);
      if (status == CUDA_ERROR_INVALID_VALUE || status == CUDA_ERROR_NOT_SUPPORTED ||
          status == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
        return false;
      }
      CUWEAVE_DRIVER_TRY(status);
      continue;
    }
    const char* call = nullptr;
    if (!applied(set_exec_node_params(exec, nodes[i], types[i], call), call)) return false;
  }
  return true;
}

void remember_conditional(cudaGraphNode_t node, ConditionalKind kind, std::vector<cudaGraph_t> bodies) {
  std::lock_guard<std::mutex> lock(conditionals_mutex());
  conditionals()[node] = ConditionalRecord{kind, std::move(bodies)};
}

void forget_conditionals(cudaGraph_t graph) noexcept {
  {
    std::lock_guard<std::mutex> lock(conditionals_mutex());
    if (conditionals().empty()) return;
  }
  try {
    for (cudaGraphNode_t node : all_nodes(graph)) {
      ConditionalRecord record;
      {
        std::lock_guard<std::mutex> lock(conditionals_mutex());
        auto it = conditionals().find(node);
        if (it == conditionals().end()) continue;
        record = std::move(it->second);
        conditionals().erase(it);
      }
      for (cudaGraph_t body : record.bodies) forget_conditionals(body);  // nested conditionals
    }
  } catch (...) {
    // The graph is going anyway; a record left behind names a node handle CUDA may reuse, which at worst
    // lists or repoints a stale body of a node it no longer describes: never a crash here.
  }
}

}  // namespace cuweave::cuda
