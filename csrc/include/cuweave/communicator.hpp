// One rank of a group of GPUs that run collectives together (Note [Collectives] in collective.hpp), and
// the groups in which one thread issues the collectives of several ranks.
//
// Note [Collective groups]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// One thread driving several ranks (the communicators of one process, one per GPU) must issue their
// k-th collectives together: NCCL launches a collective only once every rank of it is known, and a thread
// that waited inside the first rank's call would never make the second's. A CollectiveGroup (NCCL's
// ncclGroupStart/End) makes the calls inside it queue their work on their streams when the outermost group
// ends. So what a collective holds is handed to its stream's lifetime tracker at that moment, after the
// work is queued, never at the call (an event recorded there would complete before the collective ran).
//
// Ranks made together in one process (Communicator::for_devices) share a ledger of the collectives they
// have called: a rank whose k-th call differs from another rank's k-th call (kind, count, type, operation,
// root) is refused at the call, naming both, where NCCL would hang or mix the data. Ranks in other
// processes cannot be checked.
//
// Note [Tracing collectives]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// NCCL's non-blocking communicators (Note [Collective timeouts]) launch a collective's kernels from a thread of
// NCCL's own once the call returns, not from the thread that queued it. A cw.trace() records the work of the
// thread that opened it and of cuweave's helpers, so it does not see them: on four H200s a trace around an
// all-reduce held nothing on the communication stream. A trace of collectives records every thread
// (cw.trace(all_threads=True)). Attributing NCCL's launches to the queuing thread's traces (by their stream,
// while the collective is queued) is left to do.
//
// Note [Collective timeouts]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// A collective completes only once every rank has reached it, and NCCL's kernels wait for their peers
// without end: a rank that failed, or never calls it, would leave the others waiting forever (and a process
// waiting for it could not even exit). So every communicator has a timeout (Communicator(timeout=), else
// CUWEAVE_COLLECTIVE_TIMEOUT_S, else 10 minutes as torch.distributed's NCCL default), and nothing it does
// waits longer:
//  * The backend never blocks on the other ranks. Communicators are NCCL's non-blocking ones (config
//    blocking = 0): ncclCommInitRankConfig, a collective or ncclGroupEnd return at once, NCCL going on in a
//    thread of its own; the calling thread then polls communicator_ready (ncclCommGetAsyncError) until
//    NCCL is done, fails, the timeout passes or Ctrl-C comes (where that thread takes it). Only the first is
//    a return; the others fail the communicator (below) and raise. The holds of a collective go to its
//    stream only once NCCL has queued it: an event recorded earlier would complete before it ran.
//  * Queued collectives are watched by one watchdog thread, as torch.distributed's NCCL watchdog does: each
//    collective, and each replay of a graph holding collectives, records an event after it on its stream.
//    The watchdog forgets those whose event completed and fails the communicator when the oldest left has
//    been queued longer than the timeout (the time its stream took to reach it counts, as in torch), or when
//    the backend reports an asynchronous error (ncclRemoteError: a peer went away). It asks the backend
//    through collective_completed, which never runs queued work, so that the simulator exploring schedules
//    replays a seed's schedule whatever the watchdog does.
//  * Failing, once: the failure (ncclTimeout for a timeout, NCCL's error otherwise; naming the collective,
//    the rank and the timeout) is kept on the communicator, then marked on the streams of its unfinished
//    collectives (Note [Collective failures reach the waits]), and only then is the communicator aborted
//    (ncclCommAbort), which makes NCCL's kernels exit so that those streams move on. Later collectives,
//    and replays of graphs holding its collectives, are refused with the failure.
//  * ncclCommAbort frees the communicator, so no other NCCL call on it may overlap it or follow it: every
//    backend call on a communicator holds one process-wide mutex and finds the handle null once aborted.
//    None of them blocks (above), so the watchdog always gets the mutex promptly. A communicator that fails
//    while its calls wait in a thread's open group (NCCL refers to it until ncclGroupEnd) is aborted as
//    that group ends.
//  * Aborted as well: a communicator whose joining or queuing Ctrl-C interrupted (NCCL may not be left half
//    done), one whose rank called abort() or left a `with` block by an exception (so that the other ranks
//    fail at once instead of at their timeout), and, at Python's exit, every one with unfinished collectives.
//    A host wait that Ctrl-C interrupts leaves its collective queued: the watchdog still ends it in time.
// The simulator runs the same core with the same backend calls (Note [Simulated collectives]).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/collective.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/hold.hpp"

