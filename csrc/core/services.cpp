#include "cuweave/services.hpp"

namespace cuweave {

Services::Services(Backend& backend)
    : events_(backend.streams()),
      lifetimes_(backend.streams(), events_),
      pinned_(backend.memory(), lifetimes_),
      host_callbacks_(backend.streams()) {}

HostCopyThreads& Services::copy_threads() {
  std::call_once(copy_threads_made_, [this] { copy_threads_ = HostCopyThreads::sized_from_environment(); });
  return *copy_threads_;
}

Services& services() {
  static auto* made = new Services(backend());  // never destroyed (Note [One owner for the core's services])
  return *made;
}

}  // namespace cuweave
