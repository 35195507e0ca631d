// What one stream-ordered operation touches, described once (Note [One operation, one path]).
//
// Note [One operation, one path]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every cross-cutting concern needs the same knowledge of an operation: the weave places it by what it reads
// and writes, the sanitizer checks those bytes, lifetimes keep its memory alive, a capture keeps what its node
// uses. So the code that knows an operation's operands (a binding, or a core caller with raw pointers) fills
// one Operation: its name, the device arrays it reads or writes, other bytes it touches (pinned host memory,
// a condition's element), and what it must keep alive besides. One path (submission.hpp) then takes it, in
// this order:
//  1. placement: inside cuweave.weave(), the weave's choice by the accesses; else the stream given, else the
//     thread's current stream;
//  2. the stream's device made current (Note [The device follows the stream]);
//  3. the sanitizer's check of the accesses (Note [What the sanitizer sees]), when it is on;
//  4. the backend call (eager, or a graph node when the stream is capturing; a capture then adds the accesses
//     to its graph's footprint, Note [Footprints of captures] in capture.hpp);
//  5. lifetimes: each array's memory follows the stream (Note [Memory follows its stream]; done before the
//     check, which records even an operation it refuses), an array of another device (a peer's) and
//     everything else kept is held until the work completes, or by the graph under capture, and the arrays
//     written take the stream as the one their producing work is ordered on.
// The accesses are computed once, and only when the weave, the sanitizer or a capture asks: the plain path pays
// for the arrays it must order anyway and nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "cuweave/hold.hpp"
#include "cuweave/inline_vector.hpp"
#include "cuweave/race_detector.hpp"

namespace cuweave {

class DeviceArray;

// A device array an operation uses, and how (Write: written, or read and written): the whole array, or the
// bytes [part_begin, part_end) inside it.
struct ArrayUse {
  std::shared_ptr<DeviceArray> array;
  sanitizer::AccessKind kind = sanitizer::AccessKind::Write;
  std::uintptr_t part_begin = 0;  // both 0: the whole array
  std::uintptr_t part_end = 0;
};

class Operation {
 public:
  static constexpr std::size_t kInlineArrays = 8;

  // `name` (what a sanitizer report calls it: "copy", "ops.add", "kernel saxpy") must outlive the submission.
  explicit Operation(std::string_view name) noexcept : name_(name) {}
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  Operation& reads(std::shared_ptr<DeviceArray> array) { return uses(std::move(array), sanitizer::AccessKind::Read); }
  Operation& writes(std::shared_ptr<DeviceArray> array) { return uses(std::move(array), sanitizer::AccessKind::Write); }
  Operation& uses(std::shared_ptr<DeviceArray> array, sanitizer::AccessKind kind);
  // `bytes` at `pointer`, inside `array`: those bytes are the access, the array's memory what follows the stream.
  Operation& uses_part(std::shared_ptr<DeviceArray> array, const void* pointer, std::size_t bytes,
                       sanitizer::AccessKind kind);
  // Bytes that no DeviceArray describes (pinned host memory, raw pointers of the core's own callers).
  Operation& reads(const void* pointer, std::size_t bytes);
  Operation& writes(const void* pointer, std::size_t bytes);
  // A resource whose operations run in the order they were queued whatever streams they are on (a
  // communicator: NCCL runs its collectives in each rank's issue order): placement treats the operation as
  // writing one byte of it, so a weave keeps them in issue order. Not an access of memory: the sanitizer
  // checks no such byte.
  Operation& ordered_by(const void* resource);
  // Kept alive until the work completes (a pinned block, a Python object, a kernel's loaded module).
  Operation& keep_alive(Hold hold);
  Operation& keep_alive(Holds holds);

  // Placement may have `arrays()[index]` read a copy of its array instead (Note [Weaving]: several devices).
  void stand_in(std::size_t index, std::shared_ptr<DeviceArray> copy);
  // The array the operation uses in `array`'s place: `array` unless placement gave it a stand-in. Callers that
  // take pointers after placement read them from here.
  const std::shared_ptr<DeviceArray>& standing_for(const std::shared_ptr<DeviceArray>& array) const noexcept {
    for (const auto& [original, copy] : stand_ins_) {
      if (original == array.get()) return copy;
    }
    return array;
  }

  std::string_view name() const noexcept { return name_; }
  const InlineVector<ArrayUse, kInlineArrays>& arrays() const noexcept { return arrays_; }
  // Before submission: an array's access may be settled after it was added (a kernel's read-only flags).
  InlineVector<ArrayUse, kInlineArrays>& arrays() noexcept { return arrays_; }
  // Every byte range touched, the arrays' first; computed at the first call after a change. A read of an array
  // the operation also writes whole is left out: the write covers it (an in-place update, out=x).
  sanitizer::AccessSpan accesses();
  const std::vector<sanitizer::Access>& bytes() const noexcept { return bytes_; }
  // What placement orders the operation by: accesses(), and a byte of each resource it is ordered_by().
  sanitizer::AccessSpan placement_accesses();
  Holds& kept() noexcept { return kept_; }

 private:
  void append_bytes(const DeviceArray& array, sanitizer::AccessKind kind);
  // Whether the operation writes all of `array` (a whole-array write use).
  bool written_whole(const DeviceArray* array) const noexcept;

  std::string_view name_;
  InlineVector<ArrayUse, kInlineArrays> arrays_;
  std::vector<sanitizer::Access> bytes_;
  Holds kept_;
  std::vector<std::pair<const DeviceArray*, std::shared_ptr<DeviceArray>>> stand_ins_;
  InlineVector<sanitizer::Access, kInlineArrays> accesses_;  // inline: the check allocates nothing for them
  bool accesses_made_ = false;
  std::vector<sanitizer::Access> order_;               // ordered_by()'s bytes
  std::vector<sanitizer::Access> placement_accesses_;  // accesses_ and order_, made when order_ is not empty
};

}  // namespace cuweave