namespace cuweave {

class DeviceArray;
class Operation;
class Stream;

// The collectives the ranks of one process have called so far, to refuse mismatched calls.
class CollectiveLedger {
 public:
  explicit CollectiveLedger(int ranks) : next_(static_cast<std::size_t>(ranks), 0) {}
  // Notes `call` as `rank`'s next collective; throws InvalidArgument naming both calls when another rank's
  // call in that place differs.
  void note(int rank, const Collective& call);
  // Takes back `rank`'s last noted call, `call` (it was refused before it was queued).
  void withdraw(int rank, const Collective& call) noexcept;

 private:
  struct Entry {
    Collective call;
    int rank;  // who called it first
  };
  std::mutex mutex_;
  std::deque<Entry> pending_;          // LOCK: mutex_; calls some ranks have made and others not yet
  std::uint64_t first_pending_ = 0;    // LOCK: mutex_; the place of pending_.front()
  std::vector<std::uint64_t> next_;    // LOCK: mutex_; per rank, the place of its next call
};

class Communicator;

// Note [Collectives in graphs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A collective queued on a stream that cuweave captures is captured as any work is: the CUDA backend makes
// NCCL's call, and NCCL captures its kernels; the simulator adds a collective node (Note [Simulated
// collectives]). Its holds, the communicator among them, go to the capture and live as long as the graph
// and its replays (Note [Capture and lifetimes]); nothing is watched during the capture, since nothing runs.
// The graph remembers the collectives captured into it (CapturedCollective, those of embedded graphs
// included), so that a replay
//  * is refused once one of their communicators failed: its abort freed what the captured kernels use;
//  * is watched as a collective is (Note [Collective timeouts]), once per communicator, its deadline
//    counted from the launch.
// A rank replays its graphs in the order in which it would call their collectives, among its other ones,
// and every rank does the same: a replay's collectives take their places among the rank's collectives when
// it is launched. The ledger of ranks made together checks calls at capture, not at replays. Collectives
// are refused inside conditional bodies, which may run any number of times.
struct CapturedCollective {
  std::shared_ptr<Communicator> communicator;
  std::string what;  // describe() of the call
  const char* call;  // nccl_function() of its kind
};

// The timeout of a communicator's joining and collectives (Note [Collective timeouts]).
using CollectiveTimeout = std::chrono::duration<double>;  // seconds

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  // CUWEAVE_COLLECTIVE_TIMEOUT_S when set (seconds, > 0), else 10 minutes (torch.distributed's NCCL default).
  static CollectiveTimeout default_timeout();
  // A new id for the ranks of one communicator to share (bytes; pass it to the other processes).
  static std::string new_id();
  // Rank `rank` of `ranks` on `device`, joining the others through `id`. Returns once all have joined; throws
  // (ncclTimeout) when they have not within `timeout`, or NCCL's error, having aborted the half-made one.
  // Interruptible where the calling thread takes Ctrl-C (Note [Interruptible waits]).
  static std::shared_ptr<Communicator> join(const std::string& id, int ranks, int rank, int device,
                                            CollectiveTimeout timeout = default_timeout());
  // One communicator per device of `devices` (distinct), ranks in that order, sharing a ledger.
  static std::vector<std::shared_ptr<Communicator>> for_devices(const std::vector<int>& devices,
                                                                CollectiveTimeout timeout = default_timeout());
  // Aborts every communicator that has unfinished collectives (what Python's exit does: a collective waiting
  // for a rank that never comes would keep the process from ending). `why` ends up in their failures. One
  // whose collectives all completed is left alone, even before the watchdog noticed: NCCL's abort waits for
  // every graph that captured the communicator to be destroyed, and at exit those graphs still live.
  static void abort_unfinished(const std::string& why) noexcept;

  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator();  // destroys the backend's communicator unless aborted (queued collectives hold this object)

