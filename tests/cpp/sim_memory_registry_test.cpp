// The simulator's memory book, directly: what it knows of each range, what it refuses as CUDA does, the bytes new
// memory reads (Note [Memory that reads unwritten]) and graph memory's existence (Note [Simulated graph memory]).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/errors.hpp"
#include "sim/memory_registry.hpp"
#include "sim/unwritten_memory.hpp"

namespace cuweave::sim {
namespace {

// The CUDA error name of what `call` throws, or "" if it throws nothing.
template <typename Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const BackendError& error) {
    return error.name() + " from " + error.call();
  }
  return "";
}

bool all_bytes_are(const void* pointer, std::size_t bytes, unsigned char value) {
  const auto* begin = static_cast<const unsigned char*>(pointer);
  for (std::size_t i = 0; i < bytes; ++i) {
    if (begin[i] != value) return false;
  }
  return true;
}

TEST(SimMemoryRegistryTest, AnAllocationIsFoundByEveryAddressInsideItAndNonePastItsEnd) {
  MemoryRegistry registry;
  auto* device = static_cast<char*>(registry.allocate(1000, MemoryKind::Device, 1));
  auto* pinned = static_cast<char*>(registry.allocate(64, MemoryKind::Pinned, 0));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(device) % 256, 0u);  // cudaMalloc's alignment
  const auto found = registry.find(device + 999);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->start, reinterpret_cast<std::uintptr_t>(device));
  EXPECT_EQ(found->bytes, 1000u);
  EXPECT_EQ(found->kind, MemoryKind::Device);
  EXPECT_EQ(found->device, 1);
  EXPECT_FALSE(found->pooled);
  EXPECT_FALSE(registry.find(device + 1000).has_value());  // its rounded tail is no part of it
  EXPECT_TRUE(registry.is_device_memory(device));
  EXPECT_FALSE(registry.is_device_memory(pinned));
  EXPECT_EQ(registry.find(pinned)->kind, MemoryKind::Pinned);
  const int on_the_stack = 0;
  EXPECT_FALSE(registry.find(&on_the_stack).has_value());  // ordinary memory is nobody's
  EXPECT_EQ(registry.ranges_of(MemoryKind::Device), 1u);
  EXPECT_EQ(registry.ranges_of(MemoryKind::Pinned), 1u);
  registry.release(device);
  registry.release(pinned);
  EXPECT_FALSE(registry.find(device).has_value());
  EXPECT_EQ(registry.ranges_of(MemoryKind::Device), 0u);
}

TEST(SimMemoryRegistryTest, DeviceBytesCountWholeBlocksUntilReleasedAndHostMemoryIsNotCounted) {
  MemoryRegistry registry;
  void* first = registry.allocate(1, MemoryKind::Device, 0);
  void* second = registry.allocate(300, MemoryKind::Device, 0, /*pooled=*/true);
  void* pinned = registry.allocate(4096, MemoryKind::Pinned, 0);
  EXPECT_EQ(registry.device_bytes_in_use(), 256u + 512u);
  registry.release(first);
  EXPECT_EQ(registry.device_bytes_in_use(), 512u);
  registry.release(second);
  registry.release(pinned);
  EXPECT_EQ(registry.device_bytes_in_use(), 0u);
}

TEST(SimMemoryRegistryTest, AnAllocationPastTheDevicesMemoryIsRefusedAsOutOfMemoryNamingTheCall) {
  MemoryRegistry registry;
  EXPECT_EQ(error_of([&] { registry.allocate(kSimulatedDeviceMemory + 1, MemoryKind::Device, 0); }),
            "cudaErrorMemoryAllocation from cudaMalloc");
  EXPECT_EQ(error_of([&] { registry.allocate(kSimulatedDeviceMemory + 1, MemoryKind::Device, 0, true); }),
            "cudaErrorMemoryAllocation from cudaMallocFromPoolAsync");
  EXPECT_EQ(registry.device_bytes_in_use(), 0u);  // a refused allocation takes nothing
  void* half = registry.allocate(kSimulatedDeviceMemory / 2, MemoryKind::Device, 0);
  EXPECT_EQ(error_of([&] { registry.allocate(kSimulatedDeviceMemory / 2 + 256, MemoryKind::Device, 0); }),
            "cudaErrorMemoryAllocation from cudaMalloc");
  registry.release(half);
}

