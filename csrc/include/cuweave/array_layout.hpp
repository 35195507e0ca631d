// Where an array's elements lie: the layout arithmetic of NumPy's views (indexing, reshape, transpose),
// without memory or CUDA.
//
// Note [Views share their base's memory]
// A view (x[2:5], x.T, x.reshape(...), x.view(dtype)) is a new shape and new strides over the bytes of the
// array it was taken from, starting some bytes in. It shares that array's memory, so it keeps it alive
// and its free follows the same stream (Note [Memory follows its stream]); the bytes it names are exactly
// what every operation on it, the sanitizer and the weave see. Its host reads wait for the streams that wrote
// any of its bytes, through any view of the same memory (Note [Host reads follow the writer]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace cuweave {

// Shape, strides (bytes) and the byte offset of element 0 from the memory's start.
struct ArrayLayout {
  std::int64_t offset = 0;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

// One item of a NumPy basic index: x[1], x[a:b:c], x[None], x[...].
struct IndexItem {
  enum class Kind { Integer, Slice, NewAxis, Ellipsis };
  Kind kind = Kind::Integer;
  std::int64_t value = 0;  // Integer
  std::optional<std::int64_t> start, stop;  // Slice; absent as in x[:3] or x[2:]
  std::int64_t step = 1;                    // Slice; never 0
};

// The view `items` selects, as NumPy's basic indexing does (negative integers count from the end, slices
// are clipped). Throws OutOfBounds for an integer outside its axis or too many indices, InvalidArgument for
// a zero step or two ellipses.
ArrayLayout indexed_layout(const ArrayLayout& layout, const std::vector<IndexItem>& items);

// `shape` with at most one -1, resolved against `size` elements; throws InvalidArgument naming both shapes
// when the sizes differ.
std::vector<std::int64_t> resolved_shape(std::vector<std::int64_t> shape, std::size_t size,
                                         const std::vector<std::int64_t>& from);

// Strides for viewing `layout`'s elements in C order as `shape` (same size) without moving them, or nothing
// when no strides can (a transposed or stepped array into a shape that mixes its axes).
std::optional<std::vector<std::int64_t>> reshaped_strides(const ArrayLayout& layout,
                                                          const std::vector<std::int64_t>& shape,
                                                          std::size_t itemsize);

// The axes reordered: axis i of the result is axis order[i] (empty order: reversed, as .T).
ArrayLayout transposed_layout(const ArrayLayout& layout, std::vector<int> order);

// The same bytes as elements of `new_itemsize` bytes: the last axis scales as NumPy's view(dtype) does.
// Throws InvalidArgument when the last axis is not contiguous or its bytes do not divide.
ArrayLayout retyped_layout(const ArrayLayout& layout, std::size_t itemsize, std::size_t new_itemsize);

// The bytes [low, high) from the lowest element to the end of the highest, relative to element 0 (the
// memory's start plus the layout's offset, in the second form); both 0 without elements.
std::pair<std::int64_t, std::int64_t> byte_extent(const std::vector<std::int64_t>& shape,
                                                  const std::vector<std::int64_t>& strides, std::size_t itemsize);
std::pair<std::int64_t, std::int64_t> byte_extent(const ArrayLayout& layout, std::size_t itemsize);

// Elements whose bytes are runs of `width` every `period`, from `begin` to `end` (relative to the memory's start):
// x[::2], a column of a matrix. Nothing for another layout (a contiguous one, or runs at two strides).
struct StepPattern {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t period = 0;
  std::int64_t width = 0;
};
std::optional<StepPattern> step_pattern(const ArrayLayout& layout, std::size_t itemsize);

// The bytes the elements occupy, as sorted, disjoint runs [begin, end) relative to the memory's start, or
// nothing when they form more than `max_runs` runs (a caller then takes the extent: more, never fewer bytes).
std::optional<std::vector<std::pair<std::int64_t, std::int64_t>>> byte_runs(const ArrayLayout& layout,
                                                                           std::size_t itemsize,
                                                                           std::size_t max_runs);

}  // namespace cuweave
