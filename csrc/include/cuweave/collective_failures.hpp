// How a collective that failed reaches the host threads that wait for its stream.
//
// Note [Collective failures reach the waits]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A collective that failed (Note [Collective timeouts] in communicator.hpp) ends by its communicator's
// abort, and its stream moves on without the result. So the program must learn of it where it looks at
// that stream's work: at the end of a host wait (stream.synchronize(), a wait for an event recorded on the
// stream, which to_numpy and Transfer.wait are, a device synchronize) and from a completion query that
// answered true. Each of these raises the failure when what it waited for was queued after the failed
// collective on the same stream, and only then; a wait for earlier work returns normally.
//
// Ordering by numbers, not by pointers into queues: every watched collective (or graph replay holding
// collectives) takes the next number of one process-wide sequence once it is queued, and a failure is
// marked as (stream, number). An event record notes its stream and the sequence's value at the record; a
// stream wait notes the value as it begins. A wait covers the failures marked on its stream up to the
// value it noted. The failure is marked before the communicator is aborted, so a wait that the abort ends
// always finds it.
//
// Reported once, like a host callback's error (CallbackError): the first wait that covers a failure raises
// it and takes it; the communicator itself keeps refusing collectives for good. Without any failure marked
// (the usual case) a wait pays one atomic load, a record one more.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>

namespace cuweave {

class Stream;

namespace collective_failures {

namespace detail {
extern std::atomic<std::uint64_t> numbered;  // the last number handed out
extern std::atomic<int> unreported;          // failures marked and not yet reported
}  // namespace detail

// The sequence's value now: what a wait that begins now, or an event recorded now, covers.
inline std::uint64_t numbered() noexcept { return detail::numbered.load(std::memory_order_relaxed); }
// The number of a collective (or a replay holding collectives) queued just now.
std::uint64_t next() noexcept;

// Marks `failure` (an exception to throw) on `stream` for the collective numbered `number`.
void mark(const std::weak_ptr<Stream>& stream, const Stream* key, std::uint64_t number,
          std::exception_ptr failure) noexcept;

// Throws, taking it, the earliest failure marked on `stream` with a number up to `through`, if any.
void report(const Stream& stream, std::uint64_t through);
// The same for an event recorded on the stream at address `recorded_on` (which may be gone by now: a stream
// made since at the same address has only failures numbered after the record).
void report_recorded(const Stream* recorded_on, std::uint64_t through);
// The same for every stream of `device` (a device synchronize).
void report_device(int device, std::uint64_t through);

// One atomic load: whether any failure waits to be reported.
inline bool any() noexcept { return detail::unreported.load(std::memory_order_acquire) > 0; }

}  // namespace collective_failures
}  // namespace cuweave
