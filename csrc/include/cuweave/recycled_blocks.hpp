// Memory of freed objects of one size, kept for the next ones: for an owner that makes and drops many small
// objects in turn on one thread (a weave makes an operation a step), where malloc's free path was a good part of
// the owner's own work a step.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace cuweave {

// Not thread-safe: its owner's thread alone takes and gives back. Blocks of another size than the first taken go
// to the heap; at most `kKept` freed blocks are kept.
class RecycledBlocks {
 public:
  RecycledBlocks() = default;
  RecycledBlocks(const RecycledBlocks&) = delete;
  RecycledBlocks& operator=(const RecycledBlocks&) = delete;
  ~RecycledBlocks() {
    for (void* block : free_) ::operator delete(block);
  }

  void* take(std::size_t bytes) {
    if (size_ == 0) size_ = bytes;
    if (bytes == size_ && !free_.empty()) {
      void* block = free_.back();
      free_.pop_back();
      return block;
    }
    return ::operator new(bytes);
  }

  void give_back(void* block, std::size_t bytes) noexcept {
    if (bytes == size_ && free_.size() < kKept) {
      try {
        free_.push_back(block);
        return;
      } catch (...) {  // no room to keep it: freed
      }
    }
    ::operator delete(block);
  }

 private:
  static constexpr std::size_t kKept = 4096;
  std::size_t size_ = 0;
  std::vector<void*> free_;
};

}  // namespace cuweave
