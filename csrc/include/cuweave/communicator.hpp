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
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/collective.hpp"
#include "cuweave/hold.hpp"

namespace cuweave {

class Stream;

// The collectives the ranks of one process have called so far, to refuse mismatched calls.
class CollectiveLedger {
 public:
  explicit CollectiveLedger(int ranks) : next_(static_cast<std::size_t>(ranks), 0) {}
  // Notes `call` as `rank`'s next collective; throws InvalidArgument naming both calls when another rank's
  // call in that place differs.
  void note(int rank, const Collective& call);
  // Takes back `rank`'s last noted call (it was refused before it was queued).
  void withdraw(int rank) noexcept;

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

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  // A new id for the ranks of one communicator to share (bytes; pass it to the other processes).
  static std::string new_id();
  // Rank `rank` of `ranks` on `device`, joining the others through `id`. Blocks until all have joined.
  static std::shared_ptr<Communicator> join(const std::string& id, int ranks, int rank, int device);
  // One communicator per device of `devices` (distinct), ranks in that order, sharing a ledger.
  static std::vector<std::shared_ptr<Communicator>> for_devices(const std::vector<int>& devices);

  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator();  // destroys the backend's communicator (queued collectives hold this object)

  int rank() const noexcept { return rank_; }
  int ranks() const noexcept { return ranks_; }
  int device() const noexcept { return device_; }
  // Refuses later collectives; the backend's communicator goes once the queued ones have completed.
  void close() noexcept { closed_ = true; }
  bool closed() const noexcept { return closed_; }

  // Throws InvalidArgument, naming both devices, unless `stream` is on this communicator's device.
  void check_stream(const Collective& collective, const Stream& stream) const;
  // Queues `collective` on `stream` (of this communicator's device), holding `holds` (and this
  // communicator) until it has completed. Throws InvalidArgument for a closed communicator, a stream of
  // another device, a capturing stream, a peer or root out of range, and a call that differs from another
  // rank's in the same place (Note [Collective groups]).
  void enqueue(const Collective& collective, const std::shared_ptr<Stream>& stream, Holds holds);

 private:
  Communicator(CommunicatorHandle handle, int rank, int ranks, int device, std::shared_ptr<CollectiveLedger> ledger);
  // Shows the sanitizer `collective`'s accesses and queues it (throws before queuing it, or NCCL's error).
  void queue(const Collective& collective, Stream& stream);

  CommunicatorHandle handle_;
  int rank_;
  int ranks_;
  int device_;
  std::shared_ptr<CollectiveLedger> ledger_;  // null for ranks that joined through an id
  bool closed_ = false;
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
  // Inside a group, keeps `holds` until the group ends, then hands them to `stream`; else at once.
  static void hold_after_queued(const std::shared_ptr<Stream>& stream, Holds holds);

 private:
  bool ended_ = false;
};

}  // namespace cuweave
