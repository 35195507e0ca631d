#include "sim/sim_collectives.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>

#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "sim/capture_book.hpp"
#include "sim/fault_plan.hpp"
#include "sim/sim_error.hpp"
#include "sim/sim_tracer.hpp"

namespace cuweave::sim {

namespace {

using Bytes = std::vector<unsigned char>;

// One collective (or one send/receive pair) of the ranks that take part in it: Note [Simulated collectives].
struct Rendezvous {
  Rendezvous(const Collective& first, int participants)
      : call(first),
        participants(participants),
        parts(static_cast<std::size_t>(participants)),
        joined(static_cast<std::size_t>(participants), false),
        released(new Counter[static_cast<std::size_t>(participants)]),
        aborted(static_cast<std::size_t>(participants), false) {}

  Collective call;                      // as the first participant made it (buffers: its own)
  int participants;
  std::vector<Collective> parts;        // LOCK: the clique's mutex until all joined; per participant: its call
  std::vector<bool> joined;             // LOCK: the clique's mutex; per participant: its call has been made
  std::unique_ptr<Counter[]> released;  // per participant: 1 once its delivery may run (the scheduler's lock)
  std::mutex mutex;
  int arrived = 0;                      // LOCK: mutex
  bool computed = false;                // LOCK: mutex
  std::vector<bool> aborted;            // LOCK: mutex; per participant: its rank aborted before the results
  std::vector<Bytes> results;           // LOCK: mutex; per participant: what deliver writes

  // In `participant`'s arrive operation: the last to arrive computes, unless a rank aborted (its buffers
  // may be gone). Returns whether it computed.
  bool arrive(int participant) {
    std::lock_guard<std::mutex> lock(mutex);
    if (aborted[static_cast<std::size_t>(participant)]) return false;
    if (++arrived < participants || broken()) return false;
    compute();
    computed = true;
    return true;
  }

  void deliver(int participant) {
    std::lock_guard<std::mutex> lock(mutex);
    const auto p = static_cast<std::size_t>(participant);
    if (!computed || aborted[p]) return;  // aborted: its stream goes on without the result
    if (!results[p].empty()) std::memcpy(parts[p].recv, results[p].data(), results[p].size());
  }

  // `participant`'s rank aborted: true when its part still waited for the results (its delivery may then
  // run, writing nothing, and the rendezvous is broken for good).
  bool abort(int participant) {
    std::lock_guard<std::mutex> lock(mutex);
    if (computed || aborted[static_cast<std::size_t>(participant)]) return false;
    aborted[static_cast<std::size_t>(participant)] = true;
    return true;
  }

  bool finished(int participant) {
    std::lock_guard<std::mutex> lock(mutex);
    return computed || aborted[static_cast<std::size_t>(participant)];
  }

 private:
  bool broken() const { return std::find(aborted.begin(), aborted.end(), true) != aborted.end(); }

  Bytes read(int participant, std::size_t offset, std::size_t bytes) const {
    const auto* begin = static_cast<const unsigned char*>(parts[static_cast<std::size_t>(participant)].send) + offset;
    return Bytes(begin, begin + bytes);
  }

  Bytes reduced(std::size_t offset, std::size_t count) const {
    const std::size_t bytes = count * element_bytes(call.type);
    Bytes sum;
    for (int rank = 0; rank < participants; ++rank) {
      Bytes value = read(rank, offset, bytes);
      if (call.op == ReduceOp::Average) scale_for_average(value.data(), count, call.type, participants);
      if (rank == 0) {
        sum = std::move(value);
      } else {
        reduce_into(sum.data(), value.data(), count, call.type, call.op);
      }
    }
    if (call.op == ReduceOp::Average) finish_average(sum.data(), count, call.type, participants);
    return sum;
  }

