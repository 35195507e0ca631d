// The simulator's memory and copies (MemoryBackend).
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cuweave/backend.hpp"
#include "sim/capture_book.hpp"
#include "sim/device_access.hpp"
#include "sim/fault_plan.hpp"
#include "sim/freed_memory.hpp"
#include "sim/handles.hpp"
#include "sim/memory_registry.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_error.hpp"
#include "sim/sim_facets.hpp"
#include "sim/sim_graph.hpp"
#include "sim/sim_tracer.hpp"

namespace cuweave::sim {

namespace {

class SimMemoryBackend final : public MemoryBackend {
 public:
  SimMemoryBackend(Handles& handles, Scheduler& scheduler, CaptureBook& captures, DeviceAccess& access,
                   MemoryRegistry& memory, FaultPlan& faults)
      : handles_(handles), scheduler_(scheduler), captures_(captures), access_(access), memory_(memory),
        faults_(faults) {}

  // On a capturing stream too, an allocation is an ordinary one, usable at once (no graph node). Outside a capture
  // it may take a block freed on the same stream (Note [Reuse in a stream's order]).
  void* allocate_device(std::size_t bytes, int device, StreamHandle handle) override {
    constexpr const char* kCall = "cudaMallocFromPoolAsync";
    SimStream* stream = handles_.resolve_stream(handle, kCall);
    captures_.check_stream_ordered_memory(stream, kCall);
    refuse_if_injected(kCall);
    const int checked = handles_.checked(device, kCall);
    if (!capturing(stream)) {
      if (void* reused = memory_.reuse_freed(bytes, checked, stream->id)) {
        try {
          scheduler_.enqueue(stream, [reused, bytes] { std::memset(reused, 0xFF, bytes); });  // unwritten again
        } catch (...) {
          memory_.release(reused);  // out of host memory: the block goes, as its free would have
          throw;
        }
        return reused;
      }
    }
    return memory_.allocate(bytes, MemoryKind::Device, checked, /*pooled=*/true);
  }
  // Note [Simulated graph memory]: an allocation node, its address reserved now.
  void* allocate_in_capture(std::size_t bytes, int device, StreamHandle handle) override {
    constexpr const char* kCall = "cudaMallocFromPoolAsync";
    SimStream* stream = handles_.resolve_stream(handle, kCall);
    refuse_if_injected(kCall);
    handles_.checked(device, kCall);
    void* pointer = nullptr;
    const bool captured = captures_.capture_or_run(
        stream, kCall,
        [&] {
          pointer = memory_.reserve_graph(bytes, device);
          std::shared_ptr<const void> reservation(pointer, [&memory = memory_](const void* reserved) {
            memory.forget_graph(const_cast<void*>(reserved));
          });
          return std::vector<NodeParams>{MemAllocNode{pointer, bytes, device, std::move(reservation)}};
        },
        [] {});
    if (!captured) fail(kCall, kInvalidValue, "allocate_in_capture needs a stream that takes part in a capture");
    return pointer;
  }
  // On a capturing stream, graph memory's free is a free node; other memory's follows the work queued before the
  // capture began (captured work never reaches the scheduler). Graph memory freed outside a graph ends the bytes
  // its last launch made; where they do not exist now (never launched, or freed already), CUDA refuses the free
  // (cudaErrorInvalidValue, quiet here as on the CUDA backend) and nothing changes.
  void free_device(void* pointer, StreamHandle handle) noexcept override {
    const std::optional<MemoryRange> range = memory_.find(pointer);
    if (range && range->graph) {
      free_graph_memory(pointer, handle);
      return;
    }
    // Seen: an adopted stream whose owner destroyed it while cuweave memory was still to be freed on it.
    handles_.crash_unless_live_stream(handle, "cudaFreeAsync",
                                      "A stream adopted with Stream.from_external must outlive the memory allocated on it.");
    try {  // stream-ordered: after the work queued so far on the stream
      SimStream* stream = handles_.resolve_stream(handle, "cudaFreeAsync");
      try {
        captures_.check_stream_ordered_memory(stream, "cudaFreeAsync");
      } catch (...) {
        // Refused, the capture invalidated: the memory still goes after the stream's work (CUDA's would leak).
      }
      const std::uint64_t ticket = capturing(stream) ? 0 : memory_.freed_on(pointer, stream->id);
      scheduler_.enqueue(stream, [&memory = memory_, pointer, ticket] {
        if (ticket != 0) {
          memory.release_freed(pointer, ticket);
        } else {
          memory.release(pointer);
        }
      });
    } catch (...) {
      memory_.release(pointer);
    }
  }
  bool capturing(const SimStream* stream) { return captures_.state(stream).status != CaptureState::Status::None; }
  void free_graph_memory(void* pointer, StreamHandle handle) noexcept {
    try {
      SimStream* stream = handles_.resolve_stream(handle, "cudaFreeAsync");
      captures_.capture_or_run(
          stream, "cudaFreeAsync", [&] { return std::vector<NodeParams>{MemFreeNode{pointer}}; },
          [&] {
            memory_.freed_graph_memory(pointer);
            scheduler_.enqueue(stream, [&memory = memory_, pointer] { memory.graph_free(pointer); });
          });
    } catch (...) {
      // Refused as CUDA refuses it: nothing is freed.
    }
  }
  void* allocate_pinned(std::size_t bytes) override {
    refuse_if_injected("cudaHostAlloc");
    return memory_.allocate(bytes, MemoryKind::Pinned, -1);
  }
  void* allocate_unpooled(std::size_t bytes, int device) override {
    refuse_if_injected("cudaMalloc");
    return memory_.allocate(bytes, MemoryKind::Device, handles_.checked(device, "cudaMalloc"));
  }
  void free_unpooled(void* pointer) noexcept override { memory_.release(pointer); }
  void free_pinned(void* pointer) noexcept override { memory_.release(pointer); }
  void register_host(void* pointer, std::size_t bytes) override {
    memory_.register_range(pointer, bytes);
  }
  void unregister_host(void* pointer) override { memory_.unregister_range(pointer); }
  bool is_pinned(const void* pointer) override {
    auto range = memory_.find(pointer);
    return range && range->kind != MemoryKind::Device;
  }
  int pointer_device(const void* pointer) override {
    auto range = memory_.find(pointer);
    return range && range->kind == MemoryKind::Device ? range->device : -1;
  }

