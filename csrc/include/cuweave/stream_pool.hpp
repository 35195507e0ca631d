// StreamPool: a fixed set of streams of one device and priority, handed out round-robin or reserved.
//
// The pool owns its streams; callers get shared references (lent: they cannot be closed)
// or a StreamLease, which makes the stream exclusive until the lease is released.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <string>
#include <mutex>
#include <optional>
#include <vector>

namespace cuweave {

class Stream;
class StreamLease;

class StreamPool : public std::enable_shared_from_this<StreamPool> {
 public:
  // `name` names the pool's streams (for traces), each with its index: "name[0]", "name[1]", ...
  static std::shared_ptr<StreamPool> create(std::size_t size, int device, int priority, bool blocking,
                                            const std::string& name = {});

  // The next unreserved stream in round-robin order; throws if every stream is reserved.
  std::shared_ptr<Stream> next();
  // Reserves an unreserved stream, waiting up to `timeout` (forever when empty). Throws Timeout.
  // May block: callers release the GIL.
  StreamLease reserve(std::optional<std::chrono::duration<double>> timeout);

  std::size_t size() const noexcept { return streams_.size(); }
  std::size_t reserved_count() const;
  int device() const noexcept { return device_; }
  int priority() const noexcept { return priority_; }

 private:
  friend class StreamLease;
  StreamPool(int device, int priority) : device_(device), priority_(priority) {}
  void release(std::size_t index) noexcept;

  int device_;
  int priority_;
  std::vector<std::shared_ptr<Stream>> streams_;  // fixed after create()
  mutable std::mutex mutex_;
  std::condition_variable released_;
  std::vector<bool> reserved_;  // LOCK: mutex_
  std::size_t cursor_ = 0;      // LOCK: mutex_
};

// Exclusive use of one pool stream until release() or destruction. Movable, not copyable.
class StreamLease {
 public:
  StreamLease(std::shared_ptr<StreamPool> pool, std::size_t index, std::shared_ptr<Stream> stream) noexcept
      : pool_(std::move(pool)), index_(index), stream_(std::move(stream)) {}
  StreamLease(StreamLease&& other) noexcept = default;
  StreamLease& operator=(StreamLease&& other) noexcept;
  StreamLease(const StreamLease&) = delete;
  StreamLease& operator=(const StreamLease&) = delete;
  ~StreamLease() { release(); }

  const std::shared_ptr<Stream>& stream() const noexcept { return stream_; }
  bool active() const noexcept { return pool_ != nullptr; }
  void release() noexcept;

 private:
  std::shared_ptr<StreamPool> pool_;
  std::size_t index_;
  std::shared_ptr<Stream> stream_;
};

}  // namespace cuweave
