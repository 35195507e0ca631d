#include "cuweave/host_registration.hpp"

#include <cstdint>
#include <map>
#include <mutex>

#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/services.hpp"

namespace cuweave {

namespace {
struct Registry {
  std::mutex mutex;
  std::map<std::uintptr_t, std::weak_ptr<HostRegistration>> by_start;  // LOCK: mutex
};

Registry& registry() {
  static auto* instance = new Registry;  // leaked: registrations may end during interpreter exit
  return *instance;
}

std::uintptr_t address(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer); }

// The live registration whose range overlaps [start, end), if any. Caller holds the registry mutex.
std::shared_ptr<HostRegistration> overlapping(Registry& r, std::uintptr_t start, std::uintptr_t end) {
  auto it = r.by_start.lower_bound(end);
  while (it != r.by_start.begin()) {
    --it;
    auto registration = it->second.lock();
    if (!registration || !registration->active()) continue;
    if (address(registration->data()) + registration->size() > start) return registration;
    return nullptr;  // ranges do not overlap each other, so earlier ones end even sooner
  }
  return nullptr;
}
}  // namespace

std::shared_ptr<HostRegistration> HostRegistration::create(void* pointer, std::size_t bytes, Hold owner) {
  if (bytes == 0) {  // nothing to lock: a registration that is already released
    std::shared_ptr<HostRegistration> empty(new HostRegistration(pointer, 0, nullptr));
    empty->active_ = false;
    return empty;
  }
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (overlapping(r, address(pointer), address(pointer) + bytes)) {
      throw InvalidArgument("this memory is already registered by an active cuweave.pinned() block; "
                            "registering it twice is not possible");
    }
  }
  backend().memory().register_host(pointer, bytes);
  // Newly registered memory: the history of whatever used these addresses before does not apply.
  if (sanitizer::enabled()) sanitizer::allocated(pointer, bytes);
  std::shared_ptr<HostRegistration> registration(new HostRegistration(pointer, bytes, std::move(owner)));
  std::lock_guard<std::mutex> lock(r.mutex);
  r.by_start[address(pointer)] = registration;
  return registration;
}

std::shared_ptr<HostRegistration> HostRegistration::find(const void* pointer, std::size_t bytes) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto registration = overlapping(r, address(pointer), address(pointer) + bytes);
  if (registration && address(registration->data()) <= address(pointer) &&
      address(pointer) + bytes <= address(registration->data()) + registration->size()) {
    return registration;
  }
  return nullptr;
}

void HostRegistration::release() {
  if (!active_) return;
  services().lifetimes().wait_for_holders_of(this);
  active_ = false;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.by_start.find(address(pointer_));
    if (it != r.by_start.end() && it->second.lock().get() == this) r.by_start.erase(it);
  }
  backend().memory().unregister_host(pointer_);
  Hold owner = std::move(owner_);  // the memory stays alive for the check below, and goes even if it raises
  if (sanitizer::enabled()) sanitizer::host_waited_for_readers(pointer_, bytes_);
}

HostRegistration::~HostRegistration() {
  if (!active_) return;
  try {
    Registry& r = registry();
    {
      std::lock_guard<std::mutex> lock(r.mutex);
      auto it = r.by_start.find(address(pointer_));
      if (it != r.by_start.end() && it->second.expired()) r.by_start.erase(it);
    }
    // Nothing holds us any more, so no queued work uses the memory.
    backend().memory().unregister_host(pointer_);
  } catch (...) {
    // Destructors never throw; at shutdown the driver may already be gone.
  }
}

}  // namespace cuweave
