// Collectives for the CUDA backend through NCCL (Note [Collectives] in cuweave/collective.hpp), loaded with
// dlopen at the first use (the nvidia-nccl-cu13 wheel, or CUWEAVE_NCCL=/path/to/libnccl.so.2), so cuweave
// imports and runs without it.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "cuweave/collective.hpp"

namespace cuweave::cuda {

// Communicators are NCCL's non-blocking ones (Note [Collective timeouts] in cuweave/communicator.hpp): the
// calls below return while NCCL may go on in its own thread, and nccl_ready says when it is done.
std::string nccl_unique_id();
CommunicatorHandle nccl_join(const std::string& id, int ranks, int rank, int device);
std::vector<CommunicatorHandle> nccl_for_devices(const std::vector<int>& devices);
// False while NCCL is busy (ncclInProgress); throws its error, asynchronous ones included.
bool nccl_ready(CommunicatorHandle communicator);
void nccl_abort(CommunicatorHandle communicator) noexcept;
void nccl_destroy(CommunicatorHandle communicator) noexcept;
void nccl_group_start();
void nccl_group_end();
void nccl_collective(const Collective& collective, CommunicatorHandle communicator, cudaStream_t stream);

}  // namespace cuweave::cuda
