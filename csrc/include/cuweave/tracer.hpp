// How a backend observes what ran, for traces (Note [Tracing] in trace.hpp, Note [Backend facets] in
// backend.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuweave/backend_handles.hpp"

namespace cuweave {

// Note [Kernels other libraries launch]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The sanitizer is told of work other libraries queue by hooks in those libraries (PyTorch's dispatch); CuPy's
// kernels have no such hook, so the backend reports the kernels launched through CUDA's driver API
// (cuLaunchKernel and its cooperative and extended forms, all but the one cuweave launches through: Note
// [cuweave's launches beside the launch watch] in csrc/cuda/own_launch.hpp) to a watcher, which reads what each
// one touches from its parameter values (python/cuweave/_cupy_hooks.py). `wants` is asked once per kernel
// (function handle) and its answer kept until the watcher changes; `launched` is told each launch of a wanted
// kernel, on the launching thread, before the launch is queued. Neither may throw.
// The copies other libraries make through the runtime (cudaMemcpy, cudaMemcpyAsync: CuPy's get() and set()) are
// told to `copied` the same way, with where each end lies. So are the event records and stream waits they make
// through the runtime (cudaEventRecord, cudaStreamWaitEvent: CuPy's, among them those no Python call shows), and
// the host's synchronizes (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize: CuPy's, among them
// its synchronize of the stream a __cuda_array_interface__ names), told once each has returned. cuweave's own
// calls are not told (Note [cuweave's own runtime calls] in csrc/cuda/own_calls.hpp): the core tells the
// sanitizer of those.
class ForeignLaunches {
 public:
  // Where one end of a copy lies.
  enum class Memory { Device, PinnedHost, PageableHost };

  virtual ~ForeignLaunches() = default;
  // Whether launches of `kernel`, a function of `module` (a CUmodule), are to be reported.
  virtual bool wants(const char* kernel, std::uintptr_t module) noexcept = 0;
  // A wanted kernel is being launched on `stream`: one byte string per parameter, as the launch passes it.
  // Returns the stream the launch is to run on instead (a weave's choice: Note [Other libraries' kernels in a
  // weave]), or null to leave it where it was called; only a `movable` launch (one whose stream the backend can
  // change, on a thread that places other libraries' work) may be moved.
  virtual StreamHandle launched(const char* kernel, std::uintptr_t module, StreamHandle stream, bool movable,
                                const std::vector<std::string>& parameters) noexcept = 0;
  // The launch launched() moved last on this thread has been queued: the stream it was called on must now follow
  // it, as the library that launched it expects its later work there (and its memory pool's frees) to.
  virtual void launch_queued() noexcept = 0;
  // While this thread places other libraries' work (Tracer::place_foreign_work): work queued on `stream`, a stream
  // launches were moved off, that was not moved (a launch the weave cannot read or move, a copy, a memset, a stream
  // wait), which the launches moved off `stream` later must follow.
  virtual void unmoved(StreamHandle stream) noexcept = 0;
  // Another library is queuing a copy of `bytes` from `source` to `destination` on `stream`, by `call` (the
  // runtime function's name).
  virtual void copied(const char* call, std::uintptr_t destination, Memory destination_memory, std::uintptr_t source,
                      Memory source_memory, std::size_t bytes, StreamHandle stream) noexcept = 0;
  // Another library is recording `event` on `stream`.
  virtual void event_recorded(EventHandle event, StreamHandle stream) noexcept = 0;
  // Another library is making `stream` wait for `event`.
  virtual void stream_waited(StreamHandle stream, EventHandle event) noexcept = 0;
  // Another library's synchronize of `stream`, of `event`, or of `device` has returned: the host is past it.
  virtual void stream_synchronized(StreamHandle stream) noexcept = 0;
  virtual void event_synchronized(EventHandle event) noexcept = 0;
  virtual void device_synchronized(int device) noexcept = 0;
};

class Tracer {
 public:
  virtual ~Tracer() = default;
  // Collection on and off: the core calls start() when the first trace opens and stop() after the last
  // one closed. start() throws, naming what is missing, where the backend cannot trace.
  virtual void start() = 0;
  virtual void stop() noexcept = 0;
  // Hands everything that has completed so far to trace::deliver().
  virtual void flush() = 0;
  // Now, on the clock activities are stamped with (ns).
  virtual std::uint64_t now_ns() = 0;
  // The id activities on `stream` carry (for the per-thread default stream: the calling thread's own).
  virtual std::uint64_t stream_id(StreamHandle stream, int device) = 0;
  // Reports the kernels other libraries launch to `watcher` from now on; null stops it (Note [Kernels other
  // libraries launch]). Throws where the backend cannot watch (another tool holds CUPTI).
  virtual void watch_launches(std::shared_ptr<ForeignLaunches> watcher) = 0;
  // Whether the watcher places other libraries' launches on this thread (a weave is active on it): the calls it
  // does not move are then told to it as unmoved.
  virtual void place_foreign_work(bool on) noexcept = 0;
};

}  // namespace cuweave
