#include "cuweave/communicator.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/collective_failures.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/default_stream.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event_pool.hpp"
#include "cuweave/interruptible_wait.hpp"
#include "cuweave/paused_streams.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"
#include "cuweave/weave.hpp"

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

void CollectiveLedger::withdraw(int rank, const Collective& call) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uint64_t place = --next_[static_cast<std::size_t>(rank)];
  int other_there = -1;  // a rank that has called its collective in this place too
  for (std::size_t other = 0; other < next_.size(); ++other) {
    if (static_cast<int>(other) != rank && next_[other] > place) other_there = static_cast<int>(other);
  }
  if (place < first_pending_) {
    // This rank's note was the last in this place and retired its entry (with one rank, every note does): the
    // place is open again. The other ranks called the same collective there, which this rank's next call must
    // match; with no other rank, the next call makes the place afresh.
    if (other_there >= 0) {
      try {
        pending_.push_front(Entry{call, other_there});
      } catch (...) {  // out of memory: the place goes unchecked rather than the ledger inconsistent
        return;
      }
    }
    first_pending_ = place;
    return;
  }
  // The entry this rank made, if no other rank has matched it yet: the next rank to get there makes its own.
  if (other_there < 0 && place - first_pending_ + 1 == pending_.size() && pending_.back().rank == rank) {
    pending_.pop_back();
  }
}

namespace {

// Every backend call on a communicator (Note [Collective timeouts]): none of them may overlap the abort that
// frees it. Leaked: communicators may be aborted during interpreter exit.
std::mutex& calls_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

constexpr int kNcclInvalidUsage = 5;
constexpr int kNcclTimeout = 8;  // NCCL's own name and number for a timeout (nccl.h of NCCL 2.29)
constexpr double kLongestTimeout = 1e8;  // seconds (three years): longer ones would overflow the clock
constexpr const char* kTimeoutVariable = "CUWEAVE_COLLECTIVE_TIMEOUT_S";
constexpr const char* kAborted = "cuweave aborted the communicator (NCCL's ncclCommAbort)";
constexpr const char* kMakeAnother = "it refuses later collectives: make a new communicator";

std::string seconds(CollectiveTimeout timeout) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", timeout.count());
  return text;
}

// "within 1.5 s ... (the communicator's timeout: ...)", `since` saying from when.
std::string within(CollectiveTimeout timeout, const std::string& since) {
  return "within " + seconds(timeout) + since + " (the communicator's timeout: Communicator(timeout=...) or " +
         kTimeoutVariable + ")";
}

CollectiveTimeout checked_timeout(CollectiveTimeout timeout) {
  if (!(timeout.count() > 0 && timeout.count() <= kLongestTimeout)) {
    throw InvalidArgument("a communicator's timeout is a number of seconds above 0 (at most 1e8), not " +
                          std::to_string(timeout.count()));
  }
  return timeout;
}

std::chrono::steady_clock::time_point after(CollectiveTimeout timeout) {
  return std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout);
}

}  // namespace

CollectiveTimeout Communicator::default_timeout() {
  const char* value = std::getenv(kTimeoutVariable);
  if (value == nullptr || *value == '\0') return std::chrono::minutes(10);
  char* end = nullptr;
  const double parsed = std::strtod(value, &end);
  if (end == value || *end != '\0' || !(parsed > 0 && parsed <= kLongestTimeout)) {
    throw InvalidArgument(std::string(kTimeoutVariable) + " is a number of seconds above 0 (at most 1e8), not \"" +
                          value + "\"");
  }
  return CollectiveTimeout(parsed);
}

std::string Communicator::new_id() {
  backend().devices().require_device();
  return backend().collectives().collective_id();
}

std::shared_ptr<Communicator> Communicator::join(const std::string& id, int ranks, int rank, int device,
                                                 CollectiveTimeout timeout) {
  if (id.size() != CollectiveBackend::kCollectiveIdBytes) {
    throw InvalidArgument("a communicator id is " + std::to_string(CollectiveBackend::kCollectiveIdBytes) +
                          " bytes (from cuweave.collectives.unique_id()), not " + std::to_string(id.size()));
  }
  if (ranks < 1) throw InvalidArgument("ranks must be at least 1, not " + std::to_string(ranks));
  if (rank < 0 || rank >= ranks) {
    throw InvalidArgument("rank " + std::to_string(rank) + " is not one of the " + std::to_string(ranks) +
                          " ranks (0 to " + std::to_string(ranks - 1) + ")");
  }
  const auto deadline = after(checked_timeout(timeout));
  CommunicatorHandle handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(calls_mutex());
    handle = backend().collectives().create_communicator(id, ranks, rank, device);
  }
  std::shared_ptr<Communicator> made(new Communicator(handle, rank, ranks, device, nullptr, timeout));
  made->await_ready(deadline, "ncclCommInitRankConfig", "joining", "a rank failed, or has not joined with this id");
  return made;
}

