// Note [Host callbacks off the backend thread]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A callback queued on a stream must run after the work before it. CUDA's host functions run on a driver
// thread that may not call CUDA and that stalls the stream while it runs. A Python callable there would
// need the GIL, and a thread that holds the GIL while enqueueing into a full launch queue would then
// deadlock with it. So the backend's host function only moves the callback onto cuweave's own callback
// thread, which runs callbacks in the order they became ready. Consequences, documented for users: the
// callable may call cuweave (it is an ordinary thread), and later work on the stream does not wait for it.
// Stream::synchronize() waits for the callbacks launched before it, so their effects and errors are seen.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace cuweave {

class Stream;

class HostCallbacks {
 public:
  static HostCallbacks& instance();

  // Runs `callback` on the callback thread once all work queued on `stream` so far has completed.
  void launch(const std::shared_ptr<Stream>& stream, std::function<void()> callback);
  // Blocks until every callback launched on `stream` before this call has run (callers release the GIL).
  // Call after the stream itself has been synchronized, or it waits for that work too.
  void wait_for(const Stream& stream);
  // Blocks until every callback launched so far has run (callers release the GIL).
  void wait_for_all();
  // Stops the callback thread; callbacks not yet run are dropped. For interpreter shutdown.
  void shutdown() noexcept;

 private:
  struct Item;
  static void on_ready(void* item) noexcept;  // runs on the backend's thread
  void run();                                 // the callback thread

  std::mutex mutex_;
  std::condition_variable ready_;
  std::condition_variable finished_;
  std::deque<Item*> queue_;          // LOCK: mutex_
  std::uint64_t launched_ = 0;       // LOCK: mutex_
  std::uint64_t finished_count_ = 0; // LOCK: mutex_
  bool started_ = false;             // LOCK: mutex_
  bool stopping_ = false;            // LOCK: mutex_
};

}  // namespace cuweave
