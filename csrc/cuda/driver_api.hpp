// The few CUDA driver calls cuweave makes, taken from the driver the runtime has loaded
// (cudaGetDriverEntryPointByVersion), so that cuweave links only the static runtime and imports without
// a driver. See Note [Kernels through the driver].
#pragma once

#include <cuda.h>

namespace cuweave::cuda {

// Note [Kernels through the driver]
// Runtime-compiled kernels are loaded as modules (cuModuleLoadData) and launched as CUfunctions. Loaded
// as libraries (cudaLibraryLoadData, a context-independent CUkernel), they cost more per launch and per
// graph node (measured on an H200: about 0.08 us more host time per replay call and 0.15 us more per node
// of a straight-line graph). The runtime's kernel-node calls know only kernels it registered itself, so
// kernel nodes of any origin (cuweave.compile, PyTorch, CuPy) are read and written through the driver too.
struct DriverApi {
  CUresult (*module_load_data)(CUmodule*, const void*);
  CUresult (*module_unload)(CUmodule);
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*);
  CUresult (*function_parameter)(CUfunction, size_t, size_t*, size_t*);
  CUresult (*kernel_parameter)(CUkernel, size_t, size_t*, size_t*);
  CUresult (*function_name)(const char**, CUfunction);
  CUresult (*function_module)(CUmodule*, CUfunction);
  CUresult (*kernel_name)(const char**, CUkernel);
  CUresult (*function_set_attribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*graph_add_kernel_node)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_KERNEL_NODE_PARAMS*);
  CUresult (*graph_kernel_node_get_params)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
  CUresult (*graph_kernel_node_set_params)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*);
  CUresult (*graph_exec_kernel_node_set_params)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*);
  CUresult (*context_get_current)(CUcontext*);
  CUresult (*stream_wait_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  CUresult (*event_record)(CUevent, CUstream);
  CUresult (*stream_wait_event)(CUstream, CUevent, unsigned int);
  CUresult (*device_get)(CUdevice*, int);
  // cuLaunchKernelEx_ptsz, cuweave's own launches (Note [cuweave's launches beside the launch watch]).
  CUresult (*launch_kernel_ex_per_thread)(const CUlaunchConfig*, CUfunction, void**, void**);
};

// Resolved on first use; throws BackendError if the driver lacks one of them (older than CUDA 12.4).
const DriverApi& driver();

// The calls of SM partitions (green contexts), resolved apart from DriverApi: cuGreenCtxStreamCreate came with
// CUDA 12.5, and a driver without it must still run everything else. Errors name these calls as DriverApi's
// (Note [Driver calls in errors]).
struct GreenContextApi {
  CUresult (*device_get_dev_resource)(CUdevice, CUdevResource*, CUdevResourceType);
  CUresult (*sm_resource_split_by_count)(CUdevResource*, unsigned int*, const CUdevResource*, CUdevResource*,
                                         unsigned int, unsigned int);
  CUresult (*dev_resource_generate_desc)(CUdevResourceDesc*, CUdevResource*, unsigned int);
  CUresult (*green_ctx_create)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned int);
  CUresult (*green_ctx_destroy)(CUgreenCtx);
  CUresult (*green_ctx_get_dev_resource)(CUgreenCtx, CUdevResource*, CUdevResourceType);
  CUresult (*green_ctx_stream_create)(CUstream*, CUgreenCtx, unsigned int, int);
};

// Resolved on first use; throws BackendError naming the missing call if the driver is older than CUDA 12.5.
const GreenContextApi& green_contexts();

// Note [Driver calls in errors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Errors name the failed call as the user would look it up: a driver call made as driver().event_record(...)
// is reported as cuEventRecord (driver_api.cpp lists each member's driver function). Before, the name was
// cut from the expression at its first parenthesis, and every failed driver call was named "driver".
//
// Throws BackendError for a failed driver call (the driver's codes equal the runtime's for these calls).
void check_driver(CUresult result, const char* call, const char* file, int line);

// Note [Hot calls through the driver]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Event records and stream waits go straight to the driver (cuEventRecord, cuStreamWaitEvent), as kernel
// launches do: the runtime's layer over them costs about a quarter of each call (measured on an H100 in raw
// C++, tools/probes/driver_vs_runtime_cost.cu: record 0.33 -> 0.26 us, wait 0.31 -> 0.22 us), and both are
// called in tight loops. Graph launches stay with the runtime: there the driver saved nothing measurable.
// The driver, unlike the runtime, does not make a device's context current on a thread's first call, so a
// call that finds none makes the runtime do that and runs again (run_in_a_context).
void make_runtime_context_current();

// The driver call's result, run again once the runtime has made a context current if the thread had none.
template <typename Call>
CUresult run_in_a_context(Call call) {
  const CUresult status = call();
  if (status != CUDA_ERROR_INVALID_CONTEXT) return status;
  make_runtime_context_current();
  return call();
}

// run_in_a_context, throwing BackendError for a failed call.
template <typename Call>
void call_in_a_context(Call call, const char* expression, const char* file, int line) {
  const CUresult status = run_in_a_context(call);
  if (status != CUDA_SUCCESS) check_driver(status, expression, file, line);
}

}  // namespace cuweave::cuda

#define CUWEAVE_DRIVER_TRY(call) ::cuweave::cuda::check_driver((call), #call, __FILE__, __LINE__)
// CUWEAVE_DRIVER_TRY for a driver call that may be the calling thread's first CUDA call.
#define CUWEAVE_DRIVER_IN_A_CONTEXT(call) \
  ::cuweave::cuda::call_in_a_context([&] { return (call); }, #call, __FILE__, __LINE__)
