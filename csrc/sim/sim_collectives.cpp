#include "sim/sim_collectives.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "sim/sim_tracer.hpp"

namespace cuweave::sim {

namespace {

constexpr int kNcclInvalidArgument = 4;
constexpr int kNcclInvalidUsage = 5;

[[noreturn]] void fail_nccl(const char* call, int code, const std::string& description) {
  throw BackendError(call, code, code == kNcclInvalidArgument ? "ncclInvalidArgument" : "ncclInvalidUsage",
                     description + " (cuweave simulator)", __FILE__, __LINE__);
}

// The NCCL call that queues `kind`, for errors.
const char* nccl_call(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce: return "ncclAllReduce";
    case CollectiveKind::Broadcast: return "ncclBroadcast";
    case CollectiveKind::Reduce: return "ncclReduce";
    case CollectiveKind::AllGather: return "ncclAllGather";
    case CollectiveKind::ReduceScatter: return "ncclReduceScatter";
    case CollectiveKind::Send: return "ncclSend";
    case CollectiveKind::Recv: return "ncclRecv";
  }
  return "nccl";
}

using Bytes = std::vector<unsigned char>;

// One collective (or one send/receive pair) of the ranks that take part in it: Note [Simulated collectives].
struct Rendezvous {
  Collective call;                  // as the first participant made it (buffers: its own)
  int participants = 0;
  std::vector<Collective> parts;    // per participant: its call, with its buffers
  std::vector<bool> joined;         // per participant: its call has been made
  std::vector<Bytes> results;       // per participant: what deliver writes
  std::atomic<int> arrived{0};
  Counter released;                 // 1 once the results are computed

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

  // Runs in the last arriving rank's operation: every rank's stream is at this collective.
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