  // Simulated devices reach each other directly, unless CUWEAVE_SIM_PEER_ACCESS=0 (no peer links: copies
  // between devices then go through the host, as CUDA's do).
  bool enable_peer_access(int device, int peer) override {
    handles_.checked(device, "cudaDeviceEnablePeerAccess");
    handles_.checked(peer, "cudaDeviceEnablePeerAccess");
    static const bool links = [] {
      const char* value = std::getenv("CUWEAVE_SIM_PEER_ACCESS");
      return value == nullptr || std::string(value) != "0";
    }();
    if (!links || device == peer) return false;
    for (auto [one, other] : {std::make_pair(device, peer), std::make_pair(peer, device)}) {
      access_.enable_peer(one, other);
      access_.grant_pool(other, one);
    }
    return true;
  }

  void copy_async(void* destination, const void* source, std::size_t bytes, StreamHandle handle) override {
    SimStream* stream = handles_.resolve_stream(handle, "cudaMemcpyAsync");
    refuse_unreachable(destination, source, *stream, "cudaMemcpyAsync");
    queue_copy(destination, source, bytes, stream, "cudaMemcpyAsync");
  }

  // As cudaMemcpyBatchAsync: each copy checked as cudaMemcpyAsync checks one, a pageable source read now.
  void copy_batch(const std::vector<BatchedCopy>& copies, StreamHandle handle) override {
    constexpr const char* call = "cudaMemcpyBatchAsync";
    if (handle == kLegacyHandle) fail(call, kInvalidValue, "a batch of copies does not go on the legacy default stream");
    if (copies.empty()) fail(call, kInvalidValue, "a batch holds at least one copy");
    SimStream* stream = handles_.resolve_stream(handle, call);
    captures_.check_batched_copies(stream, call);
    for (const BatchedCopy& copy : copies) refuse_unreachable(copy.destination, copy.source, *stream, call);
    for (const BatchedCopy& copy : copies) queue_copy(copy.destination, copy.source, copy.bytes, stream, call);
  }

  void copy_between_devices(void* destination, int destination_device, const void* source, int source_device,
                            std::size_t bytes, StreamHandle handle) override {
    handles_.checked(destination_device, "cudaMemcpyPeerAsync");
    handles_.checked(source_device, "cudaMemcpyPeerAsync");
    const bool direct = access_.pool_granted(destination_device, source_device) &&
                        access_.pool_granted(source_device, destination_device);
    if (direct) {
      copy_async(destination, source, bytes, handle);
      return;
    }
    // As cudaMemcpyPeerAsync: staged through the host, needing no access to either side.
    SimStream* stream = handles_.resolve_stream(handle, "cudaMemcpyPeerAsync");
    queue_copy(destination, source, bytes, stream, "cudaMemcpyPeerAsync");
  }

