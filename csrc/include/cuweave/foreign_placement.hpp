// Note [Other libraries' kernels in a weave]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// CuPy has no hook before its launches, but the launch watch sees each at its entry (Note [Kernels other libraries
// launch] in tracer.hpp), where the stream in cuLaunchKernel's parameters can still be changed
// (tools/probes/cupti_launch_stream_probe.cu). Inside a weave, another library's kernel whose arguments say what it
// touches (Note [Another library's kernel arguments]) is placed as cuweave's own operations are, by those bytes:
// the weave queues the waits it needs and the launch is moved to the stream it chose. The library expects its later
// work on the stream it called (the next kernel, a copy, its memory pool's reuse of a block) to follow the kernel,
// so once the launch is queued that stream waits for the chosen one.
//
// The library's other work stays on its stream: kernels whose arguments say nothing (cuBLAS, CUB, raw pointers),
// launches whose stream lies in a launch configuration (cuLaunchKernelEx), copies, memsets and stream waits. The
// weave does not know what they touch, so a kernel moved off that stream first waits for the stream (once for each
// stream the weave chooses, until more such work comes; the watch tells of such work once a launch was moved off
// the stream, and the first moved launch counts everything before it): a block the library's pool handed out
// again, or an array a cuBLAS call still writes, is not touched before that work is done.
//
// All of this runs in the launching thread's CUPTI callback, without Python: a Python callback per launch cost
// CuPy's kernels about twice their plain host time (tools/probes/cupy_kernel_in_weave_cost.py).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuweave/backend_handles.hpp"
#include "cuweave/race_detector.hpp"

namespace cuweave {

class Stream;

// One thread's placing of other libraries' launches in its weave.
class ForeignPlacement {
 public:
  static ForeignPlacement& this_thread();
  // The stream `handle` names for work called on the current device: that device's default streams for their
  // handles, else an adoption that owns nothing (the library calling on it keeps the stream alive through its call).
  static std::shared_ptr<Stream> stream_named(StreamHandle handle);

  // Forgets what it knew of other libraries' streams: as a weave begins placing, and as it ends.
  void reset() noexcept;
  // The stream of the thread's active weave for a launch called on `origin` touching `accesses`, after the waits it
  // needs; null to leave it on `origin` (no weave is active, `origin` is another device's, or the weave chose it).
  std::shared_ptr<Stream> place(const std::shared_ptr<Stream>& origin, const std::vector<sanitizer::Access>& accesses);
  // The launch place() moved last has been queued: the stream it was called on now follows it.
  void launch_queued();
  // Work queued on `called` that was not moved: launches moved off `called` later wait for it (a stream nothing was
  // moved off yet may be told too).
  void unmoved(StreamHandle called);

 private:
  std::unordered_map<StreamHandle, std::uint64_t> unmoved_;  // a stream -> spans of its unmoved work so far
  std::map<std::pair<StreamHandle, StreamHandle>, std::uint64_t> followed_;  // (called, chosen) -> spans waited for
  std::shared_ptr<Stream> in_flight_origin_;  // the launch being queued: the stream it was called on,
  std::shared_ptr<Stream> in_flight_;         // and the one place() moved it to
};

}  // namespace cuweave
