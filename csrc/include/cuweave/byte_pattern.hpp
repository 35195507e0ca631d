// Which bytes an access touches when they are not one range: a stepped view's elements (x[::2], a column of a
// matrix) are runs of `width` bytes every `period` bytes, from `begin` up to `end`. Listing each run would cost
// a range per element; the pattern answers the one question the sanitizer asks of two accesses (do they share a
// byte?) in a few steps.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

namespace cuweave {

// The bytes of [begin, end) whose offset from `begin`, modulo `period`, is below `width`. Period 0: every byte.
struct BytePattern {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  std::uintptr_t period = 0;
  std::uintptr_t width = 0;

  bool contiguous() const noexcept { return period == 0 || width >= period; }
  // Whether its extent lies wholly inside [low, high) (a write of that range replaces it), or meets it.
  bool lies_within(std::uintptr_t low, std::uintptr_t high) const noexcept { return low <= begin && end <= high; }
  bool meets(std::uintptr_t low, std::uintptr_t high) const noexcept { return begin < high && low < end; }
  friend bool operator==(const BytePattern& a, const BytePattern& b) noexcept {
    return a.begin == b.begin && a.end == b.end && a.period == b.period && a.width == b.width;
  }
};

// The first bytes [begin, end) that both patterns touch, in one run of each; nothing when they share none.
std::optional<std::pair<std::uintptr_t, std::uintptr_t>> first_shared_run(const BytePattern& a, const BytePattern& b);

}  // namespace cuweave
