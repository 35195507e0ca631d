// The stream-race sanitizer as the core uses it: off by default (one relaxed load per hook), on for a
// `with cuweave.sanitize():` block or a whole process (CUWEAVE_SANITIZE=1). The core reports what it
// issues; RaceDetector (race_detector.hpp, Note [Stream races]) decides what is ordered.
//
// Note [What the sanitizer sees]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Agents: every stream, and the host (all threads as one: see host_agent_locked).
// Operations: the stream-ordered operations of Stream (copies, memsets and fills, the built-in kernels)
// and compiled-kernel launches, each with the bytes it reads and writes. Ordering: stream program order,
// the host's issue order, event records and waits, a stream's wait for another, host synchronizes of a
// stream, an event (and an event query that found it complete) or a device, and the legacy default
// stream's implicit synchronization with blocking streams; an adopted stream found idle, unless its owner
// reports its synchronizes (Note [Foreign synchronizes] in sanitizer.cpp). cuweave's new allocations forget
// their range's history; blocks another library's allocator hands out again keep it (Note [Reused blocks]).
// Work issued into a capture is not checked (it runs at replay).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/race_detector.hpp"

namespace cuweave {
class Capture;
class DeviceArray;
class Stream;
}

namespace cuweave::sanitizer {

enum class Mode { Raise, Warn, Ignore };  // Ignore: tracks ordering, reports nothing (a known, wanted race)

namespace detail {
extern std::atomic<int> enabled_count;
extern std::atomic<bool> ever_enabled;
}
// True while the sanitizer is on anywhere (one relaxed load).
inline bool enabled() noexcept { return detail::enabled_count.load(std::memory_order_relaxed) > 0; }
// True once it has been on: what it knows about a stream or an event must then be forgotten when that goes.
inline bool ever_enabled() noexcept { return detail::ever_enabled.load(std::memory_order_relaxed); }
// Turns it on (nestable; the innermost mode applies) and off again.
void enable(Mode mode);
void disable();
Mode mode();

// What a race raises in Mode::Raise (cuweave.RaceError in Python); its what() is the report.
class RaceFound : public std::runtime_error {
 public:
  explicit RaceFound(std::vector<Conflict> conflicts);
  const std::vector<Conflict>& conflicts() const noexcept { return conflicts_; }

