// HostLatch (Note [Host latches] in host_latch.hpp).
#include "cuweave/host_latch.hpp"

#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/held_streams.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/stream_device_scope.hpp"

namespace cuweave {

HostLatch::HostLatch() : flag_(backend().streams().create_host_flag()) {}

HostLatch::~HostLatch() { release(); }

void HostLatch::hold(const std::shared_ptr<Stream>& stream) {
  if (Capture::any_active() && Capture::of(*stream)) {
    throw InvalidArgument(
        "HostLatch.hold cannot be captured: the flag the stream waits for is released once, and a graph "
        "replays; hold the replay stream instead (latch.hold(stream) before graph.replay(stream))");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!flag_) return;  // released: nothing to wait for
  const StreamDeviceScope on_device(*stream);
  backend().streams().stream_wait_host_flag(stream->handle(), flag_);
  held_.push_back(stream);
  if (holds_++ == 0) held_streams::add();  // until the release (Note [Enqueueing behind a held stream])
}

void HostLatch::release() noexcept {
  std::vector<std::shared_ptr<Stream>> held;  // let go after the lock: the last owner destroys a stream
  bool was_holding = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!flag_) return;
    backend().streams().raise_host_flag(flag_);
    // A raised flag may go back at once: a wait still queued for it stays satisfied (the slot's value
    // only grows; see host_flags.hpp and the simulator's destroy_host_flag).
    backend().streams().destroy_host_flag(flag_);
    flag_ = nullptr;
    was_holding = holds_ > 0;
    held.swap(held_);
  }
  // Outside the lock: the last hold's end runs releases deferred behind it (Note [Releases behind a hold]).
  if (was_holding) held_streams::remove();
}

bool HostLatch::released() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return flag_ == nullptr;
}

int HostLatch::holds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return holds_;
}

}  // namespace cuweave
