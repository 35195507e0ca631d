#include "cuweave/default_stream.hpp"

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <utility>

namespace cuweave {

// Both default streams are blocking: the per-thread one synchronizes with the legacy one as blocking streams do.
DefaultStream::DefaultStream(StreamHandle handle, int device, Default which)
    : Stream(handle, device, 0, true, Origin{which, false, false}) {}

// Asked by every operation that names no stream, so after the first call it is a lock-free read: each is made once
// and never replaced, and its slot in the leaked map keeps its address, which is published per device.
std::shared_ptr<Stream> DefaultStream::of(int device, Default which) {
  constexpr int kPublishedDevices = 64;
  using Published = std::array<std::atomic<const std::shared_ptr<Stream>*>, kPublishedDevices>;
  static Published legacy{}, per_thread{};
  Published& published = which == Default::Legacy ? legacy : per_thread;
  const bool publishable = device >= 0 && device < kPublishedDevices;
  if (publishable) {
    if (const std::shared_ptr<Stream>* made = published[device].load(std::memory_order_acquire)) return *made;
  }
  // Leaked on purpose: streams referenced from Python may outlive static destruction.
  static auto* mutex = new std::mutex;
  static auto* streams = new std::map<std::pair<int, Default>, std::shared_ptr<Stream>>;
  std::lock_guard<std::mutex> lock(*mutex);
  auto& slot = (*streams)[{device, which}];
  if (!slot) {
    const StreamHandle handle = which == Default::Legacy ? backend().streams().legacy_default_stream()
                                                          : backend().streams().per_thread_default_stream();
    slot = std::shared_ptr<Stream>(new DefaultStream(handle, device, which));
  }
  if (publishable) published[device].store(&slot, std::memory_order_release);
  return slot;
}

std::shared_ptr<Stream> DefaultStream::legacy(int device) { return of(device, Default::Legacy); }

std::shared_ptr<Stream> DefaultStream::per_thread(int device) { return of(device, Default::PerThread); }

}  // namespace cuweave
