// The simulator reports failures as the CUDA backend would: the same error names and codes, so that
// error handling written against one backend works on the other.
#pragma once

#include <string>

#include "cuweave/errors.hpp"

namespace cuweave::sim {

struct CudaLikeError {
  int code;
  const char* name;
};

inline constexpr CudaLikeError kInvalidValue{1, "cudaErrorInvalidValue"};
inline constexpr CudaLikeError kMemoryAllocation{2, "cudaErrorMemoryAllocation"};
inline constexpr CudaLikeError kInvalidDevice{101, "cudaErrorInvalidDevice"};
inline constexpr CudaLikeError kInvalidResourceHandle{400, "cudaErrorInvalidResourceHandle"};
inline constexpr CudaLikeError kIllegalState{401, "cudaErrorIllegalState"};
inline constexpr CudaLikeError kNotReady{600, "cudaErrorNotReady"};
inline constexpr CudaLikeError kHostMemoryAlreadyRegistered{712, "cudaErrorHostMemoryAlreadyRegistered"};
inline constexpr CudaLikeError kHostMemoryNotRegistered{713, "cudaErrorHostMemoryNotRegistered"};
inline constexpr CudaLikeError kNotSupported{801, "cudaErrorNotSupported"};
inline constexpr CudaLikeError kStreamCaptureUnsupported{900, "cudaErrorStreamCaptureUnsupported"};
inline constexpr CudaLikeError kStreamCaptureInvalidated{901, "cudaErrorStreamCaptureInvalidated"};
inline constexpr CudaLikeError kStreamCaptureMerge{902, "cudaErrorStreamCaptureMerge"};
inline constexpr CudaLikeError kStreamCaptureUnmatched{903, "cudaErrorStreamCaptureUnmatched"};
inline constexpr CudaLikeError kStreamCaptureUnjoined{904, "cudaErrorStreamCaptureUnjoined"};
inline constexpr CudaLikeError kStreamCaptureIsolation{905, "cudaErrorStreamCaptureIsolation"};
inline constexpr CudaLikeError kStreamCaptureImplicit{906, "cudaErrorStreamCaptureImplicit"};
inline constexpr CudaLikeError kCapturedEvent{907, "cudaErrorCapturedEvent"};
inline constexpr CudaLikeError kStreamCaptureWrongThread{908, "cudaErrorStreamCaptureWrongThread"};
inline constexpr CudaLikeError kUnknown{999, "cudaErrorUnknown"};
// NCCL's, for the simulated collectives.
inline constexpr CudaLikeError kNcclInvalidArgument{4, "ncclInvalidArgument"};
inline constexpr CudaLikeError kNcclInvalidUsage{5, "ncclInvalidUsage"};
inline constexpr CudaLikeError kNcclRemoteError{6, "ncclRemoteError"};

// What the simulator says where a call needs CUDA C++ compiled for a real device.
inline constexpr const char* kCompiledKernelsNeedGpu =
    "compiled CUDA kernels need the CUDA backend and a GPU; on the simulator use the built-in kernels (cuweave.ops)";

[[noreturn]] inline void fail(const char* call, CudaLikeError error, const std::string& description) {
  throw BackendError(call, error.code, error.name, description + " (cuweave simulator)", __FILE__, __LINE__);
}

// A call only a real device can serve (CUDA C++ compiled for it, interprocess handles): DeviceUnavailable, as the
// CUDA backend raises for GPU-only calls without a usable GPU, with CUDA's code for an unsupported call.
[[noreturn]] inline void fail_needs_gpu(const char* call, const std::string& description) {
  throw DeviceUnavailable(call, kNotSupported.code, kNotSupported.name, description + " (cuweave simulator)",
                          __FILE__, __LINE__);
}

}  // namespace cuweave::sim
