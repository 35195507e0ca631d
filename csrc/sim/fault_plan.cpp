#include "sim/fault_plan.hpp"

#include "cuweave/errors.hpp"
#include "sim/sim_error.hpp"

namespace cuweave::sim {

namespace {

// splitmix64's finalizer: a well-mixed 64-bit hash, so neighbouring (seed, kind, n) give independent draws.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr CudaLikeError kLaunchOutOfResources{701, "cudaErrorLaunchOutOfResources"};
constexpr CudaLikeError kNcclUnhandledCudaError{1, "ncclUnhandledCudaError"};
constexpr CudaLikeError kCuptiMultipleSubscribers{39, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"};

}  // namespace

const char* fault_kind_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::Allocation: return "allocation";
    case FaultKind::Launch: return "launch";
    case FaultKind::StickyFault: return "sticky_fault";
    case FaultKind::Collective: return "collective";
    case FaultKind::AbsentRank: return "absent_rank";
    case FaultKind::ToolAttach: return "tool_attach";
  }
  return "unknown";
}

void FaultPlan::configure(std::optional<std::uint64_t> seed, double rate, const std::vector<std::string>& kinds) {
  std::array<bool, kFaultKinds> chosen{};
  chosen.fill(kinds.empty());
  for (const std::string& name : kinds) {
    bool known = false;
    for (std::size_t i = 0; i < kFaultKinds; ++i) {
      if (name == fault_kind_name(static_cast<FaultKind>(i))) chosen[i] = known = true;
    }
    if (!known) {
      throw InvalidArgument("unknown fault kind '" + name +
                            "': expected allocation, launch, sticky_fault, collective, absent_rank or tool_attach");
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  chosen_ = chosen;
  seed_ = seed;
  rate_ = seed ? rate : 0;
  calls_ = {};
  injected_.clear();
  on_.store(seed.has_value() && rate > 0, std::memory_order_release);
}

bool FaultPlan::strikes(FaultKind kind, const char* call) {
  if (!on_.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!seed_) return false;
  const auto index = static_cast<std::size_t>(kind);
  if (!chosen_[index]) return false;
  const std::uint64_t n = calls_[index]++;
  const std::uint64_t draw = mix(mix(*seed_ ^ mix(index + 1)) ^ n);
  // The top 53 bits as a fraction in [0, 1).
  const double fraction = static_cast<double>(draw >> 11) * (1.0 / 9007199254740992.0);
  if (fraction >= rate_) return false;
  injected_.emplace_back(fault_kind_name(kind), call);
  return true;
}

void FaultPlan::fail(FaultKind kind, const char* call) {
  const std::string injected = "an injected fault (CUWEAVE_SIM_FAULTS)";
  switch (kind) {
    case FaultKind::Allocation:
      sim::fail(call, kMemoryAllocation, "out of memory: " + injected);
    case FaultKind::Launch:
      sim::fail(call, kLaunchOutOfResources, "too many resources requested for launch: " + injected);
    case FaultKind::Collective:
      sim::fail(call, kNcclUnhandledCudaError, "a call to CUDA failed inside NCCL: " + injected);
    case FaultKind::ToolAttach:
      sim::fail(call, kCuptiMultipleSubscribers,
                "another CUDA tool holds CUPTI in this process, e.g. compute-sanitizer, Nsight Systems or a profiler: "
                "a cuweave trace cannot run beside it; " + injected);
    case FaultKind::StickyFault:
    case FaultKind::AbsentRank:
      break;
  }
  sim::fail(call, kUnknown, injected);
}

std::vector<std::pair<std::string, std::string>> FaultPlan::injected() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return injected_;
}

}  // namespace cuweave::sim
