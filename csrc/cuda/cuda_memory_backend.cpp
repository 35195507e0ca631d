// The CUDA backend's memory and copies (MemoryBackend).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda/active_captures.hpp"
#include "cuda/builtin_kernels.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/cuda_facets.hpp"
#include "cuda/cuda_handles.hpp"
#include "cuda/device_guard.hpp"
#include "cuda/own_calls.hpp"
#include "cuda/pointer_attributes.hpp"
#include "cuweave/memory_backend.hpp"

namespace cuweave::cuda {

namespace {

class CudaMemoryBackend final : public MemoryBackend {
 public:
  explicit CudaMemoryBackend(const ActiveCaptures& captures) : captures_(captures) {}

  void* allocate_device(std::size_t bytes, int device, StreamHandle stream) override {
    BookkeepingGuard guard(captures_);
    void* pointer = nullptr;
    if (captures_.capturing(stream)) {
      // Captured, the allocation would become a graph node owned by the graph. cuweave's arrays own
      // their memory, so allocate outside the capture and make it usable everywhere before returning.
      cudaStream_t side = side_stream(device);
      CUWEAVE_CUDA_TRY(cudaMallocFromPoolAsync(&pointer, bytes, memory_pool(device), side));
      const OwnCall own;  // Note [cuweave's own runtime calls]
      CUWEAVE_CUDA_TRY(cudaStreamSynchronize(side));
      return pointer;
    }
    CUWEAVE_CUDA_TRY(cudaMallocFromPoolAsync(&pointer, bytes, memory_pool(device), as_stream(stream)));
    return pointer;
  }

  // Captured, the allocation is a node of the graph (Note [Graph memory] in capture.hpp).
  void* allocate_in_capture(std::size_t bytes, int device, StreamHandle stream) override {
    BookkeepingGuard guard(captures_);
    void* pointer = nullptr;
    CUWEAVE_CUDA_TRY(cudaMallocFromPoolAsync(&pointer, bytes, memory_pool(device), as_stream(stream)));
    return pointer;
  }

  void free_device(void* pointer, StreamHandle stream) noexcept override {
    BookkeepingGuard guard(captures_);
    CUWEAVE_CUDA_TRY_QUIET(cudaFreeAsync(pointer, as_stream(stream)));
  }

  void* allocate_pinned(std::size_t bytes) override {
    BookkeepingGuard guard(captures_);
    void* pointer = nullptr;
    CUWEAVE_CUDA_TRY(cudaHostAlloc(&pointer, bytes, cudaHostAllocPortable));
    return pointer;
  }

  void free_pinned(void* pointer) noexcept override {
    BookkeepingGuard guard(captures_);
    CUWEAVE_CUDA_TRY_QUIET(cudaFreeHost(pointer));
  }

  void register_host(void* pointer, std::size_t bytes) override {
    BookkeepingGuard guard(captures_);
    CUWEAVE_CUDA_TRY(cudaHostRegister(pointer, bytes, cudaHostRegisterPortable));
  }

  void unregister_host(void* pointer) override {
    BookkeepingGuard guard(captures_);
    CUWEAVE_CUDA_TRY(cudaHostUnregister(pointer));
  }

  bool is_pinned(const void* pointer) override { return pointer_attributes(pointer).type == cudaMemoryTypeHost; }

  int pointer_device(const void* pointer) override {
    const cudaPointerAttributes attributes = pointer_attributes(pointer);
    const bool on_device = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    return on_device ? attributes.device : -1;
  }

  void copy_async(void* destination, const void* source, std::size_t bytes, StreamHandle stream) override {
    const OwnCall own;  // Note [cuweave's own runtime calls]
    CUWEAVE_CUDA_TRY(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, as_stream(stream)));
  }

  void copy_batch(const std::vector<BatchedCopy>& copies, StreamHandle stream) override {
    std::vector<void*> destinations;
    std::vector<const void*> sources;
    std::vector<std::size_t> sizes;
    std::vector<cudaMemcpyAttributes> attributes;
    std::vector<std::size_t> first_copies;  // attributes[i] applies to copy first_copies[i] alone
    for (const BatchedCopy& copy : copies) {
      first_copies.push_back(destinations.size());
      destinations.push_back(copy.destination);
      sources.push_back(copy.source);
      sizes.push_back(copy.bytes);
      cudaMemcpyAttributes attribute{};
      // A pageable source is read during the call, as cudaMemcpyAsync reads one; the driver may then copy it
      // out of stream order, which nothing before it on the stream can notice (it does not write pageable memory
      // asynchronously).
      attribute.srcAccessOrder =
          copy.pageable_source ? cudaMemcpySrcAccessOrderDuringApiCall : cudaMemcpySrcAccessOrderStream;
      attributes.push_back(attribute);
    }
    CUWEAVE_CUDA_TRY(cudaMemcpyBatchAsync(destinations.data(), sources.data(), sizes.data(), copies.size(),
                                          attributes.data(), first_copies.data(), attributes.size(),
                                          as_stream(stream)));
  }

  bool copy_by_kernel(void* destination, const void* source, std::size_t bytes, int device,
                      StreamHandle stream) override {
    DeviceGuard on(device);  // (cudaStreamGetDevice is refused while the stream captures)
    if (!reachable_as_is(device, destination) || !reachable_as_is(device, source)) return false;
    CUWEAVE_CUDA_TRY(launch_copy(destination, source, bytes, as_stream(stream)));
    return true;
  }

