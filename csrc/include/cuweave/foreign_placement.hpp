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
// Under a capture (a weave begun on a capturing stream, as cuweave.woven's), the library's streams join the
// weave's capture: its work in the block, moved or not, must be captured too, and a capturing stream cannot wait
// for a stream outside its capture (cudaErrorStreamCaptureIsolation). The stream the library calls on as the block
// begins joins it then, after the capture's start alone; a stream it calls on first later joins after the first
// stream's work so far (more order than needed, never less). As the placing ends, the weave's first stream waits for
// each stream that joined (a capture ends only with every stream it forked joined back), and the graph then holds
// the library's work: its replays must follow, and be followed by, the library's stream. The legacy default stream
// cannot join a capture, so its launches are refused there. A joined stream is adopted once for the block: CUDA
// refuses to describe a stream that takes part in a capture it did not begin.
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
class Weave;

// One thread's placing of other libraries' launches in its weave.
class ForeignPlacement {
 public:
  static ForeignPlacement& this_thread();
  // The stream `handle` names for work called on the current device: that device's default streams for their
  // handles, else an adoption that owns nothing (the library calling on it keeps the stream alive through its call).
  static std::shared_ptr<Stream> stream_named(StreamHandle handle);

  // Forgets what it knew of other libraries' streams: as a weave begins placing.
  void reset() noexcept;
  // Inside a weave under a capture, the stream `handle` names (the library's current one as the block begins) joins
  // the weave's capture now; nothing otherwise, nor for the legacy default stream (its work will be refused only if
  // the block has any). Returns whether it joined.
  bool follow_into_capture(StreamHandle handle);
  // As the weave's placing ends, before the weave itself: its first stream waits for the streams that joined its
  // capture. Returns whether any did (the graph then holds the library's work). Forgets the rest, as reset().
  bool end();
  // The stream of the thread's active weave for a launch called on `called` touching `accesses`, after the waits it
  // needs; null to leave it on `called` (no weave is active, `called` is another device's or another capture's, or
  // the weave chose it). Throws InvalidArgument for a launch on the legacy default stream in a weave under a capture.
  std::shared_ptr<Stream> place(StreamHandle called, sanitizer::AccessSpan accesses);
  // The launch place() moved last has been queued: the stream it was called on now follows it.
  void launch_queued();
  // Work queued on `called` that was not moved: launches moved off `called` later wait for it (a stream nothing was
  // moved off yet may be told too).
  void unmoved(StreamHandle called);

 private:
  // A stream launches were called on, in a weave under a capture: its adoption, null for another capture's stream
  // (that capture orders its work), and whether it joined the weave's capture here (end() joins it back).
  struct CapturedOrigin {
    StreamHandle handle = nullptr;
    std::shared_ptr<Stream> stream;
    bool joined = false;
  };
  const CapturedOrigin& captured_origin(StreamHandle handle, const Weave& weave);

  std::vector<CapturedOrigin> captured_origins_;  // a weave under a capture: the streams met, in order (few)
  std::unordered_map<StreamHandle, std::uint64_t> unmoved_;  // a stream -> spans of its unmoved work so far
  std::map<std::pair<StreamHandle, StreamHandle>, std::uint64_t> followed_;  // (called, chosen) -> spans waited for
  std::shared_ptr<Stream> in_flight_origin_;  // the launch being queued: the stream it was called on,
  std::shared_ptr<Stream> in_flight_;         // and the one place() moved it to
};

}  // namespace cuweave
