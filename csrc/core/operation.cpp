#include "cuweave/operation.hpp"

#include "cuweave/device_array.hpp"
#include "cuweave/sanitizer.hpp"

namespace cuweave {

Operation& Operation::uses(std::shared_ptr<DeviceArray> array, sanitizer::AccessKind kind) {
  arrays_.push_back(ArrayUse{std::move(array), kind, 0, 0});
  accesses_made_ = false;
  return *this;
}

Operation& Operation::uses_part(std::shared_ptr<DeviceArray> array, const void* pointer, std::size_t bytes,
                                sanitizer::AccessKind kind) {
  const auto begin = reinterpret_cast<std::uintptr_t>(pointer);
  arrays_.push_back(ArrayUse{std::move(array), kind, begin, begin + bytes});
  accesses_made_ = false;
  return *this;
}

void Operation::stand_in(std::size_t index, std::shared_ptr<DeviceArray> copy) {
  ArrayUse& use = arrays_[index];
  stand_ins_.emplace_back(use.array.get(), copy);
  use.array = std::move(copy);
  accesses_made_ = false;
}

Operation& Operation::reads(const void* pointer, std::size_t bytes) {
  bytes_.push_back(sanitizer::reads(pointer, bytes));
  accesses_made_ = false;
  return *this;
}

Operation& Operation::writes(const void* pointer, std::size_t bytes) {
  bytes_.push_back(sanitizer::writes(pointer, bytes));
  accesses_made_ = false;
  return *this;
}

Operation& Operation::ordered_by(const void* resource) {
  order_.push_back(sanitizer::writes(resource, 1));
  return *this;
}

sanitizer::AccessSpan Operation::placement_accesses() {
  if (order_.empty()) return accesses();
  const sanitizer::AccessSpan touched = accesses();
  placement_accesses_.assign(touched.begin(), touched.end());
  placement_accesses_.insert(placement_accesses_.end(), order_.begin(), order_.end());
  return placement_accesses_;
}

Operation& Operation::keep_alive(Hold hold) {
  kept_.push_back(std::move(hold));
  return *this;
}

Operation& Operation::keep_alive(Holds holds) {
  if (kept_.empty()) {
    kept_ = std::move(holds);
  } else {
    for (Hold& hold : holds) kept_.push_back(std::move(hold));
  }
  return *this;
}

void Operation::append_bytes(const DeviceArray& array, sanitizer::AccessKind kind) {
  if (!array.contiguous()) {
    // A stepped view's elements leave gaps that other views' may fill (x[::2] and x[1::2]): its runs, not its
    // extent, are its bytes. Past a count of runs, runs at one stride are one stepped access (Note [Stepped
    // accesses]); other layouts take their extent, which orders more, never less.
    constexpr std::size_t kMaxRuns = 64;
    const ArrayLayout layout{0, array.shape(), array.strides()};
    const auto data = reinterpret_cast<std::uintptr_t>(array.data());
    const auto at = [data](std::int64_t offset) { return data + static_cast<std::uintptr_t>(offset); };
    if (auto runs = byte_runs(layout, array.dtype().itemsize, kMaxRuns)) {
      for (const auto& [begin, end] : *runs) accesses_.push_back(sanitizer::Access{at(begin), at(end), kind});
      return;
    }
    if (auto steps = step_pattern(layout, array.dtype().itemsize)) {
      accesses_.push_back(sanitizer::Access{at(steps->begin), at(steps->end), kind,
                                            static_cast<std::uintptr_t>(steps->period),
                                            static_cast<std::uintptr_t>(steps->width)});
      return;
    }
  }
  accesses_.push_back(sanitizer::touches(array, kind));
}

bool Operation::written_whole(const DeviceArray* array) const noexcept {
  for (const ArrayUse& use : arrays_) {
    if (use.array.get() == array && use.kind == sanitizer::AccessKind::Write && use.part_end == 0) return true;
  }
  return false;
}

sanitizer::AccessSpan Operation::accesses() {
  if (!accesses_made_) {
    accesses_.clear();
    for (const ArrayUse& use : arrays_) {
      if (use.kind == sanitizer::AccessKind::Read && use.part_end == 0 && written_whole(use.array.get())) {
        continue;  // an in-place update (out=x): its write of the same bytes says all the read would
      }
      if (use.part_end != 0) {
        accesses_.push_back(sanitizer::Access{use.part_begin, use.part_end, use.kind});
      } else if (use.array->size() != 0) {
        append_bytes(*use.array, use.kind);
      }
    }
    for (const sanitizer::Access& access : bytes_) accesses_.push_back(access);
    accesses_made_ = true;
  }
  return sanitizer::AccessSpan(accesses_.data(), accesses_.size());
}

}  // namespace cuweave
