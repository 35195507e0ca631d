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
  CUresult (*kernel_name)(const char**, CUkernel);
  CUresult (*function_set_attribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                            void**, void**);
  CUresult (*graph_add_kernel_node)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_KERNEL_NODE_PARAMS*);
  CUresult (*graph_kernel_node_get_params)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
  CUresult (*graph_kernel_node_set_params)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*);
  CUresult (*context_get_current)(CUcontext*);
  CUresult (*stream_wait_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
};

// Resolved on first use; throws BackendError if the driver lacks one of them (older than CUDA 12.4).
const DriverApi& driver();

// Throws BackendError for a failed driver call (the driver's codes equal the runtime's for these calls).
void check_driver(CUresult result, const char* call, const char* file, int line);

}  // namespace cuweave::cuda

#define CUWEAVE_DRIVER_TRY(call) ::cuweave::cuda::check_driver((call), #call, __FILE__, __LINE__)
