// The CUDA backend's SM partitions (PartitionBackend): green contexts, made from splits of a device's SM
// resource. See Note [SM partitions] in cuweave/sm_partition.hpp.
#include <cuda.h>

#include <memory>
#include <vector>

#include "cuda/cuda_facets.hpp"
#include "cuda/driver_api.hpp"
#include "cuweave/partition_backend.hpp"

namespace cuweave::cuda {

namespace {

struct CudaPartition {
  CUgreenCtx green = nullptr;
  unsigned sms = 0;
};

CUdevice driver_device(int device) {
  CUdevice handle = 0;
  CUWEAVE_DRIVER_IN_A_CONTEXT(driver().device_get(&handle, device));
  return handle;
}

CUdevResource device_sms(int device) {
  CUdevResource resource{};
  CUWEAVE_DRIVER_IN_A_CONTEXT(green_contexts().device_get_dev_resource(driver_device(device), &resource,
                                                                 CU_DEV_RESOURCE_TYPE_SM));
  return resource;
}

class CudaPartitionBackend final : public PartitionBackend {
 public:
  SmResources sm_resources(int device) override {
    const CUdevResource resource = device_sms(device);
    return SmResources{resource.sm.smCount, resource.sm.minSmPartitionSize, resource.sm.smCoscheduledAlignment};
  }

  unsigned partitions_that_fit(int device, unsigned min_sms) override {
    const CUdevResource input = device_sms(device);
    unsigned groups = 0;
    CUWEAVE_DRIVER_TRY(green_contexts().sm_resource_split_by_count(nullptr, &groups, &input, nullptr, 0, min_sms));
    return groups;
  }

  SmSplit split(int device, unsigned groups, unsigned min_sms) override {
    const CUdevice handle = driver_device(device);
    const CUdevResource input = device_sms(device);
    std::vector<CUdevResource> parts(groups);
    CUdevResource rest{};
    unsigned made = groups;
    CUWEAVE_DRIVER_TRY(green_contexts().sm_resource_split_by_count(parts.data(), &made, &input, &rest, 0, min_sms));
    SmSplit split;
    try {
      for (unsigned i = 0; i < made; ++i) split.groups.push_back(green_context(handle, parts[i]));
      if (rest.type == CU_DEV_RESOURCE_TYPE_SM && rest.sm.smCount > 0) split.rest = green_context(handle, rest);
    } catch (...) {
      for (PartitionHandle partition : split.groups) destroy_partition(partition);
      throw;
    }
    return split;
  }

  unsigned partition_sms(PartitionHandle partition) override { return static_cast<CudaPartition*>(partition)->sms; }

  void destroy_partition(PartitionHandle partition) noexcept override {
    auto* made = static_cast<CudaPartition*>(partition);
    (void)green_contexts().green_ctx_destroy(made->green);  // fails only for a context already lost
    delete made;
  }

  StreamHandle create_stream(PartitionHandle partition, int priority) override {
    CUstream stream = nullptr;
    CUWEAVE_DRIVER_TRY(green_contexts().green_ctx_stream_create(&stream, static_cast<CudaPartition*>(partition)->green,
                                                        CU_STREAM_NON_BLOCKING, priority));
    return stream;
  }

 private:
  static PartitionHandle green_context(CUdevice device, CUdevResource& resource) {
    CUdevResourceDesc description = nullptr;
    CUWEAVE_DRIVER_TRY(green_contexts().dev_resource_generate_desc(&description, &resource, 1));
    auto made = std::make_unique<CudaPartition>();
    CUWEAVE_DRIVER_TRY(green_contexts().green_ctx_create(&made->green, description, device, CU_GREEN_CTX_DEFAULT_STREAM));
    CUdevResource granted{};
    const CUresult status = green_contexts().green_ctx_get_dev_resource(made->green, &granted, CU_DEV_RESOURCE_TYPE_SM);
    if (status != CUDA_SUCCESS) {
      (void)green_contexts().green_ctx_destroy(made->green);
      check_driver(status, "cuGreenCtxGetDevResource", __FILE__, __LINE__);
    }
    made->sms = granted.sm.smCount;
    return made.release();
  }
};

}  // namespace

std::unique_ptr<PartitionBackend> make_partition_backend() { return std::make_unique<CudaPartitionBackend>(); }

}  // namespace cuweave::cuda
