// Collectives on the simulator (Note [Collectives] in cuweave/collective.hpp).
//
// Note [Simulated collectives]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The ranks of a communicator are simulated devices of this process (driven by one thread in a group, or
// by one thread each; communicators joined through an id made in another process are refused). Each rank's
// k-th collective is a rendezvous, queued on that rank's stream as two operations (the collectives of a
// group on one stream together, as NCCL fuses a group's):
//  * arrive: the last rank to arrive reads every rank's send buffer and computes every rank's result on
//    the host (collective.hpp's reductions, in rank order), then releases the others;
//  * deliver: once released, writes this rank's result into its recv buffer.
// So a collective completes on a rank's stream only after every rank's stream has reached it, and nothing
// is written before everything is read (in-place collectives are exact). Send and receive pair up in order
// per (sender, receiver). Where NCCL would hang or mix the data the simulator refuses at the call with
// NCCL's error name: ranks calling different collectives in the same place, a send and a receive of
// different sizes, two ranks on one device.
//
// Nothing here blocks a thread (Note [Collective timeouts] in communicator.hpp): joining registers the rank
// in its clique, and communicator_ready says whether every rank has. Aborting a rank (the core's timeout,
// abort(), an interrupted join) releases its part of every rendezvous not computed yet: its stream moves
// on, writing nothing. Such a rendezvous is broken: it never computes (the aborted rank's buffers may be
// gone), so the other ranks' parts stay held until their own communicator fails; communicator_ready tells
// a rank that waits for an aborted one at once, as ncclRemoteError, as NCCL reports a peer that went away.
//
// Captured (Note [Collectives in graphs]), a collective is a CollectiveNode, and takes no place. Each launch
// of a graph holding collective nodes is cut at them (plan_launch): its pieces run as operations one after
// another on the launch's stream, and each collective node becomes the two operations above, its calls
// taking their places among their ranks' collectives as the launch is queued. So replays meet the other
// ranks' replays (or eager calls) in the order each rank launched them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cuweave/collective.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_graph.hpp"

namespace cuweave::sim {

class CaptureBook;
class FaultPlan;

// What collectives use of the simulator's state: the streams' order, their captures, the injected faults.
struct CollectiveParts {
  Scheduler& scheduler;
  CaptureBook& captures;
  FaultPlan& faults;
};

// The communicators of one simulator that ranks are joining, by the ids it made (NCCL's unique ids).
class CommunicatorRegistry {
 public:
  CommunicatorRegistry();
  ~CommunicatorRegistry();
  CommunicatorRegistry(const CommunicatorRegistry&) = delete;
  CommunicatorRegistry& operator=(const CommunicatorRegistry&) = delete;

  std::string make_id();
  // Registers rank `rank` in the communicator `id` names; communicator_ready says when all have joined.
  CommunicatorHandle join(const std::string& id, int ranks, int rank, int device);

 private:
  struct Joining;
  std::unique_ptr<Joining> joining_;
};

std::vector<CommunicatorHandle> communicators_for_devices(const std::vector<int>& devices);
// Whether every rank has joined; throws ncclRemoteError where a rank that this one waits for aborted.
bool communicator_ready(CommunicatorHandle communicator);
void abort_communicator(CommunicatorHandle communicator, Scheduler& scheduler) noexcept;
void destroy_communicator(CommunicatorHandle communicator) noexcept;
// Collectives called between these (this thread; nestable) are queued when the outermost group ends, a
// stream's together.
void begin_group();
void end_group(const CollectiveParts& parts);
// Queues `collective` of `communicator` on `stream` (of the communicator's device; checked by the caller),
// or captures it where the stream is capturing.
void enqueue_collective(const Collective& collective, CommunicatorHandle communicator, SimStream* stream,
                        const CollectiveParts& parts);
// The operations of `node` in a launch queued now (its calls take their places now).
std::vector<Step> collective_steps(const CollectiveNode& node, FaultPlan& faults);
// The device of a communicator made here.
int communicator_device(CommunicatorHandle communicator);

}  // namespace cuweave::sim