TEST(SimMemoryRegistryTest, NewMemoryReadsAsFFBytesSmallOrMappedAndAWriteChangesOnlyItsOwnAllocation) {
  MemoryRegistry registry;
  const std::size_t small = 4096, large = 3 * kMappedFrom + 100;
  void* a = registry.allocate(small, MemoryKind::Device, 0);
  void* b = registry.allocate(large, MemoryKind::Device, 0);
  void* c = registry.allocate(large, MemoryKind::Pinned, 0);
  EXPECT_FALSE(registry.find(a)->mapped);
  EXPECT_TRUE(registry.find(b)->mapped);  // copy-on-write mappings of one block of 0xFF bytes
  EXPECT_TRUE(all_bytes_are(a, small, 0xFF));
  EXPECT_TRUE(all_bytes_are(b, large, 0xFF));
  // Writing one mapping copies its page; the shared block, and so every other mapping, keeps its 0xFF bytes.
  std::memset(static_cast<char*>(b) + kMappedFrom - 8, 0, 16);
  EXPECT_TRUE(all_bytes_are(static_cast<char*>(b) + kMappedFrom - 8, 16, 0x00));
  EXPECT_TRUE(all_bytes_are(c, large, 0xFF));
  void* d = registry.allocate(large, MemoryKind::Device, 0);  // mapped after the write
  EXPECT_TRUE(all_bytes_are(d, large, 0xFF));
  for (void* pointer : {a, b, c, d}) registry.release(pointer);
}

TEST(SimMemoryRegistryTest, AnAccessRunningPastItsAllocationIsRefusedAndOrdinaryMemoryIsNotSimulated) {
  MemoryRegistry registry;
  auto* device = static_cast<char*>(registry.allocate(512, MemoryKind::Device, 0));
  EXPECT_TRUE(registry.within_range(device, 512, "cudaMemcpyAsync"));
  EXPECT_TRUE(registry.within_range(device + 256, 256, "cudaMemcpyAsync"));
  EXPECT_EQ(error_of([&] { registry.within_range(device + 256, 257, "cudaMemcpyAsync"); }),
            "cudaErrorInvalidValue from cudaMemcpyAsync");
  std::vector<char> pageable(64);
  EXPECT_FALSE(registry.within_range(pageable.data(), pageable.size(), "cudaMemcpyAsync"));
  registry.release(device);
}

TEST(SimMemoryRegistryTest, RegisteringOverlappingHostMemoryOrUnregisteringUnknownMemoryIsRefused) {
  MemoryRegistry registry;
  std::vector<char> host(4096);
  registry.register_range(host.data() + 1024, 1024);
  EXPECT_EQ(registry.find(host.data() + 1500)->kind, MemoryKind::Registered);
  EXPECT_TRUE(registry.within_range(host.data() + 1024, 1024, "cudaMemcpyAsync"));
  // Overlapping its start, its end, or lying inside it: CUDA refuses each.
  EXPECT_EQ(error_of([&] { registry.register_range(host.data() + 512, 1024); }),
            "cudaErrorHostMemoryAlreadyRegistered from cudaHostRegister");
  EXPECT_EQ(error_of([&] { registry.register_range(host.data() + 2047, 100); }),
            "cudaErrorHostMemoryAlreadyRegistered from cudaHostRegister");
  EXPECT_EQ(error_of([&] { registry.register_range(host.data() + 1100, 10); }),
            "cudaErrorHostMemoryAlreadyRegistered from cudaHostRegister");
  registry.register_range(host.data() + 2048, 1024);  // right after it: no overlap
  EXPECT_EQ(registry.ranges_of(MemoryKind::Registered), 2u);
  EXPECT_EQ(error_of([&] { registry.unregister_range(host.data() + 1100); }),
            "cudaErrorHostMemoryNotRegistered from cudaHostUnregister");  // not the start it was registered at
  registry.release(host.data() + 1024);  // a release is for allocations: a registration stays
  EXPECT_EQ(registry.ranges_of(MemoryKind::Registered), 2u);
  registry.unregister_range(host.data() + 1024);
  registry.unregister_range(host.data() + 2048);
  EXPECT_EQ(error_of([&] { registry.unregister_range(host.data() + 1024); }),
            "cudaErrorHostMemoryNotRegistered from cudaHostUnregister");
  EXPECT_FALSE(registry.find(host.data() + 1024).has_value());
}

TEST(SimMemoryRegistryTest, GraphMemoryExistsFromALaunchUntilAFreeAndASecondLaunchNeedsTheFirstFreed) {
  MemoryRegistry registry;
  void* ordinary = registry.allocate(256, MemoryKind::Device, 0);
  EXPECT_FALSE(registry.graph_memory_missing(ordinary));
  auto* graph = static_cast<char*>(registry.reserve_graph(1024, 0));
  EXPECT_TRUE(registry.find(graph)->pooled);  // graph memory comes from the device's pool
  EXPECT_TRUE(registry.graph_memory_missing(graph + 1023));  // before its graph's first launch
  EXPECT_FALSE(registry.graph_memory_missing(ordinary));
  EXPECT_TRUE(registry.launched_graph_memory({graph}, /*free_on_launch=*/false));
  EXPECT_FALSE(registry.graph_memory_missing(graph));
  // The first launch's bytes still live: a second launch that does not free them first is refused, and changes
  // nothing.
  EXPECT_FALSE(registry.launched_graph_memory({graph}, false));
  EXPECT_FALSE(registry.graph_memory_missing(graph));
  EXPECT_TRUE(registry.launched_graph_memory({graph}, /*free_on_launch=*/true));
  registry.freed_graph_memory(graph);  // cudaFreeAsync outside any graph
  EXPECT_TRUE(registry.graph_memory_missing(graph));
  EXPECT_TRUE(registry.launched_graph_memory({graph}, false));  // freed: the next launch makes it again
  registry.release(ordinary);
}