std::vector<std::shared_ptr<Communicator>> Communicator::for_devices(const std::vector<int>& devices,
                                                                     CollectiveTimeout timeout) {
  if (devices.empty()) throw InvalidArgument("a communicator needs at least one device");
  if (std::set<int>(devices.begin(), devices.end()).size() != devices.size()) {
    throw InvalidArgument("each device may hold one rank of a communicator; the devices given repeat one");
  }
  const auto deadline = after(checked_timeout(timeout));
  std::vector<CommunicatorHandle> handles;
  {
    std::lock_guard<std::mutex> lock(calls_mutex());
    handles = backend().collectives().create_communicators(devices);
  }
  auto ledger = std::make_shared<CollectiveLedger>(static_cast<int>(devices.size()));
  std::vector<std::shared_ptr<Communicator>> made;
  for (std::size_t rank = 0; rank < devices.size(); ++rank) {
    made.push_back(std::shared_ptr<Communicator>(new Communicator(
        handles[rank], static_cast<int>(rank), static_cast<int>(devices.size()), devices[rank], ledger, timeout)));
  }
  try {
    for (const auto& communicator : made) {
      communicator->await_ready(deadline, "ncclCommInitRankConfig", "joining",
                                "the ranks join together, in one group of this process");
    }
  } catch (...) {
    for (const auto& communicator : made) communicator->abort("another rank of this process failed to join");
    throw;
  }
  return made;
}

void Communicator::abort_unfinished(const std::string& why) noexcept {
  try {
    for (const auto& communicator : services().collective_watchdog().watched()) {
      if (communicator->forget_completed()) communicator->abort(why);
    }
  } catch (...) {
    // Out of memory at exit: the process ends anyway.
  }
}

Communicator::Communicator(CommunicatorHandle handle, int rank, int ranks, int device,
                           std::shared_ptr<CollectiveLedger> ledger, CollectiveTimeout timeout)
    : handle_(handle), rank_(rank), ranks_(ranks), device_(device), ledger_(std::move(ledger)), timeout_(timeout) {}

Communicator::~Communicator() {
  for (const Watch& watch : watches_) services().events().release(watch.device, watch.completion);
  // NCCL's destroy synchronizes the communicator's streams and frees its device memory, so it may wait for the
  // device's queued work: behind a paused stream, until the pause ends (Note [Releases behind a pause]). No
  // other reference is left, so no other call can use this communicator: the destroy takes no calls lock, and
  // other communicators' collectives never wait for it.
  if (handle_) {
    paused_streams::release_when_none([handle = handle_] { backend().collectives().destroy_communicator(handle); });
  }
}

std::string Communicator::where() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(ranks_) + " (device " + std::to_string(device_) +
         ")";
}

std::shared_ptr<const BackendError> Communicator::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void Communicator::abort(const std::string& why) noexcept {
  fail("ncclCommAbort", kNcclInvalidUsage, "ncclInvalidUsage", "the communicator was aborted (" + why + ")");
}

void Communicator::refuse_if_failed(const std::string& what) const {
  const std::shared_ptr<const BackendError> failed = failure();
  if (!failed) return;
  throw BackendError(failed->call(), failed->code(), failed->name(),
                     what + " on " + where() + " is refused: the communicator failed and was aborted earlier (" +
                         failed->what() + "); make a new communicator",
                     __FILE__, __LINE__);
}

void Communicator::check_stream(const Collective& collective, const Stream& stream) const {
  if (stream.device() != device_) {
    throw InvalidArgument(describe(collective) + ": the communicator of rank " + std::to_string(rank_) +
                          " is on device " + std::to_string(device_) + ", the stream on device " +
                          std::to_string(stream.device()) + "; use a stream of device " + std::to_string(device_));
  }
}

