// The backend's SM partitions: a device's streaming multiprocessors split into disjoint sets, each with streams
// of its own whose kernels run only on its SMs (CUDA: green contexts). See Note [SM partitions] in
// sm_partition.hpp.
#pragma once

#include <vector>

#include "cuweave/backend_handles.hpp"

namespace cuweave {

using PartitionHandle = void*;

// What a device's SMs allow: how many there are, the fewest a partition may have, and the step its size is
// rounded up to (CUDA: cuDeviceGetDevResource's minSmPartitionSize and smCoscheduledAlignment).
struct SmResources {
  unsigned sm_count = 0;
  unsigned min_partition_sms = 0;
  unsigned alignment = 1;
};

// The partitions one split made: `groups` of equal size, and the SMs left over (null when none are).
struct SmSplit {
  std::vector<PartitionHandle> groups;
  PartitionHandle rest = nullptr;
};

class PartitionBackend {
 public:
  virtual ~PartitionBackend() = default;
  virtual SmResources sm_resources(int device) = 0;
  // How many partitions of at least `min_sms` SMs the device holds, each rounded up as sm_resources says.
  virtual unsigned partitions_that_fit(int device, unsigned min_sms) = 0;
  // Makes `groups` partitions of at least `min_sms` SMs each (as many as partitions_that_fit allows) and one of
  // the rest. The caller destroys each.
  virtual SmSplit split(int device, unsigned groups, unsigned min_sms) = 0;
  virtual unsigned partition_sms(PartitionHandle partition) = 0;
  // Only after every stream made on it is destroyed and its work has completed.
  virtual void destroy_partition(PartitionHandle partition) noexcept = 0;
  // A non-blocking stream whose kernels run on the partition's SMs.
  virtual StreamHandle create_stream(PartitionHandle partition, int priority) = 0;
};

}  // namespace cuweave
