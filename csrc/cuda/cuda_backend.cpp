// The CUDA backend: the only code in cuweave that calls the CUDA runtime. Its facets (Note [Backend facets] in
// cuweave/backend.hpp) live in cuda_<facet>_backend.cpp; here they are made once and put together.
#include <memory>

#include "cuda/active_captures.hpp"
#include "cuda/cuda_facets.hpp"
#include "cuda/cupti_tracer.hpp"
#include "cuweave/backend.hpp"

namespace cuweave::cuda {

namespace {

// The facets and the state they share; members are made in order, each after those it is given.
struct CudaFacets {
  ActiveCaptures captures;
  std::unique_ptr<DeviceBackend> devices = make_device_backend();
  std::unique_ptr<StreamBackend> streams = make_stream_backend(captures);
  std::unique_ptr<MemoryBackend> memory = make_memory_backend(captures);
  std::unique_ptr<KernelBackend> kernels = make_kernel_backend(captures, *devices, *memory);
  std::unique_ptr<GraphBackend> graphs = make_graph_backend();
  std::unique_ptr<CaptureBackend> capture = make_capture_backend(captures, *graphs);
  std::unique_ptr<CollectiveBackend> collectives = make_collective_backend(captures, *streams);
  std::unique_ptr<PartitionBackend> partitions = make_partition_backend();
  Backend backend{"cuda", BackendFacets{devices.get(), streams.get(), memory.get(), kernels.get(), capture.get(),
                                        graphs.get(), &cupti_tracer(), collectives.get(), partitions.get()}};
};

}  // namespace
}  // namespace cuweave::cuda

namespace cuweave {

Backend& cuda_backend() {
  static auto* instance = new cuda::CudaFacets;  // leaked: used until the process ends
  return instance->backend;
}

}  // namespace cuweave
