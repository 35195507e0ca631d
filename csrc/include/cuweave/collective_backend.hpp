// The backend's collectives: communicators between ranks and the collectives queued on them (Note
// [Collectives] in collective.hpp, Note [Backend facets] in backend.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cuweave/backend_handles.hpp"
#include "cuweave/collective.hpp"

namespace cuweave {

// collective_id: a new id that the ranks of one communicator share (NCCL's ncclUniqueId, kCollectiveIdBytes
// bytes). create_communicator starts making the communicator of rank `rank` of `ranks` on `device`;
// create_communicators one per device of `devices`, ranks in that order, for one process. Collectives between
// begin_collective_group and end_collective_group (calling thread; nestable) are issued together, as one
// thread driving several ranks must. None of these waits for the other ranks (Note [Collective timeouts] in
// communicator.hpp): they may leave the communicator busy (joining, queuing), and communicator_ready says
// whether it still is, without waiting; it throws the backend's error where the communicator failed,
// asynchronously included (a peer that went away). abort_communicator ends whatever the communicator does or
// has queued, so that its streams move on, and frees it (NCCL's ncclCommAbort); never waits for the other
// ranks. collective_completed: whether `event`, recorded after a collective, has completed, asked from the
// watchdog's thread: it never runs queued work (the simulator exploring schedules runs work only for the
// program's waits).
class CollectiveBackend {
 public:
  static constexpr std::size_t kCollectiveIdBytes = 128;

  virtual ~CollectiveBackend() = default;

  virtual std::string collective_id() = 0;
  virtual CommunicatorHandle create_communicator(const std::string& id, int ranks, int rank, int device) = 0;
  virtual std::vector<CommunicatorHandle> create_communicators(const std::vector<int>& devices) = 0;
  virtual bool communicator_ready(CommunicatorHandle communicator) = 0;
  virtual void abort_communicator(CommunicatorHandle communicator) noexcept = 0;
  virtual void destroy_communicator(CommunicatorHandle communicator) noexcept = 0;
  virtual void begin_collective_group() = 0;
  virtual void end_collective_group() = 0;
  virtual void collective(const Collective& collective, CommunicatorHandle communicator, StreamHandle stream) = 0;
  virtual bool collective_completed(EventHandle event) = 0;
};

}  // namespace cuweave
