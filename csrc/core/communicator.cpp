#include "cuweave/communicator.hpp"

#include <algorithm>
#include <exception>
#include <set>
#include <utility>

#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/stream_device_scope.hpp"

namespace cuweave {

namespace {

std::string ordinal(std::uint64_t place) {
  const std::uint64_t n = place + 1;
  const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

}  // namespace

void CollectiveLedger::note(int rank, const Collective& call) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uint64_t place = next_[static_cast<std::size_t>(rank)];
  const std::uint64_t index = place - first_pending_;
  if (index < pending_.size()) {
    const Entry& first = pending_[index];
    if (!same_call(first.call, call)) {
      throw InvalidArgument("rank " + std::to_string(rank) + " calls " + describe(call) + " as its " + ordinal(place) +
                            " collective, where rank " + std::to_string(first.rank) + " called " +
                            describe(first.call) +
                            ": every rank of a communicator must call the same collectives (kind, count, dtype, "
                            "operation and root) in the same order; NCCL would hang or mix the data");
    }
  } else {
    pending_.push_back(Entry{call, rank});
  }
  ++next_[static_cast<std::size_t>(rank)];
  const std::uint64_t slowest = *std::min_element(next_.begin(), next_.end());
  while (first_pending_ < slowest) {
    pending_.pop_front();
    ++first_pending_;
  }
}

void CollectiveLedger::withdraw(int rank) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uint64_t place = --next_[static_cast<std::size_t>(rank)];
  // The entry this rank made, if no other rank has matched it yet: the next rank to get there makes its own.
  bool others_there = false;
  for (std::size_t other = 0; other < next_.size(); ++other) {
    others_there = others_there || (static_cast<int>(other) != rank && next_[other] > place);
  }
  if (!others_there && place - first_pending_ + 1 == pending_.size() && pending_.back().rank == rank) {
    pending_.pop_back();
  }
}

std::string Communicator::new_id() {
  backend().require_device();
  return backend().collective_id();
}

std::shared_ptr<Communicator> Communicator::join(const std::string& id, int ranks, int rank, int device) {
  if (id.size() != Backend::kCollectiveIdBytes) {
    throw InvalidArgument("a communicator id is " + std::to_string(Backend::kCollectiveIdBytes) +
                          " bytes (from cuweave.collectives.unique_id()), not " + std::to_string(id.size()));
  }
  if (ranks < 1) throw InvalidArgument("ranks must be at least 1, not " + std::to_string(ranks));
  if (rank < 0 || rank >= ranks) {
    throw InvalidArgument("rank " + std::to_string(rank) + " is not one of the " + std::to_string(ranks) +
                          " ranks (0 to " + std::to_string(ranks - 1) + ")");
  }
  CommunicatorHandle handle = backend().create_communicator(id, ranks, rank, device);
  return std::shared_ptr<Communicator>(new Communicator(handle, rank, ranks, device, nullptr));
}

std::vector<std::shared_ptr<Communicator>> Communicator::for_devices(const std::vector<int>& devices) {
  if (devices.empty()) throw InvalidArgument("a communicator needs at least one device");
  if (std::set<int>(devices.begin(), devices.end()).size() != devices.size()) {
    throw InvalidArgument("each device may hold one rank of a communicator; the devices given repeat one");
  }
  const std::vector<CommunicatorHandle> handles = backend().create_communicators(devices);
  auto ledger = std::make_shared<CollectiveLedger>(static_cast<int>(devices.size()));
  std::vector<std::shared_ptr<Communicator>> made;
  for (std::size_t rank = 0; rank < devices.size(); ++rank) {
    made.push_back(std::shared_ptr<Communicator>(new Communicator(
        handles[rank], static_cast<int>(rank), static_cast<int>(devices.size()), devices[rank], ledger)));
  }
  return made;
}

Communicator::Communicator(CommunicatorHandle handle, int rank, int ranks, int device,
                           std::shared_ptr<CollectiveLedger> ledger)
    : handle_(handle), rank_(rank), ranks_(ranks), device_(device), ledger_(std::move(ledger)) {}

Communicator::~Communicator() { backend().destroy_communicator(handle_); }

