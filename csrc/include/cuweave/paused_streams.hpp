// How many host pauses are pending: stream-ordered host callbacks that have not returned and host latches
// that pause a stream and have not been released.
//
// Note [Enqueueing behind a paused stream]
// A stream paused for the host (Note [Stream-ordered host callbacks], Note [Host latches]) still takes new
// work, and CUDA queues only so much: once its queue is full, the next launch or copy blocks in the driver
// until paused work drains. When the thread that blocks holds the GIL while the pause waits for Python (an
// ordered callback's callable; a latch that another Python thread releases), that is a deadlock. So while
// any pause is pending, the bindings release the GIL around the enqueues they make (UnblockedEnqueue in
// bindings/gil.hpp); otherwise they keep it, and this costs one relaxed atomic load per call.
//
// Note [Releases behind a pause]
// Some releases may wait for all the device's queued work: cudaGraphExecDestroy does (seen on an H100,
// CUDA 13, for a graph whose launches had finished long before), as does NCCL's ncclCommDestroy (it synchronizes
// the communicator's streams and frees its device memory), and while it waits other threads' CUDA
// calls can wait behind it. They run in destructors, wherever the last reference dies: often in Python's
// garbage collector with the GIL held, or on the very thread that will later release a latch. Behind a
// pending pause that was a deadlock (a Graph collected by gc.collect() hung until the pause's deadline).
// With no pause pending, the device finishes its queued work without the host's help (no driver thread
// needs the GIL: Note [Stream-ordered host callbacks]), so such a release waits a bounded time. So it runs
// at once when no pause is pending, and otherwise when the last pending pause ends, on the thread ending it.
//
// Except on the host-callback thread. It ends the pauses of ordered callbacks, and a Python object let go in a
// callable's closure is often released there. A release there that waits for the device's queued work holds back
// every callback queued behind it for as long (seconds of kernels, say), and an ordered callback queued as it
// began pauses its stream until the callback thread runs it: the release would wait for the callback thread,
// which waits for the release. So that thread hands its releases to a thread of their own (the releaser), which
// runs them in the same way. So does the collective watchdog: a communicator's destroy may wait for another
// communicator's collective, which only the watchdog can time out.
#pragma once

#include <chrono>
#include <functional>

namespace cuweave::paused_streams {

void add() noexcept;
void remove() noexcept;
// True while any pause is pending (a relaxed load: a pause begun on another thread a moment ago may be
// missed, which only matters to work queued behind that pause, queued after it, on this thread).
bool any() noexcept;
// Runs `release` now when no pause is pending, else once none is (Note [Releases behind a pause]).
// `release` must not throw.
void release_when_none(std::function<void()> release) noexcept;
// From now on, the releases that the calling thread asks for, or frees up by ending the last pause, run on the
// releaser thread instead (Note [Releases behind a pause]: the host-callback thread and the collective watchdog
// call it as they start).
void hand_releases_off_this_thread() noexcept;
// Starts the releaser thread unless it runs: called beside starting a thread that will hand releases off, so that
// both threads exist once that call returns (a thread started later, at its first release, would look leaked to
// whoever counted the process's threads after the first). Where no thread can be started, the releaser starts at
// a later hand-off, or the releases run where they are freed up.
void start_releaser() noexcept;
// At the process's exit, once the host-callback thread stopped: releases run where they are freed up from now
// on, and this waits up to `grace` for those handed to the releaser to have run (the backend they call must
// still be there).
void shutdown(std::chrono::milliseconds grace) noexcept;

}  // namespace cuweave::paused_streams
