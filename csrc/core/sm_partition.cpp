// SmPartition: see Note [SM partitions] in sm_partition.hpp.
#include "cuweave/sm_partition.hpp"

#include <atomic>
#include <string>
#include <utility>

#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"

namespace cuweave {

namespace {
std::atomic<std::size_t> partitions_alive{0};

std::string sms_text(unsigned count) { return std::to_string(count) + (count == 1 ? " SM" : " SMs"); }
}  // namespace

SmResources SmPartition::resources(int device) { return backend().partitions().sm_resources(device); }

std::size_t SmPartition::alive() noexcept { return partitions_alive.load(std::memory_order_relaxed); }

std::vector<std::shared_ptr<SmPartition>> SmPartition::split(int device, unsigned min_sms, unsigned groups) {
  PartitionBackend& partitions = backend().partitions();
  const SmResources resources = partitions.sm_resources(device);
  const std::string on_device = "device " + std::to_string(device) + " has " + sms_text(resources.sm_count) +
                                ", split in partitions of at least " + sms_text(resources.min_partition_sms) +
                                " in steps of " + std::to_string(resources.alignment);
  if (groups == 0) throw InvalidArgument("groups must be at least 1");
  if (min_sms == 0 || min_sms > resources.sm_count) {
    throw InvalidArgument("cannot reserve " + sms_text(min_sms) + ": " + on_device);
  }
  const unsigned fit = partitions.partitions_that_fit(device, min_sms);
  if (fit < groups) {
    throw InvalidArgument("cannot make " + std::to_string(groups) + " partitions of at least " + sms_text(min_sms) +
                          ": " + on_device + ", so " + std::to_string(fit) + " fit; ask for fewer groups or SMs");
  }
  SmSplit made = partitions.split(device, groups, min_sms);
  if (made.groups.size() != groups) {  // fewer than the query promised: nothing half made is handed out
    for (PartitionHandle handle : made.groups) partitions.destroy_partition(handle);
    if (made.rest) partitions.destroy_partition(made.rest);
    throw InvalidArgument("device " + std::to_string(device) + " made " + std::to_string(made.groups.size()) +
                          " partitions of at least " + sms_text(min_sms) + " where " + std::to_string(groups) +
                          " were asked for; ask for fewer groups or SMs");
  }
  std::vector<std::shared_ptr<SmPartition>> result;
  result.reserve(made.groups.size() + 1);
  auto adopt = [&](PartitionHandle handle, bool rest) {
    try {
      const unsigned sms = partitions.partition_sms(handle);
      result.push_back(std::shared_ptr<SmPartition>(new SmPartition(handle, device, sms, rest)));
    } catch (...) {
      partitions.destroy_partition(handle);
      throw;
    }
  };
  std::size_t next = 0;
  try {
    for (; next < made.groups.size(); ++next) adopt(made.groups[next], false);
    if (made.rest) adopt(std::exchange(made.rest, nullptr), true);
  } catch (...) {
    // The partitions not yet adopted are still the backend's to destroy (those adopted go with `result`).
    for (std::size_t i = next + 1; i < made.groups.size(); ++i) partitions.destroy_partition(made.groups[i]);
    if (made.rest) partitions.destroy_partition(made.rest);
    throw;
  }
  return result;
}

SmPartition::SmPartition(PartitionHandle handle, int device, unsigned sms, bool rest)
    : handle_(handle), device_(device), sms_(sms), rest_(rest) {
  partitions_alive.fetch_add(1, std::memory_order_relaxed);
}

SmPartition::~SmPartition() {
  backend().partitions().destroy_partition(handle_);
  partitions_alive.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace cuweave
