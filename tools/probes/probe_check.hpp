// probe_check.hpp -- what the CUDA probes in this folder share: every CUDA call checked, a failure printed with
// the call, the error's name and the place, then exit 1.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

inline void probe_check(bool ok, const char* call, const char* error, const char* file, int line) {
    if (ok) return;
    std::fprintf(stderr, "%s failed: %s (%s:%d)\n", call, error, file, line);
    std::exit(1);
}

// A runtime call.
#define CHECK(call)                                                                                        \
    do {                                                                                                   \
        const cudaError_t e = (call);                                                                      \
        probe_check(e == cudaSuccess, #call, e == cudaSuccess ? "" : cudaGetErrorName(e), __FILE__, __LINE__); \
    } while (0)

// A driver call (its codes equal the runtime's for the calls the probes make).
#define DRIVER_CHECK(call)                                                                                  \
    do {                                                                                                    \
        const CUresult r = (call);                                                                          \
        probe_check(r == CUDA_SUCCESS, #call, r == CUDA_SUCCESS ? "" : cudaGetErrorName(cudaError_t(r)), __FILE__, \
                    __LINE__);                                                                              \
    } while (0)

// The launch configuration of one thread in one block on `stream`, for the cuLaunchKernelEx forms.
inline CUlaunchConfig one_thread_on(CUstream stream) {
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    config.hStream = stream;
    return config;
}

// The driver's entry point `symbol` in its legacy or per-thread-default-stream form (`flags`, a
// CU_GET_PROC_ADDRESS_* value), as of CUDA 12.0.
template <typename F>
void driver_entry(const char* symbol, cuuint64_t flags, F& function) {
    CUdriverProcAddressQueryResult found;
    DRIVER_CHECK(cuGetProcAddress(symbol, reinterpret_cast<void**>(&function), 12000, flags, &found));
    probe_check(found == CU_GET_PROC_ADDRESS_SUCCESS && function != nullptr, symbol, "no entry point", __FILE__,
                __LINE__);
}