  // Every rank's stream is at this collective.
  void compute() {
    const std::size_t bytes = call.count * element_bytes(call.type);
    results.assign(static_cast<std::size_t>(participants), {});
    switch (call.kind) {
      case CollectiveKind::AllReduce:
      case CollectiveKind::Reduce: {
        Bytes sum = reduced(0, call.count);
        for (int rank = 0; rank < participants; ++rank) {
          if (call.kind == CollectiveKind::AllReduce || rank == call.root) results[rank] = sum;
        }
        return;
      }
      case CollectiveKind::Broadcast: {
        Bytes data = read(call.root, 0, bytes);
        for (auto& result : results) result = data;
        return;
      }
      case CollectiveKind::AllGather: {
        Bytes all;
        for (int rank = 0; rank < participants; ++rank) {
          Bytes part = read(rank, 0, bytes);
          all.insert(all.end(), part.begin(), part.end());
        }
        for (auto& result : results) result = all;
        return;
      }
      case CollectiveKind::ReduceScatter:
        for (int rank = 0; rank < participants; ++rank) {
          results[static_cast<std::size_t>(rank)] = reduced(static_cast<std::size_t>(rank) * bytes, call.count);
        }
        return;
      case CollectiveKind::Send:
      case CollectiveKind::Recv:
        results[1] = read(0, 0, bytes);  // participant 0 sends, 1 receives
        return;
    }
  }
};

// The ranks of one communicator.
struct Clique {
  int ranks = 0;
  std::mutex mutex;
  std::vector<int> devices;                                        // LOCK: mutex; per rank, -1 until joined
  std::set<int> aborted;                                           // LOCK: ranks whose communicator was aborted
  std::vector<std::uint64_t> next;                                 // LOCK: per rank, its next collective's place
  std::map<std::uint64_t, std::shared_ptr<Rendezvous>> open;       // LOCK: collectives not every rank has called
  std::map<std::tuple<int, int, std::uint64_t>, std::shared_ptr<Rendezvous>> transfers;  // LOCK: (from, to, nth)
  std::map<std::pair<int, int>, std::uint64_t> sent, received;     // LOCK: per (from, to): how many so far

  int joined() const {
    int count = 0;
    for (int device : devices) count += device >= 0;
    return count;
  }
};

struct SimCommunicator {
  std::shared_ptr<Clique> clique;
  int rank = 0;
  int device = 0;
  // LOCK: clique->mutex. The rendezvous this rank has a part in (and its participant index there) that may
  // not have finished: an abort releases them.
  std::vector<std::pair<std::shared_ptr<Rendezvous>, int>> unfinished;