  bool enable_peer_access(int device, int peer) override {
    if (device == peer) return false;
    std::lock_guard<std::mutex> lock(peers_mutex_);
    const std::pair<int, int> pair{std::min(device, peer), std::max(device, peer)};
    auto known = peer_access_.find(pair);
    if (known != peer_access_.end()) return known->second;
    int forward = 0, backward = 0;
    CUWEAVE_CUDA_TRY(cudaDeviceCanAccessPeer(&forward, device, peer));
    CUWEAVE_CUDA_TRY(cudaDeviceCanAccessPeer(&backward, peer, device));
    const bool direct = forward != 0 && backward != 0;
    if (direct) {
      reach_peer(device, peer);
      reach_peer(peer, device);
    }
    peer_access_.emplace(pair, direct);
    return direct;
  }

  void copy_between_devices(void* destination, int destination_device, const void* source, int source_device,
                            std::size_t bytes, StreamHandle stream) override {
    if (peers_reach_each_other(destination_device, source_device)) {
      // The pools grant each other (enable_peer_access): the copy engine goes over the link directly.
      const OwnCall own;  // Note [cuweave's own runtime calls]
      CUWEAVE_CUDA_TRY(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, as_stream(stream)));
    } else {
      // Needs no access to either side: the driver stages the copy through the host.
      CUWEAVE_CUDA_TRY(
          cudaMemcpyPeerAsync(destination, destination_device, source, source_device, bytes, as_stream(stream)));
    }
  }

  void* allocate_unpooled(std::size_t bytes, int device) override {
    BookkeepingGuard guard(captures_);
    DeviceGuard on(device);
    void* pointer = nullptr;
    CUWEAVE_CUDA_TRY(cudaMalloc(&pointer, bytes));
    return pointer;
  }

  void free_unpooled(void* pointer) noexcept override {
    BookkeepingGuard guard(captures_);
    CUWEAVE_CUDA_TRY_QUIET(cudaFree(pointer));
  }

  void memset_async(void* destination, int value, std::size_t bytes, StreamHandle stream) override {
    CUWEAVE_CUDA_TRY(cudaMemsetAsync(destination, value, bytes, as_stream(stream)));
  }

 private:
  // Peer access from `device` to `peer`'s memory, and `peer`'s pool granted to `device`: cudaDeviceEnablePeerAccess
  // maps the peer's cudaMalloc memory only; the pool's memory needs its own grant (Note [Simulated device access]).
  void reach_peer(int device, int peer) {
    {
      DeviceGuard on(device);
      const cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // enabled by another library in this process: as good
      } else {
        CUWEAVE_CUDA_TRY(status);
      }
    }
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = device;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    CUWEAVE_CUDA_TRY(cudaMemPoolSetAccess(memory_pool(peer), &access, 1));
  }

  bool peers_reach_each_other(int device, int peer) {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    auto known = peer_access_.find({std::min(device, peer), std::max(device, peer)});
    return known != peer_access_.end() && known->second;
  }

  // Whether kernels on `device` (the current device) can use `pointer` as it is: its own or managed memory,
  // or pinned host memory mapped at the same address (always so under unified addressing).
  static bool reachable_as_is(int device, const void* pointer) {
    const cudaPointerAttributes attributes = pointer_attributes(pointer);
    switch (attributes.type) {
      case cudaMemoryTypeDevice: return attributes.device == device;
      case cudaMemoryTypeManaged: return true;
      case cudaMemoryTypeHost: return attributes.devicePointer == pointer;
      default: return false;
    }
  }

  // A stream of cuweave's own per device, never captured, for work that must stay outside a capture.
  cudaStream_t side_stream(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = side_streams_.find(device);
    if (it != side_streams_.end()) return it->second;
    DeviceGuard guard(device);
    cudaStream_t stream = nullptr;
    CUWEAVE_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    side_streams_.emplace(device, stream);
    return stream;
  }

  // cuweave's own stream-ordered pool per device, so that freed memory is cached without touching the
  // device's default pool, which other libraries may configure.
  cudaMemPool_t memory_pool(int device) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = pools_.find(device);
      if (it != pools_.end()) return it->second;
    }
    // Created outside the lock (no CUDA call under a mutex); a thread that loses the race destroys its pool.
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    CUWEAVE_CUDA_TRY(cudaMemPoolCreate(&pool, &props));
    std::uint64_t keep_everything = UINT64_MAX;
    CUWEAVE_CUDA_TRY(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    cudaMemPool_t winner = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      winner = pools_.emplace(device, pool).first->second;
    }
    if (winner != pool) CUWEAVE_CUDA_TRY_QUIET(cudaMemPoolDestroy(pool));
    return winner;
  }

  const ActiveCaptures& captures_;
  std::mutex mutex_;
  std::unordered_map<int, cudaMemPool_t> pools_;        // LOCK: mutex_
  std::unordered_map<int, cudaStream_t> side_streams_;  // LOCK: mutex_
  std::mutex peers_mutex_;
  std::map<std::pair<int, int>, bool> peer_access_;  // LOCK: peers_mutex_; (lower, higher device) -> direct
};

}  // namespace

std::unique_ptr<MemoryBackend> make_memory_backend(const ActiveCaptures& captures) {
  return std::make_unique<CudaMemoryBackend>(captures);
}

}  // namespace cuweave::cuda
