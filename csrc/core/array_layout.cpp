#include "cuweave/array_layout.hpp"

#include <algorithm>
#include <string>

#include "cuweave/errors.hpp"

namespace cuweave {

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// Python's slice.indices(): the first index and the count a slice selects on an axis of `length`.
std::pair<std::int64_t, std::int64_t> slice_span(const IndexItem& slice, std::int64_t length) {
  const std::int64_t step = slice.step;
  auto clip = [&](std::optional<std::int64_t> given, std::int64_t missing) {
    if (!given) return missing;
    std::int64_t index = *given;
    if (index < 0) {
      index += length;
      if (index < 0) index = step < 0 ? -1 : 0;
    } else if (index >= length) {
      index = step < 0 ? length - 1 : length;
    }
    return index;
  };
  const std::int64_t start = clip(slice.start, step < 0 ? length - 1 : 0);
  const std::int64_t stop = clip(slice.stop, step < 0 ? -1 : length);
  std::int64_t count = 0;
  if (step > 0 && start < stop) count = (stop - start - 1) / step + 1;
  if (step < 0 && stop < start) count = (start - stop - 1) / (-step) + 1;
  return {start, count};
}

}  // namespace

ArrayLayout indexed_layout(const ArrayLayout& layout, const std::vector<IndexItem>& items) {
  const auto ndim = static_cast<std::int64_t>(layout.shape.size());
  std::int64_t consumed = 0;
  int ellipses = 0;
  for (const IndexItem& item : items) {
    if (item.kind == IndexItem::Kind::Integer || item.kind == IndexItem::Kind::Slice) ++consumed;
    if (item.kind == IndexItem::Kind::Ellipsis) ++ellipses;
    if (item.kind == IndexItem::Kind::Slice && item.step == 0) throw InvalidArgument("slice step cannot be zero");
  }
  if (ellipses > 1) throw OutOfBounds("an index can only have a single ellipsis ('...')");
  if (consumed > ndim) {
    throw OutOfBounds("too many indices for array: array is " + std::to_string(ndim) + "-dimensional, but " +
                      std::to_string(consumed) + " were indexed");
  }
  ArrayLayout result{layout.offset, {}, {}};
  std::int64_t axis = 0;
  auto keep_whole_axes = [&](std::int64_t count) {
    for (std::int64_t i = 0; i < count; ++i, ++axis) {
      result.shape.push_back(layout.shape[axis]);
      result.strides.push_back(layout.strides[axis]);
    }
  };
  for (const IndexItem& item : items) {
    switch (item.kind) {
      case IndexItem::Kind::Ellipsis: keep_whole_axes(ndim - consumed); break;
      case IndexItem::Kind::NewAxis:
        result.shape.push_back(1);
        result.strides.push_back(0);
        break;
      case IndexItem::Kind::Integer: {
        const std::int64_t length = layout.shape[axis];
        const std::int64_t index = item.value < 0 ? item.value + length : item.value;
        if (index < 0 || index >= length) {
          throw OutOfBounds("index " + std::to_string(item.value) + " is out of bounds for axis " +
                            std::to_string(axis) + " with size " + std::to_string(length));
        }
        result.offset += index * layout.strides[axis];
        ++axis;
        break;
      }
      case IndexItem::Kind::Slice: {
        const auto [start, count] = slice_span(item, layout.shape[axis]);
        if (count > 0) result.offset += start * layout.strides[axis];
        result.shape.push_back(count);
        result.strides.push_back(item.step * layout.strides[axis]);
        ++axis;
        break;
      }
    }
  }
  keep_whole_axes(ndim - axis);  // axes no index named are taken whole, as NumPy does
  return result;
}

std::vector<std::int64_t> resolved_shape(std::vector<std::int64_t> shape, std::size_t size,
                                         const std::vector<std::int64_t>& from) {
  std::int64_t known = 1;
  int unknown = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (unknown >= 0) throw InvalidArgument("can only specify one unknown dimension (-1) in a new shape");
      unknown = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw InvalidArgument("negative dimensions are not allowed in a new shape (got " + shape_text(shape) + ")");
    } else {
      known *= shape[i];
    }
  }
  const auto total = static_cast<std::int64_t>(size);
  if (unknown >= 0 && known != 0 && total % known == 0) shape[unknown] = total / known;
  if ((unknown >= 0 && shape[unknown] == -1) || (unknown < 0 && known != total)) {
    throw InvalidArgument("cannot reshape array of size " + std::to_string(size) + " (shape " + shape_text(from) +
                          ") into shape " + shape_text(shape));
  }
  return shape;
}

