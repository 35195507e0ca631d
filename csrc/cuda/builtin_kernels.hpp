// Launchers for cuweave's built-in kernels (builtin_kernels.cu). They return the launch error.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "cuweave/arithmetic.hpp"
#include "cuweave/condition.hpp"
#include "cuweave/strided_copy.hpp"

namespace cuweave::cuda {

cudaError_t launch_fill(void* destination, std::size_t count, const void* pattern, std::size_t pattern_bytes,
                        cudaStream_t stream);
// cudaErrorInvalidValue for an itemsize or ndim strided_copy.hpp does not allow; an empty copy launches nothing.
cudaError_t launch_copy_strided(const StridedCopy& copy, cudaStream_t stream);
cudaError_t launch_spin(std::uint64_t nanoseconds, unsigned blocks, std::uint64_t* start_time,
                        cudaStream_t stream);
// Copies with the SMs; both sides must be reachable from the stream's device (its memory, mapped pinned memory).
cudaError_t launch_copy(void* destination, const void* source, std::size_t bytes, cudaStream_t stream);
cudaError_t launch_arithmetic(const Arithmetic& operation, cudaStream_t stream);
// How many 8-byte partial sums launch_sum needs as scratch for `count` elements.
std::size_t sum_scratch_elements(std::size_t count);
cudaError_t launch_sum(void* out, const void* x, std::size_t count, NumericType type, void* scratch,
                       cudaStream_t stream);
// Sets `condition` (of the graph being captured on `stream`) from rule.element.
cudaError_t launch_set_condition(ConditionHandle condition, const ConditionRule& rule, cudaStream_t stream);
// A graph node running the same kernel once per replay.
cudaError_t add_set_condition_kernel_node(cudaGraphNode_t* node, cudaGraph_t graph, const cudaGraphNode_t* dependencies,
                                          std::size_t count, ConditionHandle condition, const ConditionRule& rule);
// Loads every built-in kernel on the current device now (Note [Loading kernels before a pause]).
cudaError_t load_builtin_kernels();

}  // namespace cuweave::cuda