void Communicator::describe_operation(Operation& operation, const Collective& collective,
                                      const std::shared_ptr<DeviceArray>& send,
                                      const std::shared_ptr<DeviceArray>& recv) const {
  const auto use = [&operation](const std::shared_ptr<DeviceArray>& array, std::size_t bytes,
                                sanitizer::AccessKind kind) {
    if (!array) return;
    if (bytes == array->nbytes()) {
      operation.uses(array, kind);
    } else {
      operation.uses_part(array, array->data(), bytes, kind);
    }
  };
  use(send, send_bytes(collective, rank_, ranks_), sanitizer::AccessKind::Read);
  use(recv, recv_bytes(collective, rank_, ranks_), sanitizer::AccessKind::Write);
  operation.ordered_by(this);  // NCCL runs a communicator's collectives in the order each rank queued them
}

std::shared_ptr<Stream> Communicator::place(Operation& operation, std::shared_ptr<Stream> given) const {
  if (!given && !Weave::active()) {
    std::shared_ptr<Stream> current = current_stream::get();
    given = current->device() == device_ ? std::move(current) : DefaultStream::legacy(device_);
  }
  return place_on(operation, std::move(given), device_);
}

void Communicator::enqueue(const Collective& collective, Operation& operation, const std::shared_ptr<Stream>& stream) {
  const std::string what = describe(collective);
  const char* call = nccl_function(collective.kind);
  if (closed_) throw InvalidArgument(what + " on a closed communicator");
  refuse_if_failed(what);
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
  // Note [Collectives in graphs]
  const std::shared_ptr<Capture> capture = Capture::any_active() ? Capture::of(*stream) : nullptr;
  if (!capture && backend().capture().capture_state(stream->handle()).status != CaptureState::Status::None) {
    throw InvalidArgument(what + ": the stream is being captured by another library; cuweave captures collectives "
                                 "inside cuweave.capture() only, where their arrays are kept as long as the graph");
  }
  if (capture) capture->refuse_in_body(*stream, call, "a collective");
  // The arrays' memory follows the stream before the sanitizer's check, which records even a refused call.
  submission_detail::follow(operation, stream);
  on_device_of(*stream, [&] {
    const bool noted = ledger_ && !peer;
    if (noted) ledger_->note(rank_, collective);
    try {
      queue(collective, operation, *stream);
    } catch (...) {
      if (noted) ledger_->withdraw(rank_, collective);  // refused (a race, NCCL's error): as if never called
      throw;
    }
  });
  Holds holds = std::move(operation.kept());
  holds.push_back(shared_from_this());
  if (capture) {
    capture->keep_collective(CapturedCollective{shared_from_this(), what, call});
    capture->touched(operation.accesses());  // Note [Footprints of captures]
  }
  if (CollectiveGroup::open()) {
    CollectiveGroup::defer(shared_from_this(), stream, std::move(holds), what, call, capture != nullptr);
  } else {
    try {
      await_ready(after(timeout_), call, "queuing " + what,
                  "NCCL connects the ranks as their first collectives meet: a rank failed, or has not called it");
    } catch (...) {
      stream->hold(std::move(holds));  // whatever NCCL queued before the abort must keep them
      throw;
    }
    queued(stream, std::move(holds), what, call, capture != nullptr);
  }
  submission_detail::mark_written(operation, stream);
}

void Communicator::queue(const Collective& collective, Operation& operation, Stream& stream) {
  if (sanitizer::enabled()) submission_detail::check(operation, stream);
  std::lock_guard<std::mutex> lock(calls_mutex());
  backend().collectives().collective(collective, live_handle(describe(collective)), stream.handle());
  if (CollectiveGroup::open()) ++grouped_;
}

void Communicator::queued(const std::shared_ptr<Stream>& stream, Holds holds, const std::string& what,
                          const char* call, bool captured) {
  stream->hold(std::move(holds));
  // Captured, it runs at the graph's replays, which are watched instead (Note [Collectives in graphs]); failed,
  // the caller has the error.
  if (!captured && !failure()) watch(stream, what, call);
}

