// The seam between the CUDA-free core and the code that talks to a device.
//
// Every device operation the core needs goes through Backend's facets. The CUDA backend (csrc/cuda) is the
// only implementation that calls CUDA; the host simulator (csrc/sim) implements the same facets. Handles are
// opaque pointers whose meaning belongs to the backend.
//
// Note [Backend facets]
// ~~~~~~~~~~~~~~~~~~~~~
// One interface of a hundred methods cannot be held in mind, faked in a test, or read beside its two
// implementations. Backend is split by the concept a call is about, which is mostly the handle it takes:
//
//   devices()      DeviceBackend      10  which devices exist, which is current, their properties, device-wide
//                                         waits. Everything that names a device ordinal and nothing else.
//   streams()      StreamBackend      23  streams, events and host flags: what orders work and says when it has
//                                         completed. Events are here, not alone, because an event means nothing
//                                         without a stream to record it on or to wait for it; host flags are
//                                         one more thing a stream waits for.
//   memory()       MemoryBackend      16  allocations of every kind, what a pointer points into, and the calls
//                                         that move bytes (copies, memsets, peer access). copy_by_kernel is a
//                                         copy to its callers (Note [Copies by kernel]), so it sits here.
//   kernels()      KernelBackend      12  code that runs on a device: the built-in kernels (fill, spin,
//                                         arithmetic, sum) and user kernels compiled, loaded and launched.
//   capture()      CaptureBackend     10  everything that takes a *capturing stream*: begin, end, state, and the
//                                         conditional nodes and bodies added through a capture.
//   graphs()       GraphBackend       23  everything that takes a *graph or an executable graph*: nodes added by
//                                         hand (conditional ones included), inspection and edits, instantiate,
//                                         update, upload and replay.
//   tracer()       Tracer              7  what ran and when, for traces (Note [Tracing] in trace.hpp), and the
//                                         watch on other libraries' launches that the sanitizer and weave read.
//   collectives()  CollectiveBackend  10  communicators and the collectives queued on them.
//   partitions()   PartitionBackend    6  a device's SMs split into partitions, and the streams made on one.
//
// The cut between capture() and graphs() follows the handle: a conditional node made during a capture is a
// capture call (it needs the stream's frontier), the same node added to a graph by hand is a graph call. No
// facet has more than 25 methods; the largest, graphs(), is one concept (a graph's life from empty to
// replayed) whose methods are mostly one add_*_node per node kind.
//
// Backend itself only hands out the facets. The accessors are inline and non-virtual, reading pointers that
// the concrete backend set once when it was made: record + wait, kernel launches and graph replays are
// measured hot paths, and asking for a facet must cost them nothing over the one virtual call they made
// before. A facet of one backend may use another of the same backend (the CUDA kernels' sum allocates its
// scratch through the memory facet); it gets it, and any state they share (the simulator's scheduler and
// capture book, the CUDA backend's count of active captures), by reference when it is made.
//
// Core components that need one facet can be handed it (EventPool takes a StreamBackend), so that a test
// fakes that facet alone instead of the whole simulator (tests/cpp/event_pool_fake_streams_test.cpp).
#pragma once

#include <atomic>
#include <string>

#include "cuweave/backend_handles.hpp"
#include "cuweave/capture_backend.hpp"
#include "cuweave/collective_backend.hpp"
#include "cuweave/device_backend.hpp"
#include "cuweave/graph_backend.hpp"
#include "cuweave/kernel_backend.hpp"
#include "cuweave/memory_backend.hpp"
#include "cuweave/partition_backend.hpp"
#include "cuweave/stream_backend.hpp"
#include "cuweave/tracer.hpp"

namespace cuweave {

// Every facet of one backend (Note [Backend facets]); none may be null.
struct BackendFacets {
  DeviceBackend* devices = nullptr;
  StreamBackend* streams = nullptr;
  MemoryBackend* memory = nullptr;
  KernelBackend* kernels = nullptr;
  CaptureBackend* capture = nullptr;
  GraphBackend* graphs = nullptr;
  Tracer* tracer = nullptr;
  CollectiveBackend* collectives = nullptr;
  PartitionBackend* partitions = nullptr;
};

// A backend: its name and its facets, which it does not own (each backend keeps its facets for the life of the
// process). Not copyable: the core compares backends by address.
class Backend {
 public:
  Backend(const char* name, const BackendFacets& facets) noexcept : name_(name), facets_(facets) {}
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const char* name() const noexcept { return name_; }
  DeviceBackend& devices() const noexcept { return *facets_.devices; }
  StreamBackend& streams() const noexcept { return *facets_.streams; }
  MemoryBackend& memory() const noexcept { return *facets_.memory; }
  KernelBackend& kernels() const noexcept { return *facets_.kernels; }
  CaptureBackend& capture() const noexcept { return *facets_.capture; }
  GraphBackend& graphs() const noexcept { return *facets_.graphs; }
  Tracer& tracer() const noexcept { return *facets_.tracer; }
  CollectiveBackend& collectives() const noexcept { return *facets_.collectives; }
  PartitionBackend& partitions() const noexcept { return *facets_.partitions; }

 private:
  const char* name_;
  BackendFacets facets_;
};

// The process-wide backend, chosen once, at first use: CUWEAVE_BACKEND=cuda|sim|auto (default auto:
// CUDA when a GPU is usable, else the simulator), unless select_backend() chose before.
Backend& backend();
// Whether the process sees more than one device (set when the backend is chosen). With one, that device is
// always current, and Note [The device follows the stream] has nothing to do.
inline bool several_devices() noexcept;
// Chooses the backend by name ("cuda", "sim" or "auto") before first use. Choosing again is allowed
// only for the same backend; once objects exist their backend cannot change.
void select_backend(const std::string& name);
// The backends themselves (defined in csrc/cuda and csrc/sim).
Backend& cuda_backend();
Backend& sim_backend();

namespace detail {
extern std::atomic<bool> several_devices;  // written once, when the backend is chosen
}
inline bool several_devices() noexcept { return detail::several_devices.load(std::memory_order_relaxed); }

}  // namespace cuweave
