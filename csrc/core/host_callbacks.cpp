#include "cuweave/host_callbacks.hpp"

#include <atomic>
#include <thread>

#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/paused_streams.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"

namespace cuweave {

struct HostCallbacks::GraphCallback {
  HostCallbacks* owner;  // whose thread runs it
  std::function<void()> callback;
  std::shared_ptr<CallbackLedger> ledger;
  std::weak_ptr<GraphCallback> self;
  std::string name;
};

struct HostCallbacks::Item {
  HostCallbacks* owner;                    // whose thread runs it
  std::shared_ptr<Stream> stream;          // one-off callbacks
  std::function<void()> callback;
  std::shared_ptr<GraphCallback> replayed;  // a run of a graph's callback
  std::shared_ptr<const TracedRun> traced;  // one-off callbacks launched while traced
  std::string name;
  HostFlagHandle flag = nullptr;  // stream-ordered callbacks: the stream waits for it, raised after the run
  // Note [The wait is queued before the flag is raised]: once the host function is queued, the callback
  // can run, return and raise its flag before launch() has queued the stream's wait for it (an idle
  // stream runs the host function at once). The wait would then read a flag already raised, or already
  // given back (the CUDA backend waits for the value after the one it reads: never reached, the stream
  // hangs), and launch() would read the item after the callback thread deleted it. So the callback
  // thread raises the flag only once launch() says the wait is queued (or failed), and launch() touches
  // the item no more after saying it.
  std::atomic<bool> wait_queued{false};
};

namespace {
// Where runs of callbacks issued now on `stream` go in the open traces; null when none takes them.
std::shared_ptr<const TracedRun> traced_run_for(const Stream& stream) {
  if (!trace::active()) return nullptr;
  trace::Origin origin = trace::current_origin();
  if (!origin) return nullptr;
  return std::make_shared<const TracedRun>(
      TracedRun{std::move(origin), backend().tracer().stream_id(stream.handle(), stream.device()), stream.device()});
}
}  // namespace

thread_local Stream* HostCallbacks::running_stream_ = nullptr;
thread_local bool HostCallbacks::running_ordered_ = false;

void HostCallbacks::launch(const std::shared_ptr<Stream>& stream, std::function<void()> callback, std::string name,
                           bool ordered) {
  if (Capture::any_active()) {
    if (std::shared_ptr<Capture> capture = Capture::of(*stream)) {
      capture->refuse_in_body(*stream, "cudaLaunchHostFunc", "a host callback");
      if (ordered) {
        throw InvalidArgument(
            "a stream-ordered host callback (ordered=True) cannot be captured: the flag the stream waits for is "
            "raised once, and a graph replays; use ordered=False inside a capture (later nodes then do not wait "
            "for it)");
      }
      HostFunction function = nullptr;
      void* user_data = nullptr;
      Hold kept = add_to_graph(capture->callbacks(), std::move(callback), function, user_data, std::move(name));
      on_device_of(*stream, [&] {
        streams_.launch_host_function(stream->handle(), function, user_data);  // captured: a host node
      });
      capture->keep({std::move(kept)});
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    start_locked();
  }
  on_device_of(*stream, [&] {
    auto* item =
        new Item{this, stream, std::move(callback), nullptr, traced_run_for(*stream), std::move(name), nullptr};
    if (ordered) {
      item->flag = streams_.create_host_flag();
      paused_streams::add();  // until the flag is raised (Note [Enqueueing behind a paused stream])
    }
    {
      // Counted before the launch so that a synchronize() racing with this call cannot miss it.
      std::lock_guard<std::mutex> lock(mutex_);
      ++launched_;
      stream->count_host_callback_launched();
    }
    try {
      streams_.launch_host_function(stream->handle(), &HostCallbacks::on_ready, item);
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++finished_count_;
        item->stream->count_host_callback_finished();
      }
      finished_.notify_all();
      if (item->flag) {
        streams_.destroy_host_flag(item->flag);
        paused_streams::remove();
      }
      delete item;
      throw;
    }
    // The item now belongs to the callback thread, which raises the flag after the callable returned and
    // after this wait is queued (Note [The wait is queued before the flag is raised]).
    if (ordered) {
      try {
        streams_.stream_wait_host_flag(stream->handle(), item->flag);
      } catch (...) {
        item->wait_queued.store(true, std::memory_order_release);
        throw;
      }
      item->wait_queued.store(true, std::memory_order_release);
    }
  });
}

Hold HostCallbacks::add_to_graph(const std::shared_ptr<CallbackLedger>& ledger, std::function<void()> callback,
                                 HostFunction& function, void*& user_data, std::string name) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    start_locked();
    ++ledger->callbacks_;
  }
  auto graph_callback =
      std::make_shared<GraphCallback>(GraphCallback{this, std::move(callback), ledger, {}, std::move(name)});
  graph_callback->self = graph_callback;
  function = &HostCallbacks::on_graph_callback_ready;
  user_data = graph_callback.get();
  return graph_callback;
}