std::optional<std::vector<std::int64_t>> reshaped_strides(const ArrayLayout& layout,
                                                          const std::vector<std::int64_t>& shape,
                                                          std::size_t itemsize) {
  // NumPy's no-copy reshape: old axes of extent 1 do not matter; each group of old axes that multiplies
  // to a group of new axes must be contiguous in C order within itself.
  std::vector<std::int64_t> old_shape, old_strides;
  for (std::size_t i = 0; i < layout.shape.size(); ++i) {
    if (layout.shape[i] == 0) {  // no elements: any strides describe them
      std::vector<std::int64_t> strides(shape.size());
      std::int64_t stride = static_cast<std::int64_t>(itemsize);
      for (std::size_t k = shape.size(); k-- > 0;) {
        strides[k] = stride;
        stride *= std::max<std::int64_t>(shape[k], 1);
      }
      return strides;
    }
    if (layout.shape[i] != 1) {
      old_shape.push_back(layout.shape[i]);
      old_strides.push_back(layout.strides[i]);
    }
  }
  const std::size_t old_ndim = old_shape.size(), new_ndim = shape.size();
  std::vector<std::int64_t> strides(new_ndim, 0);
  std::size_t old_first = 0, old_next = 1, new_first = 0, new_next = 1;
  while (new_first < new_ndim && old_first < old_ndim) {
    std::int64_t new_product = shape[new_first], old_product = old_shape[old_first];
    while (new_product != old_product) {
      if (new_product < old_product) {
        new_product *= shape[new_next++];
      } else {
        old_product *= old_shape[old_next++];
      }
    }
    for (std::size_t k = old_first; k + 1 < old_next; ++k) {
      if (old_strides[k] != old_shape[k + 1] * old_strides[k + 1]) return std::nullopt;
    }
    strides[new_next - 1] = old_strides[old_next - 1];
    for (std::size_t k = new_next - 1; k > new_first; --k) strides[k - 1] = strides[k] * shape[k];
    new_first = new_next++;
    old_first = old_next++;
  }
  const std::int64_t last = new_first >= 1 ? strides[new_first - 1] : static_cast<std::int64_t>(itemsize);
  for (std::size_t k = new_first; k < new_ndim; ++k) strides[k] = last;  // trailing axes of extent 1
  return strides;
}

ArrayLayout transposed_layout(const ArrayLayout& layout, std::vector<int> order) {
  const int ndim = static_cast<int>(layout.shape.size());
  if (order.empty()) {
    for (int axis = ndim - 1; axis >= 0; --axis) order.push_back(axis);
  }
  if (static_cast<int>(order.size()) != ndim) {
    throw InvalidArgument("transpose takes one axis per dimension: the array has " + std::to_string(ndim) +
                          ", " + std::to_string(order.size()) + " were given");
  }
  std::vector<bool> seen(ndim, false);
  ArrayLayout result{layout.offset, {}, {}};
  for (int axis : order) {
    const int resolved = axis < 0 ? axis + ndim : axis;
    if (resolved < 0 || resolved >= ndim) {
      throw OutOfBounds("axis " + std::to_string(axis) + " is out of bounds for an array of dimension " +
                        std::to_string(ndim));
    }
    if (seen[resolved]) throw InvalidArgument("repeated axis " + std::to_string(axis) + " in transpose");
    seen[resolved] = true;
    result.shape.push_back(layout.shape[resolved]);
    result.strides.push_back(layout.strides[resolved]);
  }
  return result;
}

ArrayLayout retyped_layout(const ArrayLayout& layout, std::size_t itemsize, std::size_t new_itemsize) {
  if (new_itemsize == itemsize) return layout;
  if (layout.shape.empty()) {
    throw InvalidArgument("a 0-d array cannot be viewed as a dtype of another size; reshape it to (1,) first");
  }
  ArrayLayout result = layout;
  const std::int64_t last = layout.shape.back();
  const auto bytes = static_cast<std::int64_t>(itemsize) * last;
  if (last != 1 && layout.strides.back() != static_cast<std::int64_t>(itemsize)) {
    throw InvalidArgument("to view an array as a dtype of another size its last axis must be contiguous; "
                          "make it so with .copy()");
  }
  if (bytes % static_cast<std::int64_t>(new_itemsize) != 0) {
    throw InvalidArgument("the last axis holds " + std::to_string(bytes) + " bytes, which do not divide into " +
                          std::to_string(new_itemsize) + "-byte elements");
  }
  result.shape.back() = bytes / static_cast<std::int64_t>(new_itemsize);
  result.strides.back() = static_cast<std::int64_t>(new_itemsize);
  return result;
}

