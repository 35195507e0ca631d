// Page-locking of memory the caller already owns (cudaHostRegister), for arrays copied again and again.
#pragma once

#include <cstddef>
#include <memory>

#include "cuweave/hold.hpp"

namespace cuweave {

class HostRegistration {
 public:
  // Registers [pointer, pointer + bytes); `owner` keeps the memory alive while registered.
  // Overlapping an existing registration is refused. May block: callers release the GIL.
  static std::shared_ptr<HostRegistration> create(void* pointer, std::size_t bytes, Hold owner);
  // The live registration that contains [pointer, pointer + bytes), or nullptr.
  static std::shared_ptr<HostRegistration> find(const void* pointer, std::size_t bytes);

  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  ~HostRegistration();

  // Waits until no queued work holds this registration, then unregisters. Idempotent.
  // Blocks: callers release the GIL.
  void release();
  bool active() const noexcept { return active_; }
  void* data() const noexcept { return pointer_; }
  std::size_t size() const noexcept { return bytes_; }

 private:
  HostRegistration(void* pointer, std::size_t bytes, Hold owner) noexcept
      : pointer_(pointer), bytes_(bytes), owner_(std::move(owner)) {}

  void* pointer_;
  std::size_t bytes_;
  Hold owner_;
  bool active_ = true;
};

}  // namespace cuweave