void Communicator::check_stream(const Collective& collective, const Stream& stream) const {
  if (stream.device() != device_) {
    throw InvalidArgument(describe(collective) + ": the communicator of rank " + std::to_string(rank_) +
                          " is on device " + std::to_string(device_) + ", the stream on device " +
                          std::to_string(stream.device()) + "; use a stream of device " + std::to_string(device_));
  }
}

void Communicator::enqueue(const Collective& collective, const std::shared_ptr<Stream>& stream, Holds holds) {
  const std::string what = describe(collective);
  if (closed_) throw InvalidArgument(what + " on a closed communicator");
  check_stream(collective, *stream);
  const bool peer = collective.kind == CollectiveKind::Send || collective.kind == CollectiveKind::Recv;
  const bool rooted = collective.kind == CollectiveKind::Broadcast || collective.kind == CollectiveKind::Reduce;
  if ((peer || rooted) && (collective.root < 0 || collective.root >= ranks_)) {
    throw InvalidArgument(what + ": " + (peer ? "peer " : "root ") + std::to_string(collective.root) +
                          " is not one of the " + std::to_string(ranks_) + " ranks");
  }
  if (peer && collective.root == rank_) {
    throw InvalidArgument(what + ": rank " + std::to_string(rank_) + " cannot " + to_string(collective.kind) +
                          " to itself; copy the array instead");
  }
  if (backend().capture_state(stream->handle()).status != CaptureState::Status::None) {
    throw InvalidArgument(what + ": collectives are not captured into graphs by cuweave yet; queue them on a "
                                 "stream that is not capturing (e.g. between replays)");
  }
  const StreamDeviceScope on_device(*stream);  // Note [The device follows the stream]
  const bool noted = ledger_ && !peer;
  if (noted) ledger_->note(rank_, collective);
  try {
    queue(collective, *stream);
  } catch (...) {
    if (noted) ledger_->withdraw(rank_);  // refused (a race, NCCL's error): as if never called
    throw;
  }
  holds.push_back(shared_from_this());
  CollectiveGroup::hold_after_queued(stream, std::move(holds));
}

void Communicator::queue(const Collective& collective, Stream& stream) {
  if (sanitizer::enabled()) {
    std::vector<sanitizer::Access> accesses;
    if (const std::size_t bytes = send_bytes(collective, rank_, ranks_)) {
      accesses.push_back(sanitizer::reads(collective.send, bytes));
    }
    if (const std::size_t bytes = recv_bytes(collective, rank_, ranks_)) {
      accesses.push_back(sanitizer::writes(collective.recv, bytes));
    }
    sanitizer::operation(stream, std::string("collectives.") + to_string(collective.kind), accesses);
  }
  backend().collective(collective, handle_, stream.handle());
}

namespace {

struct OpenGroup {
  int depth = 0;
  std::vector<std::pair<std::shared_ptr<Stream>, Holds>> waiting;  // holds of collectives not queued yet
};

thread_local OpenGroup open_group;

}  // namespace

CollectiveGroup::CollectiveGroup() {
  backend().begin_collective_group();
  ++open_group.depth;
}

void CollectiveGroup::end() {
  if (ended_) return;
  ended_ = true;
  --open_group.depth;
  std::vector<std::pair<std::shared_ptr<Stream>, Holds>> waiting;
  if (open_group.depth == 0) waiting.swap(open_group.waiting);
  // Whether ending fails or not, the holds go to their streams: work that was queued must keep them.
  std::exception_ptr failure;
  try {
    backend().end_collective_group();
  } catch (...) {
    failure = std::current_exception();
  }
  for (auto& [stream, holds] : waiting) stream->hold(std::move(holds));
  if (failure) std::rethrow_exception(failure);
}

CollectiveGroup::~CollectiveGroup() noexcept {
  try {
    end();
  } catch (...) {
    // The caller that wanted the error called end(); an unwinding scope has an error of its own.
  }
}

bool CollectiveGroup::open() noexcept { return open_group.depth > 0; }

void CollectiveGroup::hold_after_queued(const std::shared_ptr<Stream>& stream, Holds holds) {
  if (open_group.depth > 0) {
    open_group.waiting.emplace_back(stream, std::move(holds));
  } else {
    stream->hold(std::move(holds));
  }
}

}  // namespace cuweave
