#include "cuweave/owned_stream.hpp"
#include "cuweave/stream_pool.hpp"

#include <algorithm>
#include <string>

#include "cuweave/errors.hpp"
#include "cuweave/interruptible_wait.hpp"
#include "cuweave/stream.hpp"

namespace cuweave {

std::shared_ptr<StreamPool> StreamPool::create(std::size_t size, int device, int priority, bool blocking,
                                               const std::string& name) {
  CUWEAVE_EXPECTS(size > 0, "a StreamPool needs at least one stream; pass size >= 1");
  std::shared_ptr<StreamPool> pool(new StreamPool(device, priority));
  pool->streams_.reserve(size);
  for (std::size_t i = 0; i < size; ++i) {
    pool->streams_.push_back(OwnedStream::create_lent_by_pool(device, priority, blocking, name.empty() ? name : name + "[" + std::to_string(i) + "]"));
  }
  pool->reserved_.assign(size, false);
  return pool;
}

std::shared_ptr<Stream> StreamPool::next() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::size_t step = 0; step < streams_.size(); ++step) {
    const std::size_t index = (cursor_ + step) % streams_.size();
    if (!reserved_[index]) {
      cursor_ = index + 1;
      return streams_[index];
    }
  }
  throw std::runtime_error("all " + std::to_string(streams_.size()) +
                           " streams of this StreamPool are reserved; release a lease or make the pool larger");
}

StreamLease StreamPool::reserve(std::optional<std::chrono::duration<double>> timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      timeout ? Clock::now() + std::chrono::duration_cast<Clock::duration>(*timeout) : Clock::time_point::max();
  std::optional<std::size_t> index;
  wait_interruptibly([&](const WaitSlice& slice) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto find_free = [this]() -> std::optional<std::size_t> {
      for (std::size_t step = 0; step < streams_.size(); ++step) {
        const std::size_t candidate = (cursor_ + step) % streams_.size();
        if (!reserved_[candidate]) return candidate;
      }
      return std::nullopt;
    };
    if (released_.wait_until(lock, std::min(slice.until, deadline), [&] { return (index = find_free()).has_value(); })) {
      reserved_[*index] = true;
      cursor_ = *index + 1;
      return true;
    }
    if (Clock::now() >= deadline) {
      throw Timeout("no stream of this StreamPool was released within " + std::to_string(timeout->count()) +
                    " s; all " + std::to_string(streams_.size()) + " are reserved");
    }
    return false;
  });
  return StreamLease(shared_from_this(), *index, streams_[*index]);
}

std::size_t StreamPool::reserved_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t count = 0;
  for (bool reserved : reserved_) count += reserved ? 1 : 0;
  return count;
}

void StreamPool::release(std::size_t index) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reserved_[index] = false;
  }
  released_.notify_one();
}

StreamLease& StreamLease::operator=(StreamLease&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::move(other.pool_);
    index_ = other.index_;
    stream_ = std::move(other.stream_);
  }
  return *this;
}

void StreamLease::release() noexcept {
  if (pool_) std::exchange(pool_, nullptr)->release(index_);
}

}  // namespace cuweave
