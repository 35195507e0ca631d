// SmPartition: a set of one device's streaming multiprocessors that kernels on its streams are confined to.
//
// Note [SM partitions]
// ~~~~~~~~~~~~~~~~~~~~
// Streams overlap only where the hardware has room: a kernel that fills every SM leaves an all-reduce or a short
// urgent job beside it nothing to run on until its blocks finish, whatever the streams' priorities. A partition
// reserves SMs: kernels on its streams run on its SMs only, so work on another partition always has its own.
// CUDA calls these green contexts; a split makes `groups` partitions of equal size, rounded up to the device's
// step, and one of the SMs left over.
//
// Lifetime: a partition lives while anything refers to it: its Python object, and each stream made on it, which
// hands its reference to the lifetime tracker when it is destroyed, so the partition goes only after the work
// queued on that stream has completed (CUDA requires a green context's streams gone before it).
//
// A partition's streams carry it: calls on them are made with the device's primary context current, as on any
// stream. Making the green context current instead would bind it to one thread at a time (CUDA does not
// synchronize calls through one green context made from several threads), and cuweave's copy and callback
// threads queue work on user streams too.
#pragma once

#include <memory>
#include <vector>

#include "cuweave/partition_backend.hpp"

namespace cuweave {

class SmPartition {
 public:
  // Splits `device`'s SMs: `groups` partitions of at least `min_sms` SMs each, then the rest (if any SMs are
  // left). Throws InvalidArgument when the device cannot hold that many, naming what it can.
  static std::vector<std::shared_ptr<SmPartition>> split(int device, unsigned min_sms, unsigned groups);
  static SmResources resources(int device);
  // SmPartition objects alive in the process (for tests of lifetimes).
  static std::size_t alive() noexcept;

  SmPartition(const SmPartition&) = delete;
  SmPartition& operator=(const SmPartition&) = delete;
  ~SmPartition();

  int device() const noexcept { return device_; }
  unsigned sms() const noexcept { return sms_; }
  // True for the partition of the SMs its split left over.
  bool is_rest() const noexcept { return rest_; }
  PartitionHandle handle() const noexcept { return handle_; }

 private:
  SmPartition(PartitionHandle handle, int device, unsigned sms, bool rest);

  PartitionHandle handle_;
  int device_;
  unsigned sms_;
  bool rest_;
};

}  // namespace cuweave