  void deliver(int participant) const {
    const Bytes& result = results[static_cast<std::size_t>(participant)];
    if (!result.empty()) std::memcpy(parts[static_cast<std::size_t>(participant)].recv, result.data(), result.size());
  }
};

// The ranks of one communicator.
struct Clique {
  int ranks = 0;
  std::mutex mutex;
  std::condition_variable all_joined;
  std::vector<int> devices;                                        // LOCK: mutex; per rank, -1 until joined
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
};

struct Registry {
  std::mutex mutex;
  std::uint64_t made = 0;                                     // LOCK: ids made so far
  std::map<std::string, std::shared_ptr<Clique>> by_id;       // LOCK: cliques still being joined
};

Registry& registry() {
  static Registry* instance = new Registry;  // leaked: communicators may outlive static destruction
  return *instance;
}

constexpr char kIdTag[] = "cuweave-sim-communicator";

// Joins `rank` into `clique` on `device`; the clique's mutex is held.
void take_place(Clique& clique, int rank, int device, const char* call) {
  if (clique.devices[static_cast<std::size_t>(rank)] >= 0) {
    fail_nccl(call, kNcclInvalidUsage, "rank " + std::to_string(rank) + " has already joined this communicator");
  }
  for (int other = 0; other < clique.ranks; ++other) {
    if (clique.devices[static_cast<std::size_t>(other)] == device) {
      fail_nccl(call, kNcclInvalidUsage,
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
std::shared_ptr<Rendezvous> rendezvous_for(Clique& clique, int rank, const Collective& c, int& participant) {
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
    rendezvous = std::make_shared<Rendezvous>();
    rendezvous->call = c;
    rendezvous->participants = transfer ? 2 : clique.ranks;
    rendezvous->parts.resize(static_cast<std::size_t>(rendezvous->participants));
    rendezvous->joined.assign(static_cast<std::size_t>(rendezvous->participants), false);
  } else if (transfer ? (rendezvous->call.count != c.count || rendezvous->call.type != c.type)
                      : !same_call(rendezvous->call, c)) {
    const std::string mine = transfer ? std::to_string(c.count) + " " + to_string(c.type) : describe(c);
    const std::string theirs = transfer ? std::to_string(rendezvous->call.count) + " " + to_string(rendezvous->call.type)
                                        : describe(rendezvous->call);
    fail_nccl(nccl_call(c.kind), kNcclInvalidUsage,
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
  return result;
}

}  // namespace

std::string collective_id() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string id(Backend::kCollectiveIdBytes, '\0');
  const std::string text = std::string(kIdTag) + " " + std::to_string(getpid()) + " " + std::to_string(++r.made);
  std::memcpy(id.data(), text.data(), text.size());
  return id;
}

CommunicatorHandle join_communicator(const std::string& id, int ranks, int rank, int device) {
  const std::string text(id.c_str());
  const std::string tag = std::string(kIdTag) + " ";
  if (text.rfind(tag, 0) != 0) {
    fail_nccl("ncclCommInitRank", kNcclInvalidArgument,
              "the id was not made by cuweave.collectives.unique_id() on the simulator");
  }
  const std::string pid = std::to_string(getpid());
  if (text.compare(tag.size(), pid.size() + 1, pid + " ") != 0) {
    fail_nccl("ncclCommInitRank", kNcclInvalidUsage,
              "the id was made by another process; the simulator runs the ranks of a communicator as devices of "
              "one process (one thread per rank, or one thread and cuweave.collectives.communicators())");
  }
  std::shared_ptr<Clique> clique;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::shared_ptr<Clique>& entry = r.by_id[id];
    if (!entry) entry = new_clique(ranks);
    clique = entry;
  }
  std::unique_lock<std::mutex> lock(clique->mutex);
  if (clique->ranks != ranks) {
    fail_nccl("ncclCommInitRank", kNcclInvalidArgument,
              "rank " + std::to_string(rank) + " joins with ranks=" + std::to_string(ranks) + " where another rank said " +
                  std::to_string(clique->ranks));
  }
  take_place(*clique, rank, device, "ncclCommInitRank");
  if (clique->joined() == ranks) {
    std::lock_guard<std::mutex> lock_registry(registry().mutex);
    registry().by_id.erase(id);
    clique->all_joined.notify_all();
  }
  // As NCCL: made once every rank has joined.
  clique->all_joined.wait(lock, [&] { return clique->joined() == clique->ranks; });
  return new SimCommunicator{clique, rank, device};
}

std::vector<CommunicatorHandle> communicators_for_devices(const std::vector<int>& devices) {
  auto clique = new_clique(static_cast<int>(devices.size()));
  std::vector<CommunicatorHandle> made;
  std::lock_guard<std::mutex> lock(clique->mutex);
  for (std::size_t rank = 0; rank < devices.size(); ++rank) {
    take_place(*clique, static_cast<int>(rank), devices[rank], "ncclCommInitAll");
    made.push_back(new SimCommunicator{clique, static_cast<int>(rank), devices[rank]});
  }
  return made;
}

void destroy_communicator(CommunicatorHandle communicator) noexcept { delete as_communicator(communicator); }

int communicator_device(CommunicatorHandle communicator) { return as_communicator(communicator)->device; }

namespace {

// A rank's part in a rendezvous, queued on its stream.
struct Part {
  std::shared_ptr<Rendezvous> rendezvous;
  int participant = 0;
  std::shared_ptr<OperationTrace> trace;
};

// Queues `parts` on `stream` as two operations: arrive at each rendezvous, then deliver each once all are
// released. A group's parts on one stream go together (as NCCL fuses a group): a ring of sends and receives
// would otherwise wait on itself. The traced activity spans both, from this rank's arrival to its delivery,
// as an NCCL kernel runs from when its stream reaches it, waiting for the other ranks included.
void enqueue_parts(SimStream* stream, std::vector<Part> parts) {
  auto shared = std::make_shared<std::vector<Part>>(std::move(parts));
  auto released_here = std::make_shared<std::vector<Rendezvous*>>();
  std::vector<Dependency> after;
  for (const Part& part : *shared) after.push_back(Dependency{&part.rendezvous->released, 1});
  std::shared_ptr<OperationTrace> trace = shared->front().trace;
  // Written by the arrival, read by the delivery: ordered by the scheduler's lock between the two.
  auto arrived_ns = std::make_shared<std::uint64_t>(0);
  Scheduler& scheduler = Scheduler::instance();
  scheduler.enqueue(
      stream,
      [shared, released_here, arrived_ns] {
        *arrived_ns = SimTracer::clock_ns();
        for (const Part& part : *shared) {
          if (part.rendezvous->arrived.fetch_add(1) + 1 == part.rendezvous->participants) {
            part.rendezvous->compute();
            released_here->push_back(part.rendezvous.get());
          }
        }
      },
      [released_here] {
        for (Rendezvous* rendezvous : *released_here) rendezvous->released.completed = 1;
      });
  scheduler.enqueue(
      stream,
      [shared, arrived_ns, trace] {
        if (trace) trace->activity.start_ns = *arrived_ns;  // the scheduler stamped this operation's own start
        for (const Part& part : *shared) part.rendezvous->deliver(part.participant);
      },
      {}, std::move(after), trace);
}

struct OpenGroup {
  int depth = 0;
  std::vector<std::pair<SimStream*, Part>> parts;  // in call order
};
thread_local OpenGroup open_group;

}  // namespace

void begin_group() { ++open_group.depth; }

void end_group() {
  if (open_group.depth == 0) return;
  if (--open_group.depth > 0) return;
  std::vector<std::pair<SimStream*, Part>> parts;
  parts.swap(open_group.parts);
  std::vector<SimStream*> order;
  std::map<SimStream*, std::vector<Part>> by_stream;
  for (auto& [stream, part] : parts) {
    if (by_stream.find(stream) == by_stream.end()) order.push_back(stream);
    by_stream[stream].push_back(std::move(part));
  }
  for (SimStream* stream : order) enqueue_parts(stream, std::move(by_stream[stream]));
}

void enqueue_collective(const Collective& c, CommunicatorHandle handle, SimStream* stream) {
  SimCommunicator* communicator = as_communicator(handle);
  Part part;
  {
    std::lock_guard<std::mutex> lock(communicator->clique->mutex);
    part.rendezvous = rendezvous_for(*communicator->clique, communicator->rank, c, part.participant);
  }
  part.trace = traced(trace::Kind::Kernel, *stream, std::string("collectives.") + to_string(c.kind),
                      c.count * element_bytes(c.type));
  if (open_group.depth > 0) {
    open_group.parts.emplace_back(stream, std::move(part));
  } else {
    enqueue_parts(stream, {std::move(part)});
  }
}

}  // namespace cuweave::sim
