// Note [Host callbacks off the backend thread]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A callback queued on a stream must run after the work before it. CUDA's host functions run on a driver
// thread that may not call CUDA and that stalls the stream while it runs. A Python callable there would
// need the GIL, and a thread that holds the GIL while enqueueing into a full launch queue would then
// deadlock with it. So the backend's host function only moves the callback onto cuweave's own callback
// thread, which runs callbacks in the order they became ready. Consequences, documented for users: the
// callable may call cuweave (it is an ordinary thread), and later work on the stream does not wait for it.
// Stream::synchronize() waits for the callbacks launched before it, so their effects and errors are seen.
//
// Note [Stream-ordered host callbacks]
// A callback launched with `ordered` has CUDA's semantics: later work on the stream waits until it has
// returned. The backend's host function still only hands it to the callback thread; the stream then
// waits for a host flag (CUDA: cuStreamWaitValue32 on mapped pinned memory) that the callback thread
// raises after the callable returned or raised. No driver thread ever needs the GIL, so a thread that
// holds it while enqueueing cannot deadlock with the callback; a callable must not wait for its own
// stream (refused), nor for work that waits for that stream. A flag is raised once, so ordered
// callbacks cannot be captured into a graph.
//
// A callback captured into a graph (or added as a host node) runs once per replay. The graph's
// CallbackLedger credits each replay's stream with one launch per callback; each run then takes the
// oldest credit. Replays of one executable run one after another, so runs arrive in replay order.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/hold.hpp"
#include "cuweave/trace.hpp"

namespace cuweave {

class Stream;

// Where a callback's run goes in the traces open when it was launched or replayed (Note [Tracing]).
struct TracedRun {
  trace::Origin origin;
  std::uint64_t stream_id = 0;
  int device = 0;
};

// The host callbacks of one graph template and the replays they still owe a run.
class CallbackLedger {
 public:
  std::size_t callbacks() const noexcept { return callbacks_; }

 private:
  friend class HostCallbacks;
  struct Credit {
    std::shared_ptr<Stream> stream;
    std::shared_ptr<const TracedRun> traced;  // null unless traced
  };
  std::size_t callbacks_ = 0;   // set while the graph is built, before any replay
  std::deque<Credit> credits_;  // LOCK: HostCallbacks' mutex; one per run to come
};

class HostCallbacks {
 public:
  // Callbacks on `streams`' streams (their host functions and the flags ordered callbacks raise).
  explicit HostCallbacks(StreamBackend& streams) : streams_(streams) {}
  HostCallbacks(const HostCallbacks&) = delete;
  HostCallbacks& operator=(const HostCallbacks&) = delete;

  // Runs `callback` on the callback thread once all work queued on `stream` so far has completed.
  // `name` labels its runs in traces. With `ordered`, later work on the stream waits until it returned.
  void launch(const std::shared_ptr<Stream>& stream, std::function<void()> callback, std::string name = {},
              bool ordered = false);
  // A callback that a graph runs at each replay: returns what keeps it alive (the graph holds it) and
  // sets `function`/`user_data` for the backend's host node.
  Hold add_to_graph(const std::shared_ptr<CallbackLedger>& ledger, std::function<void()> callback,
                    HostFunction& function, void*& user_data, std::string name = {});
  // A graph with these ledgers was replayed on `stream`: its callbacks count as launched there.
  // Call before launching the graph: a host node may run before the launch returns.
  void replayed(const std::vector<std::shared_ptr<CallbackLedger>>& ledgers, const std::shared_ptr<Stream>& stream);
  // The launch that replayed() announced failed: its runs will never come.
  void replay_failed(const std::vector<std::shared_ptr<CallbackLedger>>& ledgers, const std::shared_ptr<Stream>& stream);
  // How many callbacks were launched on `stream` so far, for wait_for.
  std::uint64_t launched_on(const Stream& stream);
  // Waits until the first `launched` callbacks launched on `stream` have run, or `until` (then false).
  // Call after the stream itself has been synchronized, or it waits for that work too. Callers release the GIL.
  bool wait_for(const Stream& stream, std::uint64_t launched, std::chrono::steady_clock::time_point until);
  // How many callbacks were launched so far (all streams), for wait_for_all.
  std::uint64_t launched();
  // Waits until the first `launched` callbacks have run, or `until` (then false). Callers release the GIL.
  bool wait_for_all(std::uint64_t launched, std::chrono::steady_clock::time_point until);
  // Blocks until every callback launched so far has run (callers release the GIL).
  void wait_for_all();
  // On the callback thread, while a callback runs: the stream it was launched or replayed on.
  static Stream* running_stream() noexcept { return running_stream_; }
  // On the callback thread: whether the running callback is stream-ordered (its stream waits for it).
  static bool running_ordered() noexcept { return running_ordered_; }
  // Stops the callback thread; callbacks not yet run are dropped. For interpreter shutdown: waits up to
  // `grace` for a callback that is running to return, since one that needs the interpreter after it has
  // been finalized would crash the process (callers release the GIL).
  void shutdown(std::chrono::milliseconds grace) noexcept;

 private:
  struct Item;
  struct GraphCallback;
  static void on_ready(void* item) noexcept;  // runs on the backend's thread
  static void on_graph_callback_ready(void* callback) noexcept;  // likewise
  void enqueue(Item* item) noexcept;
  void run();                                 // the callback thread
  // Runs one callback, as a host-callback activity of the traces in `traced` when it is set.
  static void run_traced(const std::function<void()>& callback, const TracedRun* traced, const std::string& name);
  void start_locked();                        // starts the callback thread once; caller holds mutex_

  static thread_local Stream* running_stream_;
  static thread_local bool running_ordered_;
  StreamBackend& streams_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::condition_variable finished_;
  std::deque<Item*> queue_;          // LOCK: mutex_
  std::uint64_t launched_ = 0;       // LOCK: mutex_
  std::uint64_t finished_count_ = 0; // LOCK: mutex_
  bool started_ = false;             // LOCK: mutex_
  bool running_ = false;             // LOCK: mutex_; a callback is running on the callback thread
  bool stopping_ = false;            // LOCK: mutex_
};

}  // namespace cuweave