  // Forgets the finished ones (the clique's mutex is held); returns whether any is left.
  bool prune() {
    unfinished.erase(std::remove_if(unfinished.begin(), unfinished.end(),
                                    [](const auto& part) { return part.first->finished(part.second); }),
                     unfinished.end());
    return !unfinished.empty();
  }
};

constexpr char kIdTag[] = "cuweave-sim-communicator";

// Seats `rank` in `clique` on `device`; the clique's mutex is held.
void seat(Clique& clique, int rank, int device, const char* call) {
  if (clique.devices[static_cast<std::size_t>(rank)] >= 0) {
    fail(call, kNcclInvalidUsage, "rank " + std::to_string(rank) + " has already joined this communicator");
  }
  for (int other = 0; other < clique.ranks; ++other) {
    if (clique.devices[static_cast<std::size_t>(other)] == device) {
      fail(call, kNcclInvalidUsage,
           "ranks " + std::to_string(other) + " and " + std::to_string(rank) + " are both on device " +
               std::to_string(device) + " (duplicate GPU); each rank of a communicator needs its own device");
    }
  }
  clique.devices[static_cast<std::size_t>(rank)] = device;
}

std::shared_ptr<Clique> new_clique(int ranks) {
  auto clique = std::make_shared<Clique>();
  clique->ranks = ranks;
  clique->devices.assign(static_cast<std::size_t>(ranks), -1);
  clique->next.assign(static_cast<std::size_t>(ranks), 0);
  return clique;
}

SimCommunicator* as_communicator(CommunicatorHandle handle) { return static_cast<SimCommunicator*>(handle); }

// The rendezvous `communicator`'s call `c` takes part in, its place filled (the clique's mutex is held);
// `participant` is set to this rank's index in it.
std::shared_ptr<Rendezvous> rendezvous_for(SimCommunicator& communicator, const Collective& c, int& participant) {
  Clique& clique = *communicator.clique;
  const int rank = communicator.rank;
  const bool transfer = c.kind == CollectiveKind::Send || c.kind == CollectiveKind::Recv;
  const bool sending = c.kind == CollectiveKind::Send;
  const std::pair<int, int> pair = sending ? std::make_pair(rank, c.root) : std::make_pair(c.root, rank);
  // This call's place: among the collectives, or among the transfers of its (sender, receiver) pair.
  std::uint64_t& counter = !transfer ? clique.next[static_cast<std::size_t>(rank)]
                                     : (sending ? clique.sent : clique.received)[pair];
  const std::uint64_t place = counter;
  const std::tuple<int, int, std::uint64_t> transfer_key{pair.first, pair.second, place};
  std::shared_ptr<Rendezvous>* slot = transfer ? &clique.transfers[transfer_key] : &clique.open[place];
  participant = transfer ? (sending ? 0 : 1) : rank;
  std::shared_ptr<Rendezvous>& rendezvous = *slot;
  if (!rendezvous) {
    rendezvous = std::make_shared<Rendezvous>(c, transfer ? 2 : clique.ranks);
  } else if (transfer ? (rendezvous->call.count != c.count || rendezvous->call.type != c.type)
                      : !same_call(rendezvous->call, c)) {
    const std::string mine = transfer ? std::to_string(c.count) + " " + to_string(c.type) : describe(c);
    const std::string theirs = transfer ? std::to_string(rendezvous->call.count) + " " + to_string(rendezvous->call.type)
                                        : describe(rendezvous->call);
    fail(nccl_function(c.kind), kNcclInvalidUsage,
         "rank " + std::to_string(rank) + " calls " + mine + " where the other side called " + theirs +
             ": the ranks' calls must match");
  }
  ++counter;
  rendezvous->parts[static_cast<std::size_t>(participant)] = c;
  rendezvous->joined[static_cast<std::size_t>(participant)] = true;
  std::shared_ptr<Rendezvous> result = rendezvous;
  bool complete = true;
  for (bool joined : result->joined) complete = complete && joined;
  if (complete) {  // everyone has called it: the operations hold it from here
    if (transfer) {
      clique.transfers.erase(transfer_key);
    } else {
      clique.open.erase(place);
    }
  }
  communicator.prune();
  communicator.unfinished.emplace_back(result, participant);
  return result;
}

}  // namespace

struct CommunicatorRegistry::Joining {
  std::mutex mutex;
  std::uint64_t made = 0;                                // LOCK: mutex (ids made so far)
  std::map<std::string, std::shared_ptr<Clique>> by_id;  // LOCK: mutex (cliques still being joined)
};

CommunicatorRegistry::CommunicatorRegistry() : joining_(std::make_unique<Joining>()) {}
CommunicatorRegistry::~CommunicatorRegistry() = default;

std::string CommunicatorRegistry::make_id() {
  Joining& r = *joining_;
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string id(CollectiveBackend::kCollectiveIdBytes, '\0');
  const std::string text = std::string(kIdTag) + " " + std::to_string(getpid()) + " " + std::to_string(++r.made);
  std::memcpy(id.data(), text.data(), text.size());
  return id;
}

CommunicatorHandle CommunicatorRegistry::join(const std::string& id, int ranks, int rank, int device) {
  constexpr const char* kCall = "ncclCommInitRankConfig";
  const std::string text(id.c_str());
  const std::string tag = std::string(kIdTag) + " ";
  if (text.rfind(tag, 0) != 0) {
    fail(kCall, kNcclInvalidArgument, "the id was not made by cuweave.collectives.unique_id() on the simulator");
  }
  const std::string pid = std::to_string(getpid());
  if (text.compare(tag.size(), pid.size() + 1, pid + " ") != 0) {
    fail(kCall, kNcclInvalidUsage,
         "the id was made by another process; the simulator runs the ranks of a communicator as devices of one "
         "process (one thread per rank, or one thread and cuweave.collectives.communicators())");
  }
  std::shared_ptr<Clique> clique;
  {
    Joining& r = *joining_;
    std::lock_guard<std::mutex> lock(r.mutex);
    std::shared_ptr<Clique>& entry = r.by_id[id];
    if (!entry) entry = new_clique(ranks);
    clique = entry;
  }
  std::lock_guard<std::mutex> lock(clique->mutex);
  if (clique->ranks != ranks) {
    fail(kCall, kNcclInvalidArgument,
         "rank " + std::to_string(rank) + " joins with ranks=" + std::to_string(ranks) + " where another rank said " +
             std::to_string(clique->ranks));
  }
  seat(*clique, rank, device, kCall);
  if (clique->joined() == ranks) {
    std::lock_guard<std::mutex> lock_registry(joining_->mutex);
    joining_->by_id.erase(id);
  }
  // As NCCL's non-blocking communicators: made once every rank has joined (communicator_ready).
  return new SimCommunicator{clique, rank, device, {}};
}

std::vector<CommunicatorHandle> communicators_for_devices(const std::vector<int>& devices) {
  auto clique = new_clique(static_cast<int>(devices.size()));
  std::vector<CommunicatorHandle> made;
  std::lock_guard<std::mutex> lock(clique->mutex);
  for (std::size_t rank = 0; rank < devices.size(); ++rank) {
    seat(*clique, static_cast<int>(rank), devices[rank], "ncclCommInitRankConfig");
    made.push_back(new SimCommunicator{clique, static_cast<int>(rank), devices[rank], {}});
  }
  return made;
}

bool communicator_ready(CommunicatorHandle handle) {
  SimCommunicator* communicator = as_communicator(handle);
  Clique& clique = *communicator->clique;
  std::lock_guard<std::mutex> lock(clique.mutex);
  const bool all_joined = clique.joined() == clique.ranks;
  for (int gone : clique.aborted) {
    if (gone == communicator->rank || (all_joined && !communicator->prune())) continue;
    fail("ncclCommGetAsyncError", kNcclRemoteError,
         "rank " + std::to_string(gone) + " of this communicator aborted (its collective or joining failed, timed "
         "out or was interrupted) while rank " + std::to_string(communicator->rank) + " waits for it");
  }
  return all_joined;
}

void abort_communicator(CommunicatorHandle handle, Scheduler& scheduler) noexcept {
  SimCommunicator* communicator = as_communicator(handle);
  std::vector<std::pair<std::shared_ptr<Rendezvous>, int>> unfinished;
  {
    std::lock_guard<std::mutex> lock(communicator->clique->mutex);
    communicator->clique->aborted.insert(communicator->rank);
    unfinished.swap(communicator->unfinished);
  }
  for (const auto& [rendezvous, participant] : unfinished) {
    if (rendezvous->abort(participant)) scheduler.release(rendezvous->released[participant]);
  }
  delete communicator;  // as NCCL's abort frees its communicator
}

void destroy_communicator(CommunicatorHandle communicator) noexcept { delete as_communicator(communicator); }

int communicator_device(CommunicatorHandle communicator) { return as_communicator(communicator)->device; }

namespace {

// A rank's part in a rendezvous, queued on its stream.
struct Part {
  std::shared_ptr<Rendezvous> rendezvous;
  int participant = 0;
  std::shared_ptr<OperationTrace> trace;
  bool absent = false;  // never arrives (Note [Injected faults]): every rank waits until its timeout
};

// `call`'s place among its rank's collectives, taken now; traced on `stream` when given (a launch's parts
// are traced as the launch).
Part take_place(const CollectiveCall& call, const SimStream* stream, FaultPlan& faults) {
  SimCommunicator* communicator = as_communicator(call.communicator);
  Part part;
  {
    std::lock_guard<std::mutex> lock(communicator->clique->mutex);
    part.rendezvous = rendezvous_for(*communicator, call.collective, part.participant);
  }
  part.absent = faults.strikes(FaultKind::AbsentRank, nccl_function(call.collective.kind));
  if (stream) {
    part.trace = traced(trace::Kind::Kernel, *stream, std::string("collectives.") + to_string(call.collective.kind),
                        call.collective.count * element_bytes(call.collective.type));
  }
  return part;
}

// `parts` as two operations: arrive at each rendezvous, then deliver each once all are released. A group's
// parts on one stream go together (as NCCL fuses a group): a ring of sends and receives would otherwise
// wait on itself. The traced activity spans both, from this rank's arrival to its delivery, as an NCCL
// kernel runs from when its stream reaches it, waiting for the other ranks included.
std::vector<Step> steps_of(std::vector<Part> parts) {
  auto shared = std::make_shared<std::vector<Part>>(std::move(parts));
  auto released_here = std::make_shared<std::vector<Rendezvous*>>();
  std::vector<Dependency> after;
  for (const Part& part : *shared) {
    after.push_back(Dependency{&part.rendezvous->released[static_cast<std::size_t>(part.participant)], 1});
  }
  std::shared_ptr<OperationTrace> trace = shared->front().trace;
  // Written by the arrival, read by the delivery: ordered by the scheduler's lock between the two.
  auto arrived_ns = std::make_shared<std::uint64_t>(0);
  std::vector<Step> steps;
  steps.push_back(Step{[shared, released_here, arrived_ns] {
                         *arrived_ns = SimTracer::clock_ns();
                         for (const Part& part : *shared) {
                           if (part.absent) continue;
                           Rendezvous* rendezvous = part.rendezvous.get();
                           if (rendezvous->arrive(part.participant)) released_here->push_back(rendezvous);
                         }
                       },
                       [released_here] {
                         for (Rendezvous* rendezvous : *released_here) {
                           for (int p = 0; p < rendezvous->participants; ++p) rendezvous->released[p].completed = 1;
                         }
                       },
                       {}, nullptr});
  steps.push_back(Step{[shared, arrived_ns, trace] {
                         if (trace) trace->activity.start_ns = *arrived_ns;  // the scheduler stamped its own start
                         for (const Part& part : *shared) part.rendezvous->deliver(part.participant);
                       },
                       {}, std::move(after), trace});
  return steps;
}

// One collective called: its place, unless its stream captured it then (Note [Simulated collectives]).
struct Called {
  CollectiveCall call;
  std::optional<Part> part;
};

// Queues `called` on `stream` together, or captures them as one node where the stream captures.
void queue_on(SimStream* stream, std::vector<Called> called, const CollectiveParts& parts) {
  const char* call = nccl_function(called.front().call.collective.kind);
  parts.captures.capture_or_run(
      stream, call,
      [&] {
        CollectiveNode node;
        for (const Called& one : called) {
          if (one.part) {
            fail(call, kNcclInvalidUsage,
                 "the stream began capturing after this collective was called in a group; begin the capture before "
                 "the group");
          }
          node.calls.push_back(one.call);
        }
        return std::vector<NodeParams>{std::move(node)};
      },
      [&] {
        std::vector<Part> places;
        for (Called& one : called) {
          places.push_back(one.part ? std::move(*one.part) : take_place(one.call, stream, parts.faults));
        }
        for (Step& step : steps_of(std::move(places))) {
          parts.scheduler.enqueue(stream, std::move(step.work), std::move(step.complete), std::move(step.after),
                                  std::move(step.trace));
        }
      });
}

struct OpenGroup {
  int depth = 0;
  std::vector<std::pair<SimStream*, Called>> called;  // in call order
};
thread_local OpenGroup open_group;

}  // namespace

void begin_group() { ++open_group.depth; }

void end_group(const CollectiveParts& parts) {
  if (open_group.depth == 0) return;
  if (--open_group.depth > 0) return;
  std::vector<std::pair<SimStream*, Called>> called;
  called.swap(open_group.called);
  std::vector<SimStream*> order;
  std::map<SimStream*, std::vector<Called>> by_stream;
  for (auto& [stream, one] : called) {
    if (by_stream.find(stream) == by_stream.end()) order.push_back(stream);
    by_stream[stream].push_back(std::move(one));
  }
  std::exception_ptr failure;
  for (SimStream* stream : order) {
    try {
      queue_on(stream, std::move(by_stream[stream]), parts);
    } catch (...) {
      if (!failure) failure = std::current_exception();  // the other streams' collectives still go
    }
  }
  if (failure) std::rethrow_exception(failure);
}

void enqueue_collective(const Collective& c, CommunicatorHandle handle, SimStream* stream,
                        const CollectiveParts& parts) {
  if (parts.faults.strikes(FaultKind::Collective, nccl_function(c.kind))) {  // Note [Injected faults]
    FaultPlan::fail(FaultKind::Collective, nccl_function(c.kind));
  }
  Called called{CollectiveCall{c, handle}, std::nullopt};
  // Eager, its place is taken at the call, so that a mismatch is refused there.
  if (parts.captures.state(stream).status == CaptureState::Status::None) {
    called.part = take_place(called.call, stream, parts.faults);
  }
  if (open_group.depth > 0) {
    open_group.called.emplace_back(stream, std::move(called));
  } else {
    std::vector<Called> one;
    one.push_back(std::move(called));
    queue_on(stream, std::move(one), parts);
  }
}

std::vector<Step> collective_steps(const CollectiveNode& node, FaultPlan& faults) {
  std::vector<Part> parts;
  for (const CollectiveCall& call : node.calls) parts.push_back(take_place(call, nullptr, faults));
  return steps_of(std::move(parts));
}

}  // namespace cuweave::sim