void HostCallbacks::replayed(const std::vector<std::shared_ptr<CallbackLedger>>& ledgers,
                             const std::shared_ptr<Stream>& stream) {
  std::shared_ptr<const TracedRun> traced = traced_run_for(*stream);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& ledger : ledgers) {
    for (std::size_t i = 0; i < ledger->callbacks_; ++i) {
      ledger->credits_.push_back(CallbackLedger::Credit{stream, traced});
      ++launched_;
      stream->count_host_callback_launched();
    }
  }
}

void HostCallbacks::replay_failed(const std::vector<std::shared_ptr<CallbackLedger>>& ledgers,
                                  const std::shared_ptr<Stream>& stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& ledger : ledgers) {
      for (std::size_t i = 0; i < ledger->callbacks_ && !ledger->credits_.empty(); ++i) {
        ledger->credits_.pop_back();
        ++finished_count_;
        stream->count_host_callback_finished();
      }
    }
  }
  finished_.notify_all();
}

void HostCallbacks::enqueue(Item* item) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(item);
  } catch (...) {
    delete item;  // out of memory: the callback is dropped rather than run on the backend's thread
    return;
  }
  ready_.notify_one();
}

void HostCallbacks::start_locked() {
  if (started_) return;
  paused_streams::start_releaser();
  std::thread([this] { run(); }).detach();
  started_ = true;
}

void HostCallbacks::on_ready(void* ready) noexcept {
  auto* item = static_cast<Item*>(ready);
  item->owner->enqueue(item);
}

void HostCallbacks::on_graph_callback_ready(void* callback) noexcept {
  // The graph (which owns the callback) outlives its replays, so `self` still locks here.
  std::shared_ptr<GraphCallback> graph_callback = static_cast<GraphCallback*>(callback)->self.lock();
  if (!graph_callback) return;
  HostCallbacks* owner = graph_callback->owner;
  Item* item = new (std::nothrow) Item{owner, nullptr, {}, std::move(graph_callback), nullptr, {}, nullptr};
  if (item) owner->enqueue(item);
}

void HostCallbacks::run() {
  paused_streams::hand_releases_off_this_thread();  // Note [Releases behind a pause]
  while (true) {
    Item* item = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      item = queue_.front();
      queue_.pop_front();
      running_ = true;
    }
    std::shared_ptr<Stream> stream = std::move(item->stream);
    std::shared_ptr<const TracedRun> traced = std::move(item->traced);
    if (item->replayed) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& credits = item->replayed->ledger->credits_;
      if (!credits.empty()) {
        stream = std::move(credits.front().stream);
        traced = std::move(credits.front().traced);
        credits.pop_front();
      }
    }
    running_stream_ = stream.get();
    running_ordered_ = item->flag != nullptr;
    // The binding layer catches and stores the callables' own errors, so the flag is raised after a
    // callable that raised too.
    if (item->replayed) {
      run_traced(item->replayed->callback, traced.get(), item->replayed->name);
    } else {
      run_traced(item->callback, traced.get(), item->name);
    }
    running_stream_ = nullptr;
    running_ordered_ = false;
    if (stream && sanitizer::enabled()) sanitizer::host_callback_returned(*stream);
    if (item->flag) {
      // Microseconds at most, and only when the stream reached the callback before launch() returned.
      while (!item->wait_queued.load(std::memory_order_acquire)) std::this_thread::yield();
      streams_.raise_host_flag(item->flag);
      streams_.destroy_host_flag(item->flag);
      paused_streams::remove();
    }
    delete item;  // may release Python objects: done here, on an ordinary thread
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_ = false;
      if (stream) {  // a run with no credit was never counted as launched
        ++finished_count_;
        stream->count_host_callback_finished();
      }
    }
    finished_.notify_all();
  }
}

void HostCallbacks::run_traced(const std::function<void()>& callback, const TracedRun* traced,
                               const std::string& name) {
  if (!traced) {
    callback();
    return;
  }
  trace::Activity activity;
  activity.kind = trace::Kind::HostCallback;
  activity.name = name;
  activity.device = traced->device;
  activity.stream = traced->stream_id;
  Tracer& tracer = backend().tracer();
  {
    trace::OriginScope issued_inside(traced->origin);  // what the callable queues belongs to the same traces
    activity.start_ns = tracer.now_ns();
    callback();
    activity.end_ns = tracer.now_ns();
  }
  trace::deliver(traced->origin, std::move(activity));
}

std::uint64_t HostCallbacks::launched_on(const Stream& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  return stream.host_callbacks_launched();
}

bool HostCallbacks::wait_for(const Stream& stream, std::uint64_t launched, std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(mutex_);
  return finished_.wait_until(lock, until, [&] { return stopping_ || stream.host_callbacks_finished() >= launched; });
}

std::uint64_t HostCallbacks::launched() {
  std::lock_guard<std::mutex> lock(mutex_);
  return launched_;
}

bool HostCallbacks::wait_for_all(std::uint64_t launched, std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(mutex_);
  return finished_.wait_until(lock, until, [&] { return stopping_ || finished_count_ >= launched; });
}

void HostCallbacks::wait_for_all() { wait_for_all(launched(), std::chrono::steady_clock::time_point::max()); }

void HostCallbacks::shutdown(std::chrono::milliseconds grace) noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true;
  ready_.notify_all();
  finished_.notify_all();
  finished_.wait_for(lock, grace, [this] { return !running_; });
}

}  // namespace cuweave