 private:
  std::vector<Conflict> conflicts_;
};
// Installed by the bindings: reports races in Mode::Warn (a Python warning), and on threads that must not
// throw. Without one, reports go to stderr.
using Reporter = void (*)(const std::vector<Conflict>& conflicts);
void set_reporter(Reporter reporter) noexcept;
// The report as a user reads it: both operations, their streams, the bytes, both call sites, the fix.
std::string describe(const std::vector<Conflict>& conflicts);

// Hooks: call only when enabled(). Throw RaceFound (Mode::Raise) before the operation is queued.
void operation(Stream& stream, std::string_view name, AccessSpan accesses);
// An operation another library queued (PyTorch's operators, CuPy's kernels): as operation(), and its work is
// watched for a synchronize made where the sanitizer cannot see it, on any stream, the legacy default stream
// included (Note [Foreign synchronizes]), unless the stream's owner reports its synchronizes, or the library
// that queued it reports every synchronize of its own (`synchronizes_reported`: PyTorch's work on the default
// streams, which other libraries share).
void foreign_operation(Stream& stream, std::string_view name, AccessSpan accesses,
                       bool synchronizes_reported = false);
// The host reads or writes these bytes now, through another library (PyTorch's operators on pinned CPU
// tensors, which its streams' copies also touch): checked against the streams' accesses the host has not waited
// for (Note [Host operations of another library] in sanitizer.cpp).
void foreign_host_operation(std::string name, AccessSpan accesses);
void event_recorded(EventHandle event, Stream& stream);
void stream_waited_event(Stream& stream, EventHandle event);
void stream_waited_stream(Stream& stream, Stream& other);
void host_synchronized_stream(Stream& stream);
void host_synchronized_event(EventHandle event);
void host_synchronized_device(int device);
void allocated(const void* pointer, std::size_t bytes);
// Another library's allocator (PyTorch's caching allocator, CuPy's pool) handed out [pointer, pointer + bytes)
// for work on `stream`: the bytes keep their history, checked as a reuse (Note [Reused blocks]) whose report
// gives `allocator`'s fixes.
void foreign_handed_out(const void* pointer, std::size_t bytes, Stream& stream, Allocator allocator);
// The block handed out at `pointer` is also used on `stream`, recorded with the allocator (record_stream):
// when freed, it is reused only after `stream`'s work up to the free.
void foreign_stream_recorded(const void* pointer, Stream& stream);
// The block handed out at `pointer` was freed (its last reference dropped here).
void foreign_freed(const void* pointer);
// The owner of the adopted `stream` tells the sanitizer its synchronizes and event waits (PyTorch, through
// its GPU trace): its work is ordered only by what is told, never by being found idle (Note [Foreign
// synchronizes]). Holds for the CUDA handle until a stream cuweave makes takes that handle.
void owner_reports_synchronizes(const Stream& stream);
// The copy just queued on `stream` reads pinned host memory: the host must not change it before waiting
// for the copy (Note [Host writes under a copy]).
void copy_reads_host(Stream& stream, const void* source, std::size_t bytes);
// The copy about to be queued on `stream` (checked by operation(), not yet queued: it cannot have written
// anything yet) writes pinned host memory: the copies reading it before are checked and no longer
// watched, and those queued to read it before the host follows this one are not watched (Note [Host
// writes under a copy]). A host write found there is reported by the next checked operation or wait.
void copy_writes_host(Stream& stream, const void* destination, std::size_t bytes);
// cuweave waited for every queued copy that reads host memory [pointer, pointer + bytes) (leaving a
// registration does): the host's later writes there are ordered after them.
void host_waited_for_readers(const void* pointer, std::size_t bytes);
// A host callback on `stream` returned (on the callback thread; never throws): what it wrote follows the
// stream's earlier copies (Note [Host writes under a copy]).
void host_callback_returned(const Stream& stream) noexcept;
// The memory at `pointer` will be freed only after `stream`'s work so far (cuweave's lifetime tracker
// holds it), whichever stream the free is then queued on.
void free_follows(const void* pointer, Stream& stream);
// Note [Releases the host saw complete] (lifetime_tracker.hpp): the tracker will release Holds once `stream`'s work
// so far has completed; returns the point naming that work (0: none, the sanitizer has not met the stream or it is
// another library's capture's).
std::uint64_t held_until_complete(Stream& stream) noexcept;
// The tracker found the work `point` names complete: every later free follows it (the program's other work does
// not). Never throws.
void held_complete(std::uint64_t point) noexcept;
// The memory is freed in `stream`'s order (a free access: later uses are reported). Never throws: a race
// found here is raised by the next checked operation on a thread that can raise.
void freed(const void* pointer, std::size_t bytes, const Stream& stream) noexcept;
// The capture ended or was abandoned: what its work touches (its graph's replays touch that), and its
// own detector goes (Note [Races inside a capture]). Nothing when the sanitizer did not watch it.
std::optional<std::vector<Access>> capture_ended(const Capture& capture) noexcept;
// The stream was closed or destroyed: its handle may name another stream from now on.
void stream_destroyed(const Stream& stream) noexcept;
// A closed stream's object goes: what is keyed by the object goes with it, and nothing keyed by its handle,
// which may be another stream's by now.
void closed_stream_gone(const Stream& stream) noexcept;
void event_destroyed(EventHandle event) noexcept;

// The bytes of `count` elements of `type`.
std::size_t bytes_of(NumericType type, std::size_t count) noexcept;
inline Access reads(const void* pointer, std::size_t bytes) {
  auto begin = reinterpret_cast<std::uintptr_t>(pointer);
  return {begin, begin + bytes, AccessKind::Read};
}
inline Access writes(const void* pointer, std::size_t bytes) {
  auto begin = reinterpret_cast<std::uintptr_t>(pointer);
  return {begin, begin + bytes, AccessKind::Write};
}
// The bytes from `array`'s lowest element to its highest (strides may be negative), as `kind`.
Access touches(const DeviceArray& array, AccessKind kind);
// A write of every address: what an operation whose accesses are unknown counts as (Note [Weaving]).
inline Access everything() { return {0, ~std::uintptr_t{0}, AccessKind::Write}; }

// For tests and the benchmark: what the detector holds.
std::size_t shadow_ranges();
struct ClockSizes {
  std::size_t agents = 0;         // streams and host not dropped (Note [Agents that are gone])
  std::size_t largest_clock = 0;  // entries of the longest of their clocks
};
ClockSizes clock_sizes();

}  // namespace cuweave::sanitizer