  int rank() const noexcept { return rank_; }
  int ranks() const noexcept { return ranks_; }
  int device() const noexcept { return device_; }
  CollectiveTimeout timeout() const noexcept { return timeout_; }
  // Refuses later collectives; the backend's communicator goes once the queued ones have completed.
  void close() noexcept { closed_ = true; }
  bool closed() const noexcept { return closed_; }
  // Aborts the backend's communicator now (NCCL's ncclCommAbort): its unfinished collectives end without
  // their results (the waits for them raise, naming `why`), later ones are refused, and ranks elsewhere that
  // wait for this one fail instead of waiting for their timeout. Nothing happens once it has failed.
  void abort(const std::string& why) noexcept;
  // The error that ended this communicator (a timeout, NCCL's error, an abort), or null while it works.
  std::shared_ptr<const BackendError> failure() const;

  // Throws InvalidArgument, naming both devices, unless `stream` is on this communicator's device.
  void check_stream(const Collective& collective, const Stream& stream) const;
  // Adds to `operation` what `collective` uses on this rank (Note [One operation, one path]): the bytes of
  // `send` it reads and of `recv` it writes (either may be null), and this communicator's order.
  void describe_operation(Operation& operation, const Collective& collective,
                          const std::shared_ptr<DeviceArray>& send, const std::shared_ptr<DeviceArray>& recv) const;
  // The stream `operation` (a collective of this communicator) goes on: inside a weave, the weave's choice on
  // this communicator's device (`given`, when not null, a strand it tracks); else `given`, else the current
  // stream when it is on this communicator's device, else that device's default stream.
  std::shared_ptr<Stream> place(Operation& operation, std::shared_ptr<Stream> given) const;
  // Queues `collective`, described by `operation`, on `stream` (of this communicator's device): the
  // operation's arrays (and this communicator) are kept until it has completed, or, on a stream cuweave
  // captures, as long as the graph (Note [Collectives in graphs]), and the arrays it writes take the stream as
  // their writer. Throws InvalidArgument for a closed communicator, a stream of another device, a conditional
  // node's body, a peer or root out of range, and a call that differs from another rank's in the same place
  // (Note [Collective groups]); the failure of a failed communicator; ncclTimeout when NCCL was still queuing
  // it after the timeout (having aborted the communicator).
  void enqueue(const Collective& collective, Operation& operation, const std::shared_ptr<Stream>& stream);

  // Throws the failure, naming `what` as refused, once the communicator has failed (its abort freed what
  // NCCL's kernels use): later collectives, and replays of graphs holding its collectives (Note [Collectives
  // in graphs]).
  void refuse_if_failed(const std::string& what) const;
  // Watches the work just queued on `stream` (a collective, a graph replay holding collectives) until it
  // completes (Note [Collective timeouts]); `call` names it in errors.
  void watch(const std::shared_ptr<Stream>& stream, const std::string& what, const char* call);

  // The watchdog's round (Note [Collective timeouts]): forgets the collectives that completed, fails the
  // communicator on a timeout or an asynchronous error. Returns whether collectives are left to watch, and
  // lowers `wake` to the earliest deadline among them.
  bool check_progress(std::chrono::steady_clock::time_point now, std::chrono::steady_clock::time_point& wake);
  // Whether it has queued collectives left to watch (the watchdog drops it when not).
  bool watching() const;
  // Forgets the collectives that completed; returns whether any are left (false once it failed).
  bool forget_completed();

