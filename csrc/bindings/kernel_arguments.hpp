// Kernel arguments from Python: launch extents and one value slot per kernel parameter, checked against the
// parameter's size. Shared by eager launches (bind_kernel.cpp) and kernel graph nodes (bind_graph.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <string>
#include <vector>

#include "bindings/common.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/kernel.hpp"
#include "cuweave/sanitizer.hpp"

namespace cuweave::bindings {

// An int or a tuple/list of 1 to 3 positive ints; `what` names the argument in errors.
Dim3 dim3_from(py::handle value, const char* what);

// A vector whose first N elements live inside the object: a launch with up to N parameters allocates
// nothing for them. Past N, the elements move to the heap. Movable, not copyable (nothing copies arguments).
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

// Arguments packed for one launch: a value slot per parameter, and what the launch must keep alive.
// Up to kInlineParameters parameters (and device arrays) are stored inside the object, so packing the
// usual launch allocates nothing. pointers[i] points at slots[i] (what a launch's `void**` takes); a
// move re-points them at the new object's slots.
struct PackedArguments {
  static constexpr std::size_t kInlineParameters = 16;
  using Slot = std::array<std::uint64_t, 2>;  // 16 bytes each: every scalar and pointer fits

  PackedArguments() = default;
  PackedArguments(PackedArguments&& other) noexcept
      : slots(std::move(other.slots)),
        pointers(std::move(other.pointers)),
        holds(std::move(other.holds)),
        arrays(std::move(other.arrays)),
        array_parameters(std::move(other.array_parameters)),
        declared(std::move(other.declared)) {
    repoint();
  }
  PackedArguments& operator=(PackedArguments&& other) noexcept {
    slots = std::move(other.slots);
    pointers = std::move(other.pointers);
    holds = std::move(other.holds);
    arrays = std::move(other.arrays);
    array_parameters = std::move(other.array_parameters);
    declared = std::move(other.declared);
    repoint();
    return *this;
  }
  PackedArguments(const PackedArguments&) = delete;
  PackedArguments& operator=(const PackedArguments&) = delete;

  InlineVector<Slot, kInlineParameters> slots;
  InlineVector<void*, kInlineParameters> pointers;  // pointers.data() is the launch's `void** arguments`
  Holds holds;                                       // what the launch's stream must hold until it completes
  InlineVector<std::shared_ptr<DeviceArray>, kInlineParameters> arrays;  // the device arrays passed, in order
  InlineVector<std::size_t, kInlineParameters> array_parameters;         // the parameter each array went to
  // Per array: the access cuweave.reads()/writes() declared for this launch; kUndeclared for none.
  static constexpr std::int8_t kUndeclared = -1;
  InlineVector<std::int8_t, kInlineParameters> declared;

 private:
  void repoint() noexcept {
    for (std::size_t i = 0; i < pointers.size() && i < slots.size(); ++i) pointers[i] = slots[i].data();
  }
};

// An argument wrapped by cuweave.reads(array) or cuweave.writes(array): the array, passed as a pointer, and
// the access that this launch makes of it (Note [Kernel accesses]).
struct DeclaredAccess {
  std::shared_ptr<DeviceArray> array;
  sanitizer::AccessKind kind = sanitizer::AccessKind::Write;
};

// Packs `args_object` (a tuple or list) for `kernel`; device arrays' uses are ordered on `stream`
// (Note [Memory follows its stream]). A null `stream` (graph nodes) orders nothing: holds then gets each
// array's memory_hold(), for whatever runs the arguments to keep. The caller moves the arrays to the
// launch's stream afterwards (set_stream) where that applies.
PackedArguments pack(const Kernel& kernel, py::handle args_object, const std::shared_ptr<Stream>& stream);

// Note [Kernel accesses]
// For the stream-race sanitizer a compiled kernel touches the device arrays passed to it, each whole (the
// bytes from its lowest to its highest element): it reads those passed to a parameter declared read-only
// and reads and writes the others. cuweave.compile() declares the `const T*` parameters of the kernel's
// signature read-only; kernel.read_only declares others; cuweave.reads(a) and cuweave.writes(a) around an
// argument declare it for one launch, over both. What a kernel reaches through raw integer addresses or
// pointers inside structs is not seen. cuweave.weave() orders launches by the same accesses.
std::vector<sanitizer::Access> kernel_accesses(const Kernel& kernel, const PackedArguments& packed);

// The name a sanitizer report gives a launch of `kernel` (its demangled symbol).
std::string kernel_operation_name(const Kernel& kernel);

}  // namespace cuweave::bindings
