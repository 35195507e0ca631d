// How many host holds are pending: stream-ordered host callbacks that have not returned and host latches
// that hold a stream and have not been released.
//
// Note [Enqueueing behind a held stream]
// A stream held for the host (Note [Stream-ordered host callbacks], Note [Host latches]) still takes new
// work, and CUDA queues only so much: once its queue is full, the next launch or copy blocks in the driver
// until held work drains. When the thread that blocks holds the GIL while the hold waits for Python (an
// ordered callback's callable; a latch that another Python thread releases), that is a deadlock. So while
// any hold is pending, the bindings release the GIL around the enqueues they make (UnblockedEnqueue in
// bindings/common.hpp); otherwise they keep it, and this costs one relaxed atomic load per call.
#pragma once

namespace cuweave::held_streams {

void add() noexcept;
void remove() noexcept;
// True while any hold is pending (a relaxed load: a hold begun on another thread a moment ago may be
// missed, which only matters to work queued behind that hold, queued after it, on this thread).
bool any() noexcept;

}  // namespace cuweave::held_streams
