// A vector with its first N elements inside the object (kernel arguments, an operation's arrays): the usual
// call allocates nothing for them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace cuweave {

// Past N, the elements move to a heap block. Movable, not copyable (nothing copies an operation or its arguments).
// The elements are always at data_, inside or on the heap, so that reading the size or an element takes no test of
// where they are: every launch reads these vectors many times.
template <typename T, std::size_t N>
class InlineVector {
  static_assert(std::is_nothrow_move_constructible_v<T>, "elements move between the object and the heap");

 public:
  InlineVector() noexcept : data_(inline_data()) {}
  InlineVector(InlineVector&& other) noexcept : data_(inline_data()) { take(other); }
  InlineVector& operator=(InlineVector&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  InlineVector(const InlineVector&) = delete;
  InlineVector& operator=(const InlineVector&) = delete;
  ~InlineVector() { release(); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }

  // Appends `count` copies of `value` (for slots and pointers, whose count is known before packing).
  void append(std::size_t count, const T& value) {
    if (size_ + count > capacity_) grow(std::max(size_ + count, 2 * capacity_));
    for (std::size_t i = 0; i < count; ++i) new (data_ + size_ + i) T(value);
    size_ += count;
  }
  void push_back(T value) {
    if (size_ == capacity_) grow(2 * capacity_);
    new (data_ + size_) T(std::move(value));
    ++size_;
  }
  // Destroys the elements; a heap block, once needed, is kept for the next ones.
  void clear() noexcept {
    if constexpr (!std::is_trivially_destructible_v<T>) {
      for (std::size_t i = 0; i < size_; ++i) data_[i].~T();
    }
    size_ = 0;
  }

 private:
  T* inline_data() noexcept { return std::launder(reinterpret_cast<T*>(storage_)); }
  bool on_heap() const noexcept { return data_ != std::launder(reinterpret_cast<const T*>(storage_)); }

  // Moves the elements to a heap block with room for `capacity`.
  void grow(std::size_t capacity) {
    T* block = std::allocator<T>().allocate(capacity);
    for (std::size_t i = 0; i < size_; ++i) {
      new (block + i) T(std::move(data_[i]));
      data_[i].~T();
    }
    if (on_heap()) std::allocator<T>().deallocate(data_, capacity_);
    data_ = block;
    capacity_ = capacity;
  }
  // Destroys the elements and gives a heap block back: the elements are inside again, none of them.
  void release() noexcept {
    clear();
    if (on_heap()) std::allocator<T>().deallocate(data_, capacity_);
    data_ = inline_data();
    capacity_ = N;
  }
  // Takes `other`'s elements (this one is empty and inline); `other` is left so.
  void take(InlineVector& other) noexcept {
    if (other.on_heap()) {
      data_ = std::exchange(other.data_, other.inline_data());
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, N);
      return;
    }
    for (std::size_t i = 0; i < other.size_; ++i) new (data_ + i) T(std::move(other.data_[i]));
    size_ = other.size_;
    other.clear();
  }

  alignas(T) unsigned char storage_[N * sizeof(T)];
  T* data_;                  // storage_, or a heap block of capacity_ elements
  std::size_t size_ = 0;
  std::size_t capacity_ = N;
};

}  // namespace cuweave