void Communicator::await_ready(std::chrono::steady_clock::time_point deadline, const char* call,
                               const std::string& doing, const std::string& stalled_because) {
  auto last_interrupt_check = std::chrono::steady_clock::now();
  for (unsigned polls = 0;; ++polls) {
    bool ready = false;
    try {
      std::lock_guard<std::mutex> lock(calls_mutex());
      ready = backend().collectives().communicator_ready(live_handle(doing));
    } catch (const BackendError& error) {
      if (!failure()) fail(call, error.code(), error.name(), doing + " failed (" + error.what() + ")");
      throw BackendError(*failure());  // this failure, or the one that aborted the communicator meanwhile
    }
    if (ready) return;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      fail(call, kNcclTimeout, "ncclTimeout", doing + " was not done " + within(timeout_, "") + ": " + stalled_because);
      throw BackendError(*failure());
    }
    if (now - last_interrupt_check >= kWaitSlice) {
      last_interrupt_check = now;
      try {
        check_interrupt();  // Note [Interruptible waits]
      } catch (...) {
        abort(doing + " was interrupted (KeyboardInterrupt)");  // NCCL must not be left half done
        throw;
      }
    }
    // NCCL's thread queues the work within microseconds once the ranks are connected: yield at first, then
    // sleep longer and longer (up to a millisecond) while it waits for the other ranks.
    if (polls < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000u, 10u * (polls - 63))));
    }
  }
}

void Communicator::watch(const std::shared_ptr<Stream>& stream, const std::string& what, const char* call) {
  const int device = stream->device();
  EventHandle completion = stream->record_pooled_unobserved(services().events());
  Watch watch{completion, device, stream, stream.get(), collective_failures::next(), what, call, after(timeout_)};
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_) {
      first = watches_.empty();
      watches_.push_back(std::move(watch));
      watch.completion = nullptr;
    }
  }
  if (watch.completion) {  // the communicator failed while this was being queued: it did not run through
    collective_failures::mark(watch.stream, watch.stream_key, watch.number,
                              std::make_exception_ptr(BackendError(*failure())));
    services().events().release(device, completion);
    return;
  }
  if (first) services().collective_watchdog().watch(shared_from_this());
}

bool Communicator::watching() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !failure_ && !watches_.empty();
}

CommunicatorHandle Communicator::live_handle(const std::string& what) const {
  if (handle_) return handle_;
  refuse_if_failed(what);  // aborted: by a failure, or by abort()
  throw InvalidArgument(what + " on " + where() + ": the communicator was aborted; make a new one");
}

bool Communicator::forget_completed() {
  // Forget what completed. Collectives on one stream complete in order, on several nearly so; one that
  // completed behind an unfinished one is forgotten with it.
  while (true) {
    EventHandle oldest = nullptr;
    int device = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_ || watches_.empty()) return false;
      oldest = watches_.front().completion;
      device = watches_.front().device;
    }
    bool completed = false;
    try {
      completed = backend().collectives().collective_completed(oldest);
    } catch (...) {
      completed = false;  // the device is failing: the timeout ends it
    }
    if (!completed) break;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (watches_.empty() || watches_.front().completion != oldest) continue;
      watches_.pop_front();
    }
    services().events().release(device, oldest);
  }
  return watching();
}

bool Communicator::check_progress(std::chrono::steady_clock::time_point now,
                                  std::chrono::steady_clock::time_point& wake) {
  if (!forget_completed()) return false;
  const char* call = nullptr;
  EventHandle culprit = nullptr;
  std::string what;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (watches_.empty()) return false;
    const Watch& oldest = watches_.front();
    wake = std::min(wake, oldest.deadline);
    call = oldest.call;
    if (now >= oldest.deadline) {
      culprit = oldest.completion;
      what = oldest.what;
    }
  }
  if (culprit) {
    const std::string late =
        "was not done " + within(timeout_, " of being queued") + ": a rank failed, or has not called it";
    fail(call, kNcclTimeout, "ncclTimeout", what + " " + late, culprit, late);
    return false;
  }
  try {
    std::lock_guard<std::mutex> lock(calls_mutex());
    if (handle_) backend().collectives().communicator_ready(handle_);  // its error is asynchronous: a peer went away
  } catch (const BackendError& error) {
    fail(call, error.code(), error.name(), std::string("NCCL reported an error (") + error.what() + ")");
    return false;
  }
  return true;
}

