// Kernel arguments from Python: launch extents and one value slot per kernel parameter, checked against the
// parameter's size. Shared by eager launches (bind_kernel.cpp) and kernel graph nodes (bind_graph.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <string>
#include <vector>

#include "bindings/pybind.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/inline_vector.hpp"
#include "cuweave/kernel.hpp"
#include "cuweave/operation.hpp"
#include "cuweave/sanitizer.hpp"

namespace cuweave::bindings {

// An int or a tuple/list of 1 to 3 positive ints; `what` names the argument in errors.
Dim3 dim3_from(py::handle value, const char* what);

// Arguments packed for one launch: a value slot per parameter. Up to kInlineParameters parameters are
// stored inside the object, so packing the usual launch allocates nothing. pointers[i] points at slots[i]
// (what a launch's `void**` takes); a move re-points them at the new object's slots. The device arrays
// passed go to the launch's Operation.
struct PackedArguments {
  static constexpr std::size_t kInlineParameters = 16;
  using Slot = std::array<std::uint64_t, 2>;  // 16 bytes each: every scalar and pointer fits
  // An array passed without cuweave.reads()/writes(): its access follows its parameter's read-only flag.
  struct Undeclared {
    std::size_t array;      // its index in the operation's arrays
    std::size_t parameter;
  };

  PackedArguments() = default;
  PackedArguments(PackedArguments&& other) noexcept
      : slots(std::move(other.slots)), pointers(std::move(other.pointers)), undeclared(std::move(other.undeclared)) {
    repoint();
  }
  PackedArguments& operator=(PackedArguments&& other) noexcept {
    slots = std::move(other.slots);
    pointers = std::move(other.pointers);
    undeclared = std::move(other.undeclared);
    repoint();
    return *this;
  }
  PackedArguments(const PackedArguments&) = delete;
  PackedArguments& operator=(const PackedArguments&) = delete;

  InlineVector<Slot, kInlineParameters> slots;
  InlineVector<void*, kInlineParameters> pointers;  // pointers.data() is the launch's `void** arguments`
  InlineVector<Undeclared, kInlineParameters> undeclared;

 private:
  void repoint() noexcept {
    for (std::size_t i = 0; i < pointers.size() && i < slots.size(); ++i) pointers[i] = slots[i].data();
  }
};

// An argument wrapped by cuweave.reads(array) or cuweave.writes(array): the array, passed as a pointer, and
// the access that this launch makes of it (Note [Kernel accesses]).
struct DeclaredAccess {
  std::shared_ptr<DeviceArray> array;
  sanitizer::AccessKind kind = sanitizer::AccessKind::Write;
};

// Packs `args_object` (a tuple or list) for `kernel`; the device arrays passed go to `operation`, each
// with the access the launch makes of it.
PackedArguments pack(const Kernel& kernel, py::handle args_object, Operation& operation);

// Note [Kernel accesses]
// A compiled kernel touches the device arrays passed to it, each whole (the bytes from its lowest to its
// highest element): it reads those passed to a parameter declared read-only and reads and writes the
// others. cuweave.compile() declares the `const T*` parameters of the kernel's signature read-only;
// kernel.read_only declares others; cuweave.reads(a) and cuweave.writes(a) around an argument declare it
// for one launch, over both. What a kernel reaches through raw integer addresses or pointers inside structs
// is not seen. The sanitizer checks, and cuweave.weave() orders, launches by these accesses.

}  // namespace cuweave::bindings