TEST(SimMemoryRegistryTest, GraphMemoryIsKeptUntilTrimmedAndItsAddressGoesBackOnceNoGraphHoldsIt) {
  MemoryRegistry registry;
  void* graph = registry.reserve_graph(4096, 1);
  EXPECT_EQ(registry.graph_memory_kept(1), 0u);
  registry.graph_allocate(graph);  // the allocation node ran
  EXPECT_EQ(registry.graph_memory_kept(1), 4096u);
  EXPECT_EQ(registry.graph_memory_kept(0), 0u);
  registry.trim_graph_memory(1);  // allocated now: a trim cannot give it back
  EXPECT_EQ(registry.graph_memory_kept(1), 4096u);
  registry.graph_free(graph);
  EXPECT_EQ(registry.graph_memory_kept(1), 4096u);  // freed, still held by the pool until a trim
  registry.trim_graph_memory(1);
  EXPECT_EQ(registry.graph_memory_kept(1), 0u);
  // No graph holds its node any more while the bytes exist: the address goes back at the free, not before.
  registry.graph_allocate(graph);
  registry.forget_graph(graph);
  EXPECT_TRUE(registry.find(graph).has_value());
  EXPECT_EQ(registry.device_bytes_in_use(), 4096u);
  registry.graph_free(graph);
  EXPECT_FALSE(registry.find(graph).has_value());
  EXPECT_EQ(registry.device_bytes_in_use(), 0u);
}

// Note [Reuse in a stream's order]
TEST(SimMemoryRegistryTest, MemoryFreedOnAStreamIsTakenByItsNextAllocationOfThatSizeThereBeforeItsFreeRuns) {
  MemoryRegistry registry;
  constexpr std::uint64_t kStream = 7;
  void* block = registry.allocate(1000, MemoryKind::Device, 0, /*pooled=*/true);
  const std::uint64_t ticket = registry.freed_on(block, kStream);
  ASSERT_NE(ticket, 0u);
  EXPECT_EQ(registry.reuse_freed(1000, 0, kStream + 1), nullptr);  // another stream: not ordered after the free
  EXPECT_EQ(registry.reuse_freed(1000, 1, kStream), nullptr);      // another device
  EXPECT_EQ(registry.reuse_freed(1100, 0, kStream), nullptr);      // another size (1,024 bytes rounded, not 1,280)
  EXPECT_EQ(registry.reuse_freed(1020, 0, kStream), block);        // the same rounded size, on the same stream
  EXPECT_EQ(registry.find(block)->bytes, 1020u);
  EXPECT_EQ(registry.reuse_freed(1020, 0, kStream), nullptr);      // taken once
  registry.release_freed(block, ticket);  // the first free runs after the reuse: nothing goes
  ASSERT_TRUE(registry.find(block).has_value());
  EXPECT_EQ(registry.device_bytes_in_use(), 1024u);
  const std::uint64_t second = registry.freed_on(block, kStream);
  EXPECT_NE(second, ticket);
  registry.release_freed(block, second);  // its free ran before any reuse: the memory is gone, not reusable
  EXPECT_FALSE(registry.find(block).has_value());
  EXPECT_EQ(registry.reuse_freed(1020, 0, kStream), nullptr);
  EXPECT_EQ(registry.device_bytes_in_use(), 0u);
}

TEST(SimMemoryRegistryTest, OnlyPooledDeviceMemoryIsReusedAndAReleaseBeforeTheFreeRunsEndsItsReuse) {
  MemoryRegistry registry;
  void* unpooled = registry.allocate(256, MemoryKind::Device, 0);
  void* pinned = registry.allocate(256, MemoryKind::Pinned, -1);
  EXPECT_EQ(registry.freed_on(unpooled, 1), 0u);
  EXPECT_EQ(registry.freed_on(pinned, 1), 0u);
  void* pooled = registry.allocate(256, MemoryKind::Device, 0, /*pooled=*/true);
  ASSERT_NE(registry.freed_on(pooled, 1), 0u);
  EXPECT_EQ(registry.freed_on(pooled, 1), 0u);  // freed once
  registry.release(pooled);                    // its free could not be queued
  EXPECT_EQ(registry.reuse_freed(256, 0, 1), nullptr);
  registry.release(unpooled);
  registry.release(pinned);
  EXPECT_EQ(registry.device_bytes_in_use(), 0u);
}

}  // namespace
}  // namespace cuweave::sim
