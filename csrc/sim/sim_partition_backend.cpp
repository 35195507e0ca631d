// The simulator's SM partitions (PartitionBackend): CUDA's split rules over the simulated device's SMs, and
// streams made on a partition. The simulator has no SMs to confine kernels to, so on it a partition is
// bookkeeping: its streams run like any other non-blocking stream.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "cuweave/backend.hpp"
#include "sim/handles.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_error.hpp"
#include "sim/sim_facets.hpp"

namespace cuweave::sim {

namespace {

// The rule CUDA gives for compute capability 7.x: at least 2 SMs a partition, in steps of 2; over the
// simulated device's 4 SMs it leaves room for two partitions and shows the rounding.
constexpr unsigned kSimSms = kSimulatedMultiprocessors;
constexpr unsigned kSimMinPartition = 2;
constexpr unsigned kSimAlignment = 2;

struct SimPartition {
  int device = 0;
  unsigned sms = 0;
  std::vector<std::pair<SimStream*, std::uint64_t>> streams;  // made on it: the stream and its never-reused id
};

unsigned rounded(unsigned min_sms) {
  const unsigned at_least = min_sms < kSimMinPartition ? kSimMinPartition : min_sms;
  return (at_least + kSimAlignment - 1) / kSimAlignment * kSimAlignment;
}

class SimPartitionBackend final : public PartitionBackend {
 public:
  SimPartitionBackend(Handles& handles, Scheduler& scheduler) : handles_(handles), scheduler_(scheduler) {}

  SmResources sm_resources(int device) override {
    handles_.checked(device, "cuDeviceGetDevResource");
    return SmResources{kSimSms, kSimMinPartition, kSimAlignment};
  }
  unsigned partitions_that_fit(int device, unsigned min_sms) override {
    handles_.checked(device, "cuDevSmResourceSplitByCount");
    if (min_sms > kSimSms) fail("cuDevSmResourceSplitByCount", kInvalidValue, "minCount exceeds the SM count");
    return kSimSms / rounded(min_sms);
  }
  SmSplit split(int device, unsigned groups, unsigned min_sms) override {
    if (groups > partitions_that_fit(device, min_sms)) {
      fail("cuDevSmResourceSplitByCount", kInvalidValue, "more groups than the SMs hold");
    }
    const unsigned size = rounded(min_sms);
    SmSplit made;
    std::lock_guard<std::mutex> lock(mutex_);
    for (unsigned i = 0; i < groups; ++i) made.groups.push_back(add(device, size));
    const unsigned left = kSimSms - groups * size;
    if (left > 0) made.rest = add(device, left);
    return made;
  }
  unsigned partition_sms(PartitionHandle handle) override { return resolve(handle, "cuGreenCtxGetDevResource")->sms; }
  void destroy_partition(PartitionHandle handle) noexcept override {
    std::unique_lock<std::mutex> lock(mutex_);
    auto* partition = static_cast<SimPartition*>(handle);
    if (!live_.count(partition)) return;
    for (const auto& [stream, id] : partition->streams) {
      if (scheduler_.known(stream) && stream->id == id) {
        // CUDA does not refuse this: it leaks the streams, whose work then runs in a context that is gone.
        std::fprintf(stderr, "cuweave simulator: cuGreenCtxDestroy while a stream made on the green context is "
                             "still alive; CUDA requires its streams destroyed first\n");
        std::abort();
      }
    }
    live_.erase(partition);
    lock.unlock();
    delete partition;
  }
  StreamHandle create_stream(PartitionHandle handle, int priority) override {
    SimPartition* partition = resolve(handle, "cuGreenCtxStreamCreate");
    SimStream* stream = scheduler_.create_stream(partition->device, priority, /*blocking=*/false);
    std::lock_guard<std::mutex> lock(mutex_);
    auto& made = partition->streams;
    made.erase(std::remove_if(made.begin(), made.end(),
                              [&](const auto& entry) { return !scheduler_.known(entry.first) || entry.first->id != entry.second; }),
               made.end());
    made.emplace_back(stream, stream->id);
    return stream;
  }

 private:
  SimPartition* add(int device, unsigned sms) {  // LOCK: mutex_
    auto* partition = new SimPartition{device, sms, {}};
    live_.insert(partition);
    return partition;
  }
  SimPartition* resolve(PartitionHandle handle, const char* call) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto* partition = static_cast<SimPartition*>(handle);
    if (!live_.count(partition)) fail(call, kInvalidResourceHandle, "invalid green context");
    return partition;
  }

  Handles& handles_;
  Scheduler& scheduler_;
  std::mutex mutex_;
  std::set<SimPartition*> live_;  // LOCK: mutex_
};

}  // namespace

std::unique_ptr<PartitionBackend> make_partition_backend(SimState& sim) {
  return std::make_unique<SimPartitionBackend>(sim.handles, sim.scheduler);
}

}  // namespace cuweave::sim
