#include "sim/unwritten_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace cuweave::sim {

namespace {

constexpr std::size_t kBlock = std::size_t{8} << 20;  // one mapping each: 16 GB takes 2048 of the 65530 allowed

std::size_t whole_blocks(std::size_t bytes) { return (bytes + kBlock - 1) / kBlock * kBlock; }

// The file of one block of 0xFF bytes, made at first use; -1 where the system has no memfd.
int unwritten_block() {
  static const int file = [] {
    const int fd = memfd_create("cuweave-sim-unwritten", MFD_CLOEXEC);
    if (fd < 0) return -1;
    void* block = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(kBlock)) == 0) {
      block = mmap(nullptr, kBlock, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    if (block == MAP_FAILED) {
      close(fd);
      return -1;
    }
    std::memset(block, 0xFF, kBlock);
    munmap(block, kBlock);
    return fd;
  }();
  return file;
}

}  // namespace

void* map_unwritten(std::size_t bytes) noexcept {
  const int file = unwritten_block();
  if (file < 0) return nullptr;
  const std::size_t size = whole_blocks(bytes);
  // The address range first, then each block mapped into it privately: writes stay in this allocation.
  void* base = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  for (std::size_t offset = 0; offset < size; offset += kBlock) {
    void* at = static_cast<char*>(base) + offset;
    if (mmap(at, kBlock, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, file, 0) == MAP_FAILED) {
      munmap(base, size);
      return nullptr;
    }
  }
  return base;
}

void unmap_unwritten(void* pointer, std::size_t bytes) noexcept { munmap(pointer, whole_blocks(bytes)); }

}  // namespace cuweave::sim
