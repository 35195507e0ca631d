#include "sim/device_access.hpp"

#include "cuweave/errors.hpp"

namespace cuweave::sim {

namespace {
constexpr int kIllegalAddress = 700;
constexpr const char* kIllegalAddressName = "cudaErrorIllegalAddress";
}  // namespace

void DeviceAccess::grant_pool(int pool_device, int accessor) {
  std::lock_guard<std::mutex> lock(mutex_);
  pool_grants_.emplace(pool_device, accessor);
}

void DeviceAccess::enable_peer(int device, int peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  peers_.emplace(device, peer);
}

bool DeviceAccess::pool_granted(int pool_device, int accessor) {
  if (pool_device == accessor) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  return pool_grants_.count({pool_device, accessor}) != 0;
}

bool DeviceAccess::kernel_reaches(int device, const MemoryRange& range) {
  if (range.kind != MemoryKind::Device || range.device == device) return true;
  if (range.pooled) return pool_granted(range.device, device);
  std::lock_guard<std::mutex> lock(mutex_);
  return peers_.count({device, range.device}) != 0;
}

void DeviceAccess::lose_context(int device, std::string cause) {
  std::lock_guard<std::mutex> lock(mutex_);
  lost_.emplace(device, cause.empty() ? "touched device memory it cannot reach" : std::move(cause));
  any_lost_.store(true, std::memory_order_release);
}

bool DeviceAccess::context_lost(int device) {
  if (!any_lost_.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_.count(device) != 0;
}

void DeviceAccess::check_context(int device, const char* call) {
  if (!any_lost_.load(std::memory_order_acquire)) return;
  std::unique_lock<std::mutex> lock(mutex_);
  const auto lost = lost_.find(device);
  if (lost == lost_.end()) return;
  std::string first = first_call_;
  if (first.empty()) first_call_ = call;
  const std::string description = "an illegal memory access was encountered: a kernel on device " +
                                  std::to_string(device) + " " + lost->second + " (cuweave simulator)";
  lock.unlock();
  throw ContextLost(call, kIllegalAddress, kIllegalAddressName, description, __FILE__, __LINE__, first,
                    first.empty() ? std::string() : kIllegalAddressName);
}

}  // namespace cuweave::sim
