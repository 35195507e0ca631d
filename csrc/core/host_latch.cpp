// HostLatch (Note [Host latches] in host_latch.hpp).
#include "cuweave/host_latch.hpp"

#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/paused_streams.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"

namespace cuweave {

HostLatch::HostLatch() : flag_(backend().streams().create_host_flag()) {}

HostLatch::~HostLatch() { release(); }

void HostLatch::pause(const std::shared_ptr<Stream>& stream) {
  if (Capture::any_active() && Capture::of(*stream)) {
    throw InvalidArgument(
        "HostLatch.pause cannot be captured: the flag the stream waits for is released once, and a graph "
        "replays; pause the replay stream instead (latch.pause(stream) before graph.replay(stream))");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!flag_) return;  // released: nothing to wait for
  on_device_of(*stream, [&] { backend().streams().stream_wait_host_flag(stream->handle(), flag_); });
  paused_.push_back(stream);
  if (pauses_++ == 0) paused_streams::add();  // until the release (Note [Enqueueing behind a paused stream])
}

void HostLatch::release() noexcept {
  std::vector<std::shared_ptr<Stream>> paused;  // let go after the lock: the last owner destroys a stream
  bool was_pausing = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!flag_) return;
    backend().streams().raise_host_flag(flag_);
    // A raised flag may go back at once: a wait still queued for it stays satisfied (the slot's value
    // only grows; see host_flags.hpp and the simulator's destroy_host_flag).
    backend().streams().destroy_host_flag(flag_);
    flag_ = nullptr;
    was_pausing = pauses_ > 0;
    paused.swap(paused_);
  }
  // Outside the lock: the last pause's end runs releases deferred behind it (Note [Releases behind a pause]).
  if (was_pausing) paused_streams::remove();
}

bool HostLatch::released() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return flag_ == nullptr;
}

int HostLatch::pauses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pauses_;
}

}  // namespace cuweave
