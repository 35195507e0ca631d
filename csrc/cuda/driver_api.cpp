#include "cuda/driver_api.hpp"

#include <cuda_runtime.h>

#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

#include "cuda/cuda_check.hpp"

namespace cuweave::cuda {

namespace {

// Each DriverApi member with the driver function it holds, for errors (Note [Driver calls in errors]).
struct Entry {
  const char* member;
  const char* symbol;
};
constexpr Entry kEntries[] = {
    {"module_load_data", "cuModuleLoadData"},
    {"module_unload", "cuModuleUnload"},
    {"module_get_function", "cuModuleGetFunction"},
    {"function_parameter", "cuFuncGetParamInfo"},
    {"kernel_parameter", "cuKernelGetParamInfo"},
    {"function_name", "cuFuncGetName"},
    {"function_module", "cuFuncGetModule"},
    {"kernel_name", "cuKernelGetName"},
    {"function_set_attribute", "cuFuncSetAttribute"},
    {"graph_add_kernel_node", "cuGraphAddKernelNode"},
    {"graph_kernel_node_get_params", "cuGraphKernelNodeGetParams"},
    {"graph_kernel_node_set_params", "cuGraphKernelNodeSetParams"},
    {"graph_exec_kernel_node_set_params", "cuGraphExecKernelNodeSetParams"},
    {"context_get_current", "cuCtxGetCurrent"},
    {"stream_wait_value32", "cuStreamWaitValue32"},
    {"event_record", "cuEventRecord"},
    {"stream_wait_event", "cuStreamWaitEvent"},
    {"device_get", "cuDeviceGet"},
    {"launch_kernel_ex_per_thread", "cuLaunchKernelEx"},
    // GreenContextApi's
    {"device_get_dev_resource", "cuDeviceGetDevResource"},
    {"sm_resource_split_by_count", "cuDevSmResourceSplitByCount"},
    {"dev_resource_generate_desc", "cuDevResourceGenerateDesc"},
    {"green_ctx_create", "cuGreenCtxCreate"},
    {"green_ctx_destroy", "cuGreenCtxDestroy"},
    {"green_ctx_get_dev_resource", "cuGreenCtxGetDevResource"},
    {"green_ctx_stream_create", "cuGreenCtxStreamCreate"},
};

const char* symbol_of(std::string_view member) {
  for (const Entry& entry : kEntries) {
    if (member == entry.member) return entry.symbol;
  }
  throw std::logic_error("driver_api.cpp: no driver function listed for DriverApi::" + std::string(member));
}

template <typename F>
void entry_point(const char* member, F& function, int version = 12040, unsigned long long flags = cudaEnableDefault) {
  const char* symbol = symbol_of(member);
  void* pointer = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CUWEAVE_CUDA_TRY(cudaGetDriverEntryPointByVersion(symbol, &pointer, version, flags, &found));
  if (found != cudaDriverEntryPointSuccess || !pointer) {
    throw_cuda_error(cudaErrorSymbolNotFound, symbol, __FILE__, __LINE__);
  }
  function = reinterpret_cast<F>(pointer);
}

}  // namespace

#define CUWEAVE_DRIVER_ENTRY(api, member) entry_point(#member, (api).member)
#define CUWEAVE_DRIVER_ENTRY_SINCE(api, member, version) entry_point(#member, (api).member, version)

const DriverApi& driver() {
  static const DriverApi api = [] {
    DriverApi a{};
    CUWEAVE_DRIVER_ENTRY(a, module_load_data);
    CUWEAVE_DRIVER_ENTRY(a, module_unload);
    CUWEAVE_DRIVER_ENTRY(a, module_get_function);
    CUWEAVE_DRIVER_ENTRY(a, function_parameter);
    CUWEAVE_DRIVER_ENTRY(a, kernel_parameter);
    CUWEAVE_DRIVER_ENTRY(a, function_name);
    CUWEAVE_DRIVER_ENTRY(a, function_module);
    CUWEAVE_DRIVER_ENTRY(a, kernel_name);
    CUWEAVE_DRIVER_ENTRY(a, function_set_attribute);
    CUWEAVE_DRIVER_ENTRY(a, graph_add_kernel_node);
    CUWEAVE_DRIVER_ENTRY(a, graph_kernel_node_get_params);
    CUWEAVE_DRIVER_ENTRY(a, graph_kernel_node_set_params);
    CUWEAVE_DRIVER_ENTRY(a, graph_exec_kernel_node_set_params);
    CUWEAVE_DRIVER_ENTRY(a, context_get_current);
    CUWEAVE_DRIVER_ENTRY(a, stream_wait_value32);
    CUWEAVE_DRIVER_ENTRY(a, event_record);
    CUWEAVE_DRIVER_ENTRY(a, stream_wait_event);
    CUWEAVE_DRIVER_ENTRY(a, device_get);
    entry_point("launch_kernel_ex_per_thread", a.launch_kernel_ex_per_thread, 12040, cudaEnablePerThreadDefaultStream);
    return a;
  }();
  return api;
}

const GreenContextApi& green_contexts() {
  static const GreenContextApi api = [] {
    GreenContextApi a{};
    CUWEAVE_DRIVER_ENTRY(a, device_get_dev_resource);
    CUWEAVE_DRIVER_ENTRY(a, sm_resource_split_by_count);
    CUWEAVE_DRIVER_ENTRY(a, dev_resource_generate_desc);
    CUWEAVE_DRIVER_ENTRY(a, green_ctx_create);
    CUWEAVE_DRIVER_ENTRY(a, green_ctx_destroy);
    CUWEAVE_DRIVER_ENTRY(a, green_ctx_get_dev_resource);
    CUWEAVE_DRIVER_ENTRY_SINCE(a, green_ctx_stream_create, 12050);
    return a;
  }();
  return api;
}

#undef CUWEAVE_DRIVER_ENTRY
#undef CUWEAVE_DRIVER_ENTRY_SINCE

void check_driver(CUresult result, const char* call, const char* file, int line) {
  if (result == CUDA_SUCCESS) return;
  // `call` is the expression CUWEAVE_DRIVER_TRY was given, "driver().member(...)": errors name the driver
  // function instead (cuEventRecord), as they name runtime functions.
  std::string_view expression(call);
  for (const std::string_view prefix : {std::string_view("driver()."), std::string_view("green_contexts().")}) {
    if (expression.substr(0, prefix.size()) == prefix) {
      const std::string_view member = expression.substr(prefix.size(), expression.find('(', prefix.size()) - prefix.size());
      call = symbol_of(member);
    }
  }
  throw_cuda_error(static_cast<cudaError_t>(result), call, file, line);
}

void make_runtime_context_current() {
  CUWEAVE_CUDA_TRY(cudaFree(nullptr));  // makes the current device's primary context current, as any runtime call
}

}  // namespace cuweave::cuda