void Communicator::fail(const char* call, int code, const std::string& name, const std::string& reason,
                        EventHandle culprit, const std::string& culprit_text) noexcept {
  try {
    auto failed = std::make_shared<const BackendError>(call, code, name, where() + ": " + reason + ". " + kAborted +
                                                                             "; " + kMakeAnother,
                                                       __FILE__, __LINE__);
    std::deque<Watch> unfinished;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_) return;
      failure_ = failed;
      unfinished.swap(watches_);
    }
    // Marked before the abort lets the streams move on (Note [Collective failures reach the waits]).
    for (const Watch& watch : unfinished) {
      bool completed = false;
      try {
        completed = backend().collectives().collective_completed(watch.completion);
      } catch (...) {
      }
      if (completed) continue;  // it got through before the failure
      const std::string what = watch.what + " on " + where() + " " +
                               (watch.completion == culprit ? culprit_text : "did not complete: " + reason);
      const std::string aftermath = std::string(kAborted) + ": this stream went on without its result; " + kMakeAnother;
      collective_failures::mark(watch.stream, watch.stream_key, watch.number,
                                std::make_exception_ptr(
                                    BackendError(watch.call, code, name, what + ". " + aftermath, __FILE__, __LINE__)));
    }
    {
      std::lock_guard<std::mutex> lock(calls_mutex());
      if (grouped_ > 0) {
        abort_pending_ = true;  // NCCL's open group refers to it: aborted as the group ends
      } else if (handle_) {
        backend().collectives().abort_communicator(std::exchange(handle_, nullptr));
      }
    }
    for (const Watch& watch : unfinished) services().events().release(watch.device, watch.completion);
  } catch (...) {
    // Out of memory for the messages: abort anyway, so that nothing waits forever.
    std::lock_guard<std::mutex> lock(calls_mutex());
    if (handle_ && grouped_ == 0) backend().collectives().abort_communicator(std::exchange(handle_, nullptr));
  }
}

namespace {

// What follows the queuing of one collective in an open group (Communicator::queued), done as it ends.
struct Deferred {
  std::shared_ptr<Communicator> communicator;
  std::shared_ptr<Stream> stream;
  Holds holds;
  std::string what;
  const char* call;
  bool captured;
};

struct OpenGroup {
  int depth = 0;
  std::vector<Deferred> waiting;  // collectives not queued yet
};

thread_local OpenGroup open_group;

}  // namespace

CollectiveGroup::CollectiveGroup() {
  backend().collectives().begin_collective_group();
  ++open_group.depth;
}

void CollectiveGroup::end() {
  if (ended_) return;
  ended_ = true;
  --open_group.depth;
  std::vector<Deferred> waiting;
  if (open_group.depth == 0) waiting.swap(open_group.waiting);
  // Whether ending fails or not, the holds go to their streams: work that was queued must keep them.
  std::exception_ptr failure;
  {
    std::lock_guard<std::mutex> lock(calls_mutex());
    try {
      backend().collectives().end_collective_group();
    } catch (...) {
      failure = std::current_exception();
    }
    for (Deferred& deferred : waiting) {
      Communicator& communicator = *deferred.communicator;
      if (--communicator.grouped_ == 0 && communicator.abort_pending_ && communicator.handle_) {
        backend().collectives().abort_communicator(std::exchange(communicator.handle_, nullptr));
      }
    }
  }
  // NCCL queues a group's work in a thread of its own: each communicator of it is awaited once.
  std::vector<const Communicator*> awaited;
  for (const Deferred& deferred : waiting) {
    if (failure) break;
    if (std::find(awaited.begin(), awaited.end(), deferred.communicator.get()) != awaited.end()) continue;
    awaited.push_back(deferred.communicator.get());
    try {
      deferred.communicator->await_ready(
          after(deferred.communicator->timeout()), deferred.call, "queuing " + deferred.what + " (in a group)",
          "NCCL connects the ranks as their first collectives meet: a rank failed, or has not called it");
    } catch (...) {
      failure = std::current_exception();
    }
  }
  for (Deferred& deferred : waiting) {
    deferred.communicator->queued(deferred.stream, std::move(deferred.holds), deferred.what, deferred.call,
                                  deferred.captured);
  }
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

void CollectiveGroup::defer(std::shared_ptr<Communicator> communicator, std::shared_ptr<Stream> stream, Holds holds,
                            std::string what, const char* call, bool captured) {
  open_group.waiting.push_back(
      Deferred{std::move(communicator), std::move(stream), std::move(holds), std::move(what), call, captured});
}

}  // namespace cuweave
