#include "sim/freed_memory.hpp"

#include <utility>

namespace cuweave::sim {

std::function<void()> faulting_if_freed(MemoryRegistry& memory, DeviceAccess& access, int device,
                                        std::initializer_list<const void*> pointers, std::function<void()> work) {
  std::array<const void*, 4> known{};
  std::size_t count = 0;
  for (const void* pointer : pointers) {
    if (pointer != nullptr && count < known.size() && memory.find(pointer)) known[count++] = pointer;
  }
  if (count == 0) return work;
  return [&memory, &access, device, known, count, work = std::move(work)] {
    for (std::size_t i = 0; i < count; ++i) {
      if (!memory.find(known[i])) {
        access.lose_context(device, kTouchedFreedMemory);
        return;
      }
    }
    work();
  };
}

}  // namespace cuweave::sim
