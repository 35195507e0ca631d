#include "cuda/driver_api.hpp"

#include <cuda_runtime.h>

#include "cuda/cuda_check.hpp"

namespace cuweave::cuda {

namespace {

template <typename F>
void entry_point(const char* symbol, F& function) {
  void* pointer = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CUWEAVE_CUDA_TRY(cudaGetDriverEntryPointByVersion(symbol, &pointer, 12040, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || !pointer) {
    throw_cuda_error(cudaErrorSymbolNotFound, symbol, __FILE__, __LINE__);
  }
  function = reinterpret_cast<F>(pointer);
}

}  // namespace

const DriverApi& driver() {
  static const DriverApi api = [] {
    DriverApi a{};
    entry_point("cuModuleLoadData", a.module_load_data);
    entry_point("cuModuleUnload", a.module_unload);
    entry_point("cuModuleGetFunction", a.module_get_function);
    entry_point("cuFuncGetParamInfo", a.function_parameter);
    entry_point("cuKernelGetParamInfo", a.kernel_parameter);
    entry_point("cuFuncGetName", a.function_name);
    entry_point("cuKernelGetName", a.kernel_name);
    entry_point("cuFuncSetAttribute", a.function_set_attribute);
    entry_point("cuLaunchKernel", a.launch_kernel);
    entry_point("cuGraphAddKernelNode", a.graph_add_kernel_node);
    entry_point("cuGraphKernelNodeGetParams", a.graph_kernel_node_get_params);
    entry_point("cuGraphKernelNodeSetParams", a.graph_kernel_node_set_params);
    entry_point("cuCtxGetCurrent", a.context_get_current);
    entry_point("cuStreamWaitValue32", a.stream_wait_value32);
    return a;
  }();
  return api;
}

void check_driver(CUresult result, const char* call, const char* file, int line) {
  if (result != CUDA_SUCCESS) throw_cuda_error(static_cast<cudaError_t>(result), call, file, line);
}

}  // namespace cuweave::cuda
