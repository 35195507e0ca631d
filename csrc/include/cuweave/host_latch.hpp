// HostLatch: a latch the host releases; streams it pauses run their later work only after the release.
//
// Note [Host latches]
// latch.pause(stream) queues a wait for a host flag on the stream (the CUDA backend: cuStreamWaitValue32 on
// mapped pinned memory, the mechanism of Note [Stream-ordered host callbacks]); release() raises the flag.
// No thread is occupied while a stream is paused: not cuweave's callback thread, not a driver thread, and
// the GIL is free. What it is for:
// - queue a burst of work and let it start at once, so that the device runs it without launch gaps (a
//   measurement of device time alone, what nvbench's blocking kernel does);
// - keep work pending for exactly as long as a test needs (pending by construction, not by a duration).
// A flag's wait compares with the value it had when the wait was queued, so pause() and release() take one
// lock: a pause racing with the release can never wait for the raise after it. Pausing with a released latch
// pauses nothing. A latch is released when its last owner lets go, so a forgotten one never pauses a stream
// forever. It keeps the streams it pauses alive until the release, as a stream-ordered callback keeps its
// stream: a paused stream is never destroyed before the work queued on it can run. A pause cannot be captured
// (the value is fixed when the graph is built, and a graph replays).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "cuweave/backend.hpp"

namespace cuweave {

class Stream;

class HostLatch {
 public:
  HostLatch();
  HostLatch(const HostLatch&) = delete;
  HostLatch& operator=(const HostLatch&) = delete;
  ~HostLatch();

  // Later work on `stream` waits until release(). Throws when the stream is being captured.
  void pause(const std::shared_ptr<Stream>& stream);
  // Lets every paused stream go on (idempotent; never blocks).
  void release() noexcept;
  bool released() const;
  // How many pause() calls have queued a wait (pauses with a released latch are not counted).
  int pauses() const;

 private:
  mutable std::mutex mutex_;
  HostFlagHandle flag_;    // LOCK: mutex_ (null once released and given back)
  int pauses_ = 0;         // LOCK: mutex_
  std::vector<std::shared_ptr<Stream>> paused_;  // LOCK: mutex_; dropped after the release
};

}  // namespace cuweave
