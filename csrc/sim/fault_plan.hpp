// Note [Injected faults]
// ~~~~~~~~~~~~~~~~~~~~~~
// The simulator can fail backend calls the way CUDA, NCCL and CUPTI fail them, at random but replayably, so that
// the library's handling of failures is explored as a whole rather than one hand-made case at a time
// (FoundationDB's simulation testing is the model). CUWEAVE_SIM_FAULTS=<seed>[:<rate>] at start-up, or
// cuweave.sim.inject_faults(seed, rate), turns it on. Each kind of fault has its sites:
//  * Allocation: device memory (pooled or not) and pinned host memory: cudaErrorMemoryAllocation.
//  * Launch: a built-in kernel's launch, and a graph's, is refused: cudaErrorLaunchOutOfResources (not sticky).
//  * StickyFault: a built-in kernel faults as it runs: cudaErrorIllegalAddress, and the device's context is lost
//    (Note [Simulated device access]): every later call on it fails.
//  * Collective: an NCCL call fails: ncclUnhandledCudaError.
//  * AbsentRank: a rank's part in a collective never arrives (as a hung or dead process's would): the call
//    returns, and every rank waits until its communicator's timeout aborts it (Note [Collective timeouts]).
//  * ToolAttach: a trace cannot attach CUPTI: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, as beside
//    compute-sanitizer or Nsight Systems.
// Whether a site's n-th call fails is a hash of (seed, kind, n) against the rate, so a seed replays the same
// faults in a program that makes its calls in the same order (calls from several threads may interleave
// differently). Every injected fault is logged (kind, call), for a report of what a run met.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cuweave::sim {

enum class FaultKind { Allocation, Launch, StickyFault, Collective, AbsentRank, ToolAttach };
inline constexpr std::size_t kFaultKinds = 6;

const char* fault_kind_name(FaultKind kind);

class FaultPlan {
 public:
  FaultPlan() = default;
  FaultPlan(const FaultPlan&) = delete;
  FaultPlan& operator=(const FaultPlan&) = delete;

  // Starts injecting with `seed` at `rate` (0 < rate <= 1) from each site's next call, counting afresh, at the
  // sites of the kinds named (empty: all); nullopt stops. The log is cleared either way. Throws InvalidArgument
  // for a kind it does not know.
  void configure(std::optional<std::uint64_t> seed, double rate, const std::vector<std::string>& kinds = {});

  // Whether this call at a site of `kind` fails; logs it if so. One relaxed load when faults are off.
  bool strikes(FaultKind kind, const char* call);
  // Throws the error CUDA (or NCCL, or CUPTI) gives for a fault of `kind` in `call`. Not for StickyFault, which
  // the kernel's run reports (DeviceAccess), nor AbsentRank, which the communicator's timeout reports.
  [[noreturn]] static void fail(FaultKind kind, const char* call);

  // The faults injected since the last configure(), in order: (kind, call).
  std::vector<std::pair<std::string, std::string>> injected() const;

 private:
  std::atomic<bool> on_{false};
  mutable std::mutex mutex_;
  std::optional<std::uint64_t> seed_;                   // LOCK: mutex_
  double rate_ = 0;                                     // LOCK: mutex_
  std::array<std::uint64_t, kFaultKinds> calls_{};      // LOCK: mutex_; each kind's calls so far
  std::array<bool, kFaultKinds> chosen_{};              // LOCK: mutex_; the kinds injected
  std::vector<std::pair<std::string, std::string>> injected_;  // LOCK: mutex_
};

}  // namespace cuweave::sim
