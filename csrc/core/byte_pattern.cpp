#include "cuweave/byte_pattern.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace cuweave {

namespace {

using Run = std::pair<std::uintptr_t, std::uintptr_t>;

// Past this many runs of the sparser pattern, two patterns whose periods repeat together only after more bytes
// than that count as sharing bytes (the overlap's first bytes are reported): the search stays bounded.
constexpr std::uintptr_t kRunsSearched = 1 << 16;

// The first run of `pattern` that ends after `at`, clipped to [at, limit); nothing when none starts before `limit`.
std::optional<Run> run_from(const BytePattern& pattern, std::uintptr_t at, std::uintptr_t limit) {
  at = std::max(at, pattern.begin);
  limit = std::min(limit, pattern.end);
  if (at >= limit) return std::nullopt;
  if (pattern.contiguous()) return Run{at, limit};
  const std::uintptr_t offset = (at - pattern.begin) % pattern.period;
  const std::uintptr_t start = offset < pattern.width ? at : at + (pattern.period - offset);
  if (start >= limit) return std::nullopt;
  const std::uintptr_t run_end = start - (start - pattern.begin) % pattern.period + pattern.width;
  return Run{start, std::min(run_end, limit)};
}

}  // namespace

std::optional<Run> first_shared_run(const BytePattern& a, const BytePattern& b) {
  const std::uintptr_t low = std::max(a.begin, b.begin);
  const std::uintptr_t high = std::min(a.end, b.end);
  if (low >= high) return std::nullopt;
  // Walk the runs of the sparser pattern (the contiguous one has one), asking the other for its first run in each.
  const bool a_sparser = !a.contiguous() && (b.contiguous() || a.period >= b.period);
  const BytePattern& outer = a_sparser ? a : b;
  const BytePattern& inner = a_sparser ? b : a;
  // Two stepped patterns together repeat every least common multiple of their periods: a byte they share would
  // show within that many bytes of the overlap's start (x[::2] beside x[1::2]: one period; x[::2] beside x[1::4]:
  // two of the sparser's).
  std::uintptr_t repeats_every = 0;  // 0: not known to repeat within the search (one is contiguous, or too long)
  if (!outer.contiguous() && !inner.contiguous()) {
    const std::uintptr_t step = outer.period / std::gcd(outer.period, inner.period);
    if (step <= std::numeric_limits<std::uintptr_t>::max() / inner.period) repeats_every = step * inner.period;
  }
  std::uintptr_t searched = 0;
  std::uintptr_t at = low;
  while (auto outer_run = run_from(outer, at, high)) {
    if (auto shared = run_from(inner, outer_run->first, outer_run->second)) return shared;
    at = outer_run->second;
    ++searched;
    if (repeats_every != 0 && at - low >= repeats_every) return std::nullopt;
    if (searched >= kRunsSearched) return Run{low, std::min(high, low + 1)};
  }
  return std::nullopt;
}

}  // namespace cuweave
