// A vector with its first N elements inside the object (kernel arguments, an operation's arrays): the usual
// call allocates nothing for them.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace cuweave {

// Past N, the elements move to the heap. Movable, not copyable (nothing copies an operation or its arguments).
template <typename T, std::size_t N>
class InlineVector {
 public:
  InlineVector() noexcept {}
  InlineVector(InlineVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>) { take(other); }
  InlineVector& operator=(InlineVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &other) {
      clear();
      heap_ = std::vector<T>();
      take(other);
    }
    return *this;
  }
  InlineVector(const InlineVector&) = delete;
  InlineVector& operator=(const InlineVector&) = delete;
  ~InlineVector() { clear(); }

  T* data() noexcept { return spilled_ ? heap_.data() : inline_data(); }
  const T* data() const noexcept { return spilled_ ? heap_.data() : inline_data(); }
  std::size_t size() const noexcept { return spilled_ ? heap_.size() : size_; }
  bool empty() const noexcept { return size() == 0; }
  T* begin() noexcept { return data(); }
  T* end() noexcept { return data() + size(); }
  const T* begin() const noexcept { return data(); }
  const T* end() const noexcept { return data() + size(); }
  T& operator[](std::size_t i) noexcept { return data()[i]; }
  const T& operator[](std::size_t i) const noexcept { return data()[i]; }

  // Appends `count` copies of `value` (for slots and pointers, whose count is known before packing).
  void append(std::size_t count, const T& value) {
    if (!spilled_ && size_ + count > N) spill(size_ + count);
    if (spilled_) {
      heap_.insert(heap_.end(), count, value);
      return;
    }
    for (std::size_t i = 0; i < count; ++i) new (inline_data() + size_ + i) T(value);
    size_ += count;
  }
  void push_back(T value) {
    if (!spilled_ && size_ == N) spill(2 * N);
    if (spilled_) {
      heap_.push_back(std::move(value));
      return;
    }
    new (inline_data() + size_) T(std::move(value));
    ++size_;
  }
  void clear() noexcept {
    if (spilled_) {
      heap_.clear();
    } else {
      for (std::size_t i = 0; i < size_; ++i) inline_data()[i].~T();
    }
    size_ = 0;
    spilled_ = false;
  }

 private:
  T* inline_data() noexcept { return std::launder(reinterpret_cast<T*>(storage_)); }
  const T* inline_data() const noexcept { return std::launder(reinterpret_cast<const T*>(storage_)); }

  // Moves the inline elements to the heap, with room for `capacity`.
  void spill(std::size_t capacity) {
    heap_.reserve(capacity);
    for (std::size_t i = 0; i < size_; ++i) heap_.push_back(std::move(inline_data()[i]));
    for (std::size_t i = 0; i < size_; ++i) inline_data()[i].~T();
    size_ = 0;
    spilled_ = true;
  }
  // Takes `other`'s elements (this one is empty); `other` is left empty.
  void take(InlineVector& other) {
    if (other.spilled_) {
      heap_ = std::move(other.heap_);
      spilled_ = true;
    } else {
      for (std::size_t i = 0; i < other.size_; ++i) new (inline_data() + i) T(std::move(other.inline_data()[i]));
      size_ = other.size_;
    }
    other.clear();
  }

  alignas(T) unsigned char storage_[N * sizeof(T)];
  std::size_t size_ = 0;  // elements in storage_ (0 once spilled)
  bool spilled_ = false;  // the elements are in heap_
  std::vector<T> heap_;
};

}  // namespace cuweave
