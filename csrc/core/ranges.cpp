#include "cuweave/ranges.hpp"

#include <nvtx3/nvToolsExt.h>

#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/trace.hpp"

namespace cuweave::trace {

namespace {

struct OpenRange {
  std::string name;
  Origin origin;  // empty unless a trace took the thread's operations when the range opened
  std::uint64_t start_ns = 0;
};

std::vector<OpenRange>& open_ranges_of_thread() {
  thread_local std::vector<OpenRange> ranges;
  return ranges;
}

}  // namespace

void push_range(const std::string& name) {
  auto& ranges = open_ranges_of_thread();
  OpenRange range{name, current_origin(), 0};
  if (range.origin) range.start_ns = backend().tracer().now_ns();
  ranges.push_back(std::move(range));
  nvtxRangePushA(name.c_str());
}

void pop_range() {
  auto& ranges = open_ranges_of_thread();
  CUWEAVE_EXPECTS(!ranges.empty(), "no cuweave.range is open on this thread");
  nvtxRangePop();
  OpenRange range = std::move(ranges.back());
  ranges.pop_back();
  if (!range.origin) return;
  Activity activity;
  activity.kind = Kind::Range;
  activity.name = std::move(range.name);
  activity.start_ns = range.start_ns;
  activity.end_ns = backend().tracer().now_ns();
  activity.depth = static_cast<std::uint32_t>(ranges.size());
  deliver(range.origin, std::move(activity));
}

std::size_t open_ranges() noexcept { return open_ranges_of_thread().size(); }

}  // namespace cuweave::trace
