#include "cuweave/host_callbacks.hpp"

#include "cuweave/backend.hpp"
#include "cuweave/stream.hpp"

namespace cuweave {

struct HostCallbacks::Item {
  std::shared_ptr<Stream> stream;
  std::function<void()> callback;
};

HostCallbacks& HostCallbacks::instance() {
  static auto* callbacks = new HostCallbacks;  // leaked: its thread may outlive static destruction
  return *callbacks;
}

void HostCallbacks::launch(const std::shared_ptr<Stream>& stream, std::function<void()> callback) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_) {
      std::thread([this] { run(); }).detach();
      started_ = true;
    }
  }
  auto* item = new Item{stream, std::move(callback)};
  {
    // Counted before the launch so that a synchronize() racing with this call cannot miss it.
    std::lock_guard<std::mutex> lock(mutex_);
    ++launched_;
    stream->count_host_callback_launched();
  }
  try {
    backend().launch_host_function(stream->handle(), &HostCallbacks::on_ready, item);
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++finished_count_;
      item->stream->count_host_callback_finished();
    }
    finished_.notify_all();
    delete item;
    throw;
  }
}

void HostCallbacks::on_ready(void* item) noexcept {
  HostCallbacks& self = instance();
  try {
    std::lock_guard<std::mutex> lock(self.mutex_);
    self.queue_.push_back(static_cast<Item*>(item));
  } catch (...) {
    return;  // out of memory: the callback is dropped rather than run on the backend's thread
  }
  self.ready_.notify_one();
}

void HostCallbacks::run() {
  while (true) {
    Item* item = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      item = queue_.front();
      queue_.pop_front();
    }
    item->callback();  // the binding layer catches and stores its own errors
    std::shared_ptr<Stream> stream = std::move(item->stream);
    delete item;  // may release Python objects: done here, on an ordinary thread
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++finished_count_;
      stream->count_host_callback_finished();
    }
    finished_.notify_all();
  }
}

void HostCallbacks::wait_for(const Stream& stream) {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t target = stream.host_callbacks_launched();
  finished_.wait(lock, [&] { return stopping_ || stream.host_callbacks_finished() >= target; });
}

void HostCallbacks::wait_for_all() {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t target = launched_;
  finished_.wait(lock, [&] { return stopping_ || finished_count_ >= target; });
}

void HostCallbacks::shutdown() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  finished_.notify_all();
}

}  // namespace cuweave