std::pair<std::int64_t, std::int64_t> byte_extent(const std::vector<std::int64_t>& shape,
                                                  const std::vector<std::int64_t>& strides, std::size_t itemsize) {
  std::int64_t low = 0, high = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return {0, 0};
    const std::int64_t reach = (shape[d] - 1) * strides[d];
    (reach < 0 ? low : high) += reach;
  }
  return {low, high + static_cast<std::int64_t>(itemsize)};
}

std::pair<std::int64_t, std::int64_t> byte_extent(const ArrayLayout& layout, std::size_t itemsize) {
  const auto [low, high] = byte_extent(layout.shape, layout.strides, itemsize);
  return {layout.offset + low, layout.offset + high};
}

namespace {

// The set of bytes does not depend on the axes' order or direction, nor on axes that repeat bytes: each axis is
// turned to a positive stride, those of extent 1 or stride 0 dropped, the rest sorted outermost first, and the
// inner axes that continue a run without a gap joined into it.
struct RunAxes {
  std::int64_t start = 0;                              // the lowest element's first byte
  std::int64_t run = 0;                                // the bytes of one run
  std::vector<std::pair<std::int64_t, std::int64_t>> axes;  // (stride, extent), outermost first
  bool empty = false;                                  // an axis of extent 0: no bytes
};

RunAxes run_axes(const ArrayLayout& layout, std::size_t itemsize) {
  RunAxes r;
  r.start = layout.offset;
  for (std::size_t d = 0; d < layout.shape.size(); ++d) {
    const std::int64_t extent = layout.shape[d], stride = layout.strides[d];
    if (extent == 0) {
      r.empty = true;
      return r;
    }
    if (stride < 0) r.start += (extent - 1) * stride;
    if (extent > 1 && stride != 0) r.axes.emplace_back(stride < 0 ? -stride : stride, extent);
  }
  std::sort(r.axes.begin(), r.axes.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  r.run = static_cast<std::int64_t>(itemsize);
  while (!r.axes.empty() && r.axes.back().first <= r.run) {
    r.run = std::max(r.run, r.axes.back().first * (r.axes.back().second - 1) + r.run);
    r.axes.pop_back();
  }
  return r;
}

}  // namespace

std::optional<StepPattern> step_pattern(const ArrayLayout& layout, std::size_t itemsize) {
  const RunAxes r = run_axes(layout, itemsize);
  if (r.empty || r.axes.size() != 1) return std::nullopt;
  const auto [period, count] = r.axes.front();
  return StepPattern{r.start, r.start + period * (count - 1) + r.run, period, r.run};
}

std::optional<std::vector<std::pair<std::int64_t, std::int64_t>>> byte_runs(const ArrayLayout& layout,
                                                                           std::size_t itemsize,
                                                                           std::size_t max_runs) {
  using Runs = std::vector<std::pair<std::int64_t, std::int64_t>>;
  const RunAxes normalized = run_axes(layout, itemsize);
  if (normalized.empty) return Runs{};
  const std::int64_t start = normalized.start, run = normalized.run;
  const auto& axes = normalized.axes;
  std::size_t count = 1;
  for (const auto& axis : axes) {
    count *= static_cast<std::size_t>(axis.second);
    if (count > max_runs) return std::nullopt;
  }
  Runs runs;
  runs.reserve(count);
  std::vector<std::int64_t> index(axes.size(), 0);
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t begin = start;
    for (std::size_t d = 0; d < axes.size(); ++d) begin += index[d] * axes[d].first;
    runs.emplace_back(begin, begin + run);
    for (std::size_t d = axes.size(); d-- > 0;) {  // the next index, last axis fastest
      if (++index[d] < axes[d].second) break;
      index[d] = 0;
    }
  }
  std::sort(runs.begin(), runs.end());
  Runs merged;
  for (const auto& r : runs) {
    if (!merged.empty() && r.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

}  // namespace cuweave