 private:
  // A queued collective (or a graph replay holding collectives) that the watchdog waits for.
  struct Watch {
    EventHandle completion;  // from the EventPool, recorded right after it on its stream
    int device;
    std::weak_ptr<Stream> stream;
    const Stream* stream_key;
    std::uint64_t number;  // Note [Collective failures reach the waits]
    std::string what;
    const char* call;
    std::chrono::steady_clock::time_point deadline;
  };

  Communicator(CommunicatorHandle handle, int rank, int ranks, int device, std::shared_ptr<CollectiveLedger> ledger,
               CollectiveTimeout timeout);
  // Shows the sanitizer `operation`'s accesses and queues `collective` (throws before queuing it, or NCCL's
  // error).
  void queue(const Collective& collective, Operation& operation, Stream& stream);
  // Waits until the backend has finished what the communicator was doing (joining, queuing), polling
  // communicator_ready until `deadline`. On NCCL's error, the deadline or an interrupt it fails the
  // communicator and throws (`call` and `doing` name the step in the error, `stalled_because` what a
  // timeout means).
  void await_ready(std::chrono::steady_clock::time_point deadline, const char* call, const std::string& doing,
                   const std::string& stalled_because);
  // What follows queuing, once NCCL has queued it: the holds to the stream, the watch unless captured.
  void queued(const std::shared_ptr<Stream>& stream, Holds holds, const std::string& what, const char* call,
              bool captured);
  // Fails the communicator, once (the first failure wins): keeps the failure (`call`, `code` and `name` say
  // its kind, `reason` why: a timeout, NCCL's error, an abort), marks it on the streams of the unfinished
  // collectives, then aborts the backend's communicator (Note [Collective timeouts]). The collective whose
  // completion event is `culprit` (the one that timed out) is said to have `culprit_text` instead.
  void fail(const char* call, int code, const std::string& name, const std::string& reason,
            EventHandle culprit = nullptr, const std::string& culprit_text = {}) noexcept;
  std::string where() const;  // "rank 0 of 2 (device 0)"
  // handle_ (the caller holds calls_mutex()), or the failure that aborted it, thrown.
  CommunicatorHandle live_handle(const std::string& what) const;
  friend class CollectiveGroup;

  CommunicatorHandle handle_;  // LOCK: calls_mutex() (communicator.cpp); null once aborted
  int grouped_ = 0;            // LOCK: calls_mutex(); its calls in NCCL groups not ended yet
  bool abort_pending_ = false;  // LOCK: calls_mutex(); failed inside a group: aborted as the group ends
  int rank_;
  int ranks_;
  int device_;
  std::shared_ptr<CollectiveLedger> ledger_;  // null for ranks that joined through an id
  CollectiveTimeout timeout_;
  std::atomic<bool> closed_{false};
  mutable std::mutex mutex_;
  std::shared_ptr<const BackendError> failure_;  // LOCK: mutex_
  std::deque<Watch> watches_;                    // LOCK: mutex_; oldest first
};

// Scope of a collective group on the calling thread (Note [Collective groups]); nestable.
class CollectiveGroup {
 public:
  CollectiveGroup();
  CollectiveGroup(const CollectiveGroup&) = delete;
  CollectiveGroup& operator=(const CollectiveGroup&) = delete;
  // Ends the group. Ending the outermost group queues the collectives; its failure is thrown by end().
  ~CollectiveGroup() noexcept;
  // Ends the group now, throwing the backend's error; the destructor then does nothing.
  void end();
  // True while the calling thread is inside a group.
  static bool open() noexcept;

 private:
  // Inside a group, what follows the queuing of a collective (Communicator::queued) waits for its end.
  static void defer(std::shared_ptr<Communicator> communicator, std::shared_ptr<Stream> stream, Holds holds,
                    std::string what, const char* call, bool captured);
  friend class Communicator;

  bool ended_ = false;
};

}  // namespace cuweave
