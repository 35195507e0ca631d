// Note [Work on freed memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Work queued on a stream keeps only the addresses it was given; nothing keeps that memory alive but the program.
// Where memory is freed before the work that touches it has run (a free on another stream, unordered with it; a
// graph replayed after its memory was freed), a GPU faults where the pages were given back (cudaErrorIllegalAddress,
// the context lost) and silently touches another allocation's bytes where its pool kept them. The simulator's
// device and pinned memory is host heap memory, which such work would corrupt (CI's wheel suite once aborted so:
// free(): corrupted unsorted chunks), and a silent write would hide the bug from CI. So work whose device or
// page-locked memory no longer exists as it runs faults, always, as a kernel touching memory it cannot reach does
// (Note [Simulated device access]): its device's context is lost, and it moves no byte. Memory freed and taken by
// a new allocation on the same stream still exists (Note [Reuse in a stream's order]), as on a GPU. Pageable host
// memory, which the simulator does not know from freed memory, is not checked.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <initializer_list>

#include "sim/device_access.hpp"
#include "sim/memory_registry.hpp"

namespace cuweave::sim {

// Why a device's context was lost by work on freed memory.
inline constexpr const char* kTouchedFreedMemory = "touched memory that was freed before it ran";

// `work` of an operation on `device` that touches `pointers` (null ones: none), made to check as it runs that the
// memory it touches still exists, and to lose the device's context instead where some does not. Only the pointers
// into memory the simulator knows now (device, pinned or registered) are checked; `work` is returned as it was
// where there is none.
std::function<void()> faulting_if_freed(MemoryRegistry& memory, DeviceAccess& access, int device,
                                        std::initializer_list<const void*> pointers, std::function<void()> work);

}  // namespace cuweave::sim