  // Queues a copy whose access was checked (Note [Simulated device access]).
  void queue_copy(void* destination, const void* source, std::size_t bytes, SimStream* stream, const char* call) {
    const bool source_pageable = !memory_.within_range(source, bytes, call);
    const bool destination_pageable = !memory_.within_range(destination, bytes, call);
    const trace::Direction direction = copy_direction(memory_, destination, source);
    std::uint64_t wait_for = 0;
    captures_.capture_or_run(
        stream, call, [&] { return chain(CopyNode{destination, source, bytes, direction}); },
        [&] {
          if (memory_.graph_memory_missing(destination) || memory_.graph_memory_missing(source)) {
            fail(call, kInvalidValue, kGraphMemoryMissing);
          }
          if (source_pageable && destination_pageable) {
            std::memcpy(destination, source, bytes);
            return;
          }
          auto trace = traced(trace::Kind::Copy, *stream, {}, bytes, direction);
          if (source_pageable) {
            // CUDA stages pageable sources before returning: later host writes do not reach the copy.
            auto staged = std::make_shared<std::vector<unsigned char>>(
                static_cast<const unsigned char*>(source), static_cast<const unsigned char*>(source) + bytes);
            scheduler_.enqueue(stream,
                               unless_freed(*stream, {destination},
                                            [destination, staged] {
                                              std::memcpy(destination, staged->data(), staged->size());
                                            }),
                               {}, {}, std::move(trace));
          } else if (destination_pageable) {
            // CUDA returns from a copy into pageable memory only once it has completed (waited for below).
            wait_for = scheduler_.enqueue(
                stream, unless_freed(*stream, {source}, [=] { std::memcpy(destination, source, bytes); }), {}, {},
                std::move(trace));
          } else {
            scheduler_.enqueue(stream,
                               unless_freed(*stream, {destination, source},
                                            [=] { std::memcpy(destination, source, bytes); }),
                               {}, {}, std::move(trace));
          }
        });
    if (wait_for != 0) scheduler_.wait_for_count(stream, wait_for);
  }

  bool copy_by_kernel(void* destination, const void* source, std::size_t bytes, int device,
                      StreamHandle handle) override {
    SimStream* stream = handles_.resolve_stream(handle, "cudaLaunchKernel");
    // As on a GPU: the device reaches its own memory and pinned host memory, nothing else.
    const auto reachable = [&](const void* pointer) {
      auto range = memory_.find(pointer);
      return range && (range->kind != MemoryKind::Device || range->device == device);
    };
    if (!reachable(destination) || !reachable(source)) return false;
    memory_.within_range(destination, bytes, "cudaLaunchKernel");
    memory_.within_range(source, bytes, "cudaLaunchKernel");
    captures_.capture_or_run(
        stream, "cudaLaunchKernel",
        [&] { return chain(CopyKernel{destination, source, bytes, copy_direction(memory_, destination, source)}); },
        [&] {
          scheduler_.enqueue(stream,
                             unless_freed(*stream, {destination, source},
                                          [=] { std::memcpy(destination, source, bytes); }),
                             {}, {}, traced(trace::Kind::Kernel, *stream, "copy_kernel"));
        });
    return true;
  }

  void memset_async(void* destination, int value, std::size_t bytes, StreamHandle handle) override {
    memory_.within_range(destination, bytes, "cudaMemsetAsync");
    SimStream* stream = handles_.resolve_stream(handle, "cudaMemsetAsync");
    captures_.capture_or_run(
        stream, "cudaMemsetAsync", [&] { return chain(MemsetNode{destination, value, bytes}); },
        [&] {
          scheduler_.enqueue(stream,
                             unless_freed(*stream, {destination}, [=] { std::memset(destination, value, bytes); }),
                             {}, {}, traced(trace::Kind::Memset, *stream, {}, bytes));
        });
  }

 private:
  // `work` touching `pointers`, run only while that memory exists (Note [Work on freed memory]).
  std::function<void()> unless_freed(const SimStream& stream, std::initializer_list<const void*> pointers,
                                     std::function<void()> work) {
    return faulting_if_freed(memory_, access_, stream.device, pointers, std::move(work));
  }

  // Note [Injected faults]: an allocation that CUWEAVE_SIM_FAULTS fails.
  void refuse_if_injected(const char* call) {
    if (faults_.strikes(FaultKind::Allocation, call)) FaultPlan::fail(FaultKind::Allocation, call);
  }

  // Both sides of a copy on `stream`, for the current device and the stream's (the only device reaches its own
  // pool).
  void refuse_unreachable(const void* destination, const void* source, const SimStream& stream,
                          const char* call) const {
    if (handles_.devices() < 2) return;
    for (const void* side : {destination, source}) {
      refuse_ungranted_pool(side, handles_.current_device(), "the current device", call);
      refuse_ungranted_pool(side, stream.device, "the stream's device", call);
    }
  }

  // Note [Simulated device access]: a copy touching pool memory that `device` (the current device, or the
  // stream's) has not been granted fails as cudaMemcpyAsync does.
  void refuse_ungranted_pool(const void* pointer, int device, const char* which, const char* call) const {
    const std::optional<MemoryRange> range = memory_.find(pointer);
    if (!range || range->kind != MemoryKind::Device || !range->pooled) return;
    if (access_.pool_granted(range->device, device)) return;
    fail(call, kInvalidValue,
         "the copy touches memory of device " + std::to_string(range->device) + "'s stream-ordered pool, which " +
             which + " (device " + std::to_string(device) + ") has not been granted (cudaMemPoolSetAccess)");
  }

  Handles& handles_;
  Scheduler& scheduler_;
  CaptureBook& captures_;
  DeviceAccess& access_;
  MemoryRegistry& memory_;
  FaultPlan& faults_;
};

}  // namespace

std::unique_ptr<MemoryBackend> make_memory_backend(SimState& sim) {
  return std::make_unique<SimMemoryBackend>(sim.handles, sim.scheduler, sim.captures, sim.access,
                                            sim.memory, sim.faults);
}

}  // namespace cuweave::sim
