// DeviceArray: a typed, shaped view of device memory, owned by cuweave or by a foreign library.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuweave/array_layout.hpp"
#include "cuweave/hold.hpp"

namespace cuweave {

class ArrayWriters;
class Stream;
struct DeviceAllocation;

// An element type, described as NumPy's array-interface typestr (e.g. "<f4", "|b1").
struct DType {
  char kind = 'u';           // 'b' bool, 'i' signed, 'u' unsigned, 'f' float, 'c' complex
  std::size_t itemsize = 1;  // bytes
  std::string typestr;
  static DType from_typestr(const std::string& typestr);  // throws WrongType for unsupported types
};

class DeviceArray {
 public:
  // Allocates shape x dtype on `stream`'s device, ordered on `stream` (usable there at once).
  static std::shared_ptr<DeviceArray> allocate(std::vector<std::int64_t> shape, DType dtype,
                                               std::shared_ptr<Stream> stream);
  // A view of memory owned elsewhere; `owner` keeps it alive. `strides` in bytes; empty = C-contiguous.
  static std::shared_ptr<DeviceArray> view(void* data, int device, std::vector<std::int64_t> shape,
                                           std::vector<std::int64_t> strides, DType dtype, Hold owner,
                                           std::shared_ptr<Stream> stream, bool readonly);
  // A view of `base`'s memory (Note [Views share their base's memory]): `layout` is relative to base's
  // element 0 and must stay inside base's bytes; `dtype` may differ from base's.
  static std::shared_ptr<DeviceArray> view_of(const std::shared_ptr<DeviceArray>& base, const ArrayLayout& layout,
                                              DType dtype);

  void* data() const noexcept { return data_; }
  int device() const noexcept { return device_; }
  const std::vector<std::int64_t>& shape() const noexcept { return shape_; }
  const std::vector<std::int64_t>& strides() const noexcept { return strides_; }  // bytes
  const DType& dtype() const noexcept { return dtype_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t nbytes() const noexcept { return size_ * dtype_.itemsize; }
  bool contiguous() const noexcept { return contiguous_; }
  bool readonly() const noexcept { return readonly_; }
  // The stream this array's producing work was ordered on; consumers elsewhere must wait for it.
  const std::shared_ptr<Stream>& stream() const noexcept { return stream_; }
  // Makes `stream` the array's stream (the one its producing work is ordered on).
  void set_stream(std::shared_ptr<Stream> stream) noexcept { stream_ = std::move(stream); }
  // Work queued on `stream` writes the array (the bytes [part_begin, part_end) of it; both 0: all of it).
  void written_on(const std::shared_ptr<Stream>& stream, std::uintptr_t part_begin = 0, std::uintptr_t part_end = 0) {
    if (writers_) record_writer(stream, part_begin, part_end);
    if (stream_ != stream) stream_ = stream;
  }
  // The streams whose queued work writes any of the array's bytes, through it or through a view of the same
  // memory (Note [Writers of shared memory]); readers wait for each.
  std::vector<std::shared_ptr<Stream>> writers() const;
  // The array this one views (the first array of its memory), or null.
  const std::shared_ptr<DeviceArray>& base() const noexcept { return base_; }
  // The bytes from the lowest element to the end of the highest (strides may be negative).
  std::pair<std::uintptr_t, std::uintptr_t> byte_span() const noexcept { return span_; }
  // Note [Memory follows its stream]
  // Memory cuweave allocated is freed in the order of one stream, its free stream, so work queued there
  // needs no Hold: the free comes after it. Work on another stream moves the free stream there, and
  // the move holds the memory until the work queued on the old free stream has completed (one event per
  // move, none per operation). Memory owned elsewhere is held by every operation, as before.
  // Call when queueing work on `stream` that uses the array (the submission path does); add what it returns to
  // that work's Holds.
  Holds uses_on(const std::shared_ptr<Stream>& stream);
  // Throws InvalidArgument for graph memory whose graph has not replayed yet, unless `stream` is capturing (Note
  // [Graph memory]): work on it would read nothing, fault, or crash the host.
  void check_graph_memory_made(const Stream& stream) const;
  // Whether any array was ever allocated as graph memory: until then the submission path skips the check above
  // (one atomic load per operation instead of a call per array).
  static bool graph_memory_allocated() noexcept { return graph_memory_allocated_.load(std::memory_order_acquire); }
  // What keeps the memory alive (the allocation, or the foreign owner).
  const Hold& memory_hold() const noexcept { return memory_; }
  // Work just queued on `stream`, another device's, holds this memory (Note [Copies between devices]): its free,
  // in its own device's order, comes once that work has completed, which the sanitizer is told.
  void held_by_peer_work(Stream& stream);

  static std::vector<std::int64_t> contiguous_strides(const std::vector<std::int64_t>& shape,
                                                      std::size_t itemsize);
  // Number of elements; throws InvalidArgument for negative extents or overflow.
  static std::size_t element_count(const std::vector<std::int64_t>& shape);

 private:
  DeviceArray() = default;
  void record_writer(const std::shared_ptr<Stream>& stream, std::uintptr_t part_begin, std::uintptr_t part_end);
  // Sets what follows from the layout, once it is final: whether it is contiguous, and its byte span (asked at
  // every operation by the sanitizer, the weave and the writers).
  void settle_layout();

  static std::atomic<bool> graph_memory_allocated_;  // see graph_memory_allocated()
  void* data_ = nullptr;
  int device_ = 0;
  std::vector<std::int64_t> shape_;
  std::vector<std::int64_t> strides_;
  DType dtype_;
  std::size_t size_ = 0;
  bool readonly_ = false;
  bool contiguous_ = true;
  std::pair<std::uintptr_t, std::uintptr_t> span_{0, 0};  // from the lowest element's first byte to past the highest
  std::shared_ptr<Stream> stream_;
  Hold memory_;
  std::shared_ptr<DeviceAllocation> allocation_;  // null for views of memory owned elsewhere
  std::shared_ptr<DeviceArray> base_;              // null unless a view of a cuweave array
  std::shared_ptr<ArrayWriters> writers_;          // shared by the arrays of one memory, once one has a view
};

}  // namespace cuweave
