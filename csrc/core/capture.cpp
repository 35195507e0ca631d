#include "cuweave/capture.hpp"

#include <algorithm>
#include <map>
#include <thread>

#include "cuweave/errors.hpp"
#include "cuweave/graph.hpp"
#include "cuweave/host_callbacks.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"

namespace cuweave {

std::atomic<int> Capture::active_count_{0};
std::atomic<int> Capture::fences_{0};

namespace {
// Active captures by backend capture id. Leaked: captures may be abandoned during interpreter exit.
std::mutex& registry_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::map<std::uint64_t, std::weak_ptr<Capture>>& registry() {
  static auto* captures = new std::map<std::uint64_t, std::weak_ptr<Capture>>;
  return *captures;
}
std::vector<std::function<void()>>& waiting_for_no_capture() {  // LOCK: registry_mutex()
  static auto* actions = new std::vector<std::function<void()>>;
  return *actions;
}
bool still_capturing(const Stream& stream) noexcept {
  try {
    return backend().capture().capture_state(stream.raw_handle()).status != CaptureState::Status::None;
  } catch (...) {
    return false;
  }
}
}  // namespace

const char* to_string(CaptureMode mode) noexcept {
  switch (mode) {
    case CaptureMode::Global: return "global";
    case CaptureMode::ThreadLocal: return "thread_local";
    case CaptureMode::Relaxed: return "relaxed";
  }
  return "unknown";
}

Capture::Capture(std::shared_ptr<Stream> stream, CaptureMode mode, std::uint64_t id, bool graph_memory)
    : stream_(std::move(stream)),
      mode_(mode),
      id_(id),
      graph_memory_made_(graph_memory ? std::make_shared<std::atomic<bool>>(false) : nullptr) {
  ledgers_.push_back(std::make_shared<CallbackLedger>());
}

Capture::~Capture() { abandon(); }

std::shared_ptr<Capture> Capture::begin(std::shared_ptr<Stream> stream, CaptureMode mode, bool graph_memory) {
  if (stream->is_legacy_default()) {
    throw InvalidArgument(
        "the legacy default stream cannot be captured; capture a cuweave.Stream() (or the per-thread default stream)");
  }
  const CaptureState before =
      on_device_of(*stream, [&] { return backend().capture().capture_state(stream->handle()); });
  if (before.status != CaptureState::Status::None) {
    throw InvalidArgument("this stream is already being captured; end that capture (leave its with-block) first");
  }
  // Active from before CUDA's capture begins (Note [Deciding beside a beginning capture]).
  active_count_.fetch_add(1, std::memory_order_seq_cst);
  while (fences_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  std::shared_ptr<Capture> capture;
  try {
    backend().capture().begin_capture(stream->handle(), mode);
    const CaptureState state = backend().capture().capture_state(stream->handle());
    capture.reset(new Capture(std::move(stream), mode, state.id, graph_memory));
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry()[state.id] = capture;
  } catch (...) {
    if (!capture) no_longer_beginning();  // else the Capture's destructor abandons it, which counts it ended
    throw;
  }
  return capture;
}

void Capture::no_longer_beginning() noexcept {
  std::vector<std::function<void()>> released;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    if (active_count_.fetch_sub(1, std::memory_order_acq_rel) == 1) released.swap(waiting_for_no_capture());
  }
  for (auto& action : released) action();
}

namespace {

// What a stream handle takes part in: `capturing` whether any capture, and the capture if it is one of
// cuweave's (null for a capture another library began). A handle CUDA does not know takes part in none.
struct Participation {
  bool capturing = false;
  std::shared_ptr<Capture> capture;
};

Participation participation_of(StreamHandle handle) {
  CaptureState state;
  try {
    state = backend().capture().capture_state(handle);
  } catch (const BackendError&) {
    return {};
  }
  if (state.status == CaptureState::Status::None) return {};
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(state.id);
  return {true, it == registry().end() ? nullptr : it->second.lock()};
}

}  // namespace

std::shared_ptr<Capture> Capture::of(const Stream& stream) {
  // The legacy default stream is never captured, and asking about it while a blocking stream captures is
  // itself an error (cudaErrorStreamCaptureImplicit), which destructors calling here must not see.
  if (!any_active() || stream.closed() || stream.is_legacy_default()) return nullptr;
  return participation_of(stream.raw_handle()).capture;
}

std::shared_ptr<Stream> Capture::describing_capturing(StreamHandle handle) {
  const Participation participation = participation_of(handle);
  if (!participation.capturing) return nullptr;  // describing it is safe (or fails as it would have)
  const std::shared_ptr<Capture>& capture = participation.capture;
  if (capture && capture->stream_->raw_handle() == handle) return capture->stream_;
  throw BackendError("cudaStreamGetDevice", 900, "cudaErrorStreamCaptureUnsupported",
                     "cannot adopt a stream while it takes part in a capture that it did not begin: CUDA refuses to "
                     "describe it, and the refusal would invalidate the capture. Adopt it before the capture begins",
                     __FILE__, __LINE__);
}

void Capture::when_none_active(std::function<void()> action) {
  const BeginFence fence;  // no capture begins between the check and the action
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    if (active_count_.load(std::memory_order_acquire) > 0) {
      waiting_for_no_capture().push_back(std::move(action));
      return;
    }
  }
  action();
}

void Capture::refuse_wait(const Stream& stream, const char* call, const std::string& what) {
  if (!any_active() || !of(stream)) return;
  throw BackendError(call, 900, "cudaErrorStreamCaptureUnsupported",
                     what + " is not allowed while the stream is being captured (cuweave.capture): captured work "
                            "runs only when the graph is replayed. Wait after the capture block, on the replay stream",
                     __FILE__, __LINE__);
}

bool Capture::ended() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ended_;
}

void Capture::allocated_graph_memory(std::weak_ptr<const void> allocation) {
  std::lock_guard<std::mutex> lock(mutex_);
  graph_allocations_.push_back(std::move(allocation));
}

bool Capture::free_at_end(void* pointer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return false;
  temporaries_.push_back(pointer);
  return true;
}

void Capture::keep(Holds holds) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Hold& hold : holds) holds_.push_back(std::move(hold));
}

void Capture::defer(std::function<void()> action) {
  std::lock_guard<std::mutex> lock(mutex_);
  deferred_.push_back(std::move(action));
}

const std::shared_ptr<CallbackLedger>& Capture::callbacks() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ledgers_.front();
}

void Capture::keep_collective(CapturedCollective collective) {
  std::lock_guard<std::mutex> lock(mutex_);
  collectives_.push_back(std::move(collective));
}

void Capture::embed(const Graph& graph) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto& embedded = graph.graph_template();
  holds_.push_back(embedded);  // the template's holds cover what the embedded nodes use
  for (const auto& ledger : embedded->ledgers) ledgers_.push_back(ledger);
  for (const auto& collective : embedded->collectives) collectives_.push_back(collective);
  if (!embedded->footprint.known) {
    embedded_unknown_ = true;
    return;
  }
  const std::vector<sanitizer::Access> footprint = embedded->footprint.all();
  touched_.insert(touched_.end(), footprint.begin(), footprint.end());
}

void Capture::touched(sanitizer::AccessSpan accesses) {
  std::lock_guard<std::mutex> lock(mutex_);
  touched_.insert(touched_.end(), accesses.begin(), accesses.end());
}

std::size_t& Capture::seen_nodes_locked(const void* graph) {
  for (auto& [seen_graph, count] : seen_nodes_) {
    if (seen_graph == graph) return count;
  }
  return seen_nodes_.emplace_back(graph, 0).second;
}

namespace {
// The nodes of the graph `stream` captures into (Note [Footprints of captures]); `failed`: the count could not be
// made, which the capture takes as unseen work.
struct NodeCount {
  bool failed = false;
  std::optional<CapturedNodes> nodes;
};
NodeCount count_nodes(const Stream& stream) noexcept {
  try {
    return {false, backend().capture().captured_nodes(stream.raw_handle())};
  } catch (...) {
    return {true, std::nullopt};
  }
}
}  // namespace

void Capture::calling(const Stream& stream) noexcept {
  const NodeCount count = count_nodes(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  // While another call is in flight, the nodes it adds are not yet seen: nothing is judged then.
  if (calls_in_flight_++ == 0 &&
      (count.failed || (count.nodes && count.nodes->count > seen_nodes_locked(count.nodes->graph)))) {
    (foreign_nodes_expected_ ? foreign_work_ : unseen_work_) = true;
  }
  foreign_nodes_expected_ = false;
}

void Capture::foreign_operation_seen() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  foreign_nodes_expected_ = true;
}

void Capture::called(const Stream& stream) noexcept {
  const NodeCount count = count_nodes(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  --calls_in_flight_;
  if (count.failed) unseen_work_ = true;
  if (count.nodes) {
    std::size_t& seen = seen_nodes_locked(count.nodes->graph);
    seen = std::max(seen, count.nodes->count);
  }
}

std::optional<std::vector<sanitizer::Access>> Capture::footprint(
    std::optional<std::vector<sanitizer::Access>> sanitized, bool host_functions) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (host_functions || embedded_unknown_ || unseen_work_) return std::nullopt;  // they may touch anything
  if (!foreign_work_) return std::move(touched_);
  return sanitized;  // the sanitizer saw the other libraries' operations too; nothing if it did not watch
}

void Capture::join_body(const Stream& body) {
  const CaptureState state = backend().capture().capture_state(body.handle());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    bodies_.emplace_back(&body, state.id);
  }
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[state.id] = shared_from_this();
}

void Capture::leave_body(const Stream& body) noexcept {
  std::uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = bodies_.begin(); it != bodies_.end(); ++it) {
      if (it->first == &body) {
        id = it->second;
        bodies_.erase(it);
        break;
      }
    }
  }
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().erase(id);
}

bool Capture::captures_body(const Stream& stream) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& body : bodies_) {
    if (body.first == &stream) return true;
  }
  return false;
}

void Capture::refuse_in_body(const Stream& stream, const char* call, const std::string& what) const {
  if (!captures_body(stream)) return;
  throw BackendError(call, 900, "cudaErrorStreamCaptureUnsupported", what + kNotInABody + "; queue it outside the body",
                     __FILE__, __LINE__);
}

void Capture::finish(std::vector<std::function<void()>>& deferred) noexcept {
  std::vector<std::function<void()>> released;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().erase(id_);
    if (active_count_.fetch_sub(1, std::memory_order_acq_rel) == 1) released.swap(waiting_for_no_capture());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  deferred.swap(deferred_);
  for (auto& action : released) deferred.push_back(std::move(action));
}

std::shared_ptr<Graph> Capture::end() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) throw InvalidArgument("this capture has ended already");
    if (!bodies_.empty()) {
      throw InvalidArgument("a conditional node's body is still being captured; end it (leave its with-block) first");
    }
    ended_ = true;
  }
  GraphHandle handle = nullptr;
  std::exception_ptr failure;
  bool memory_nodes = false;
  try {
    on_device_of(*stream_, [&] {
      memory_nodes = end_graph_memory();
      handle = backend().capture().end_capture(stream_->handle());
    });
  } catch (...) {
    // Refused (the wrong thread): the backend's capture goes on, so this one does too, and can still end.
    if (still_capturing(*stream_)) {
      std::lock_guard<std::mutex> lock(mutex_);
      ended_ = false;
      throw;
    }
    failure = std::current_exception();
  }
  std::vector<std::function<void()>> deferred;
  finish(deferred);
  for (auto& action : deferred) action();
  Holds holds;
  std::vector<std::shared_ptr<CallbackLedger>> ledgers;
  std::vector<CapturedCollective> collectives;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    holds.swap(holds_);
    ledgers.swap(ledgers_);
    collectives.swap(collectives_);
  }
  if (failure) {
    if (sanitizer::ever_enabled()) sanitizer::capture_ended(*this);
    std::rethrow_exception(failure);  // `holds` go with the failed capture
  }
  const bool host_functions = ledgers.front()->callbacks() != 0;
  if (!host_functions) ledgers.erase(ledgers.begin());
  std::shared_ptr<Graph> graph = Graph::adopt(handle, stream_->device(), std::move(holds), std::move(ledgers));
  graph->graph_template()->collectives = std::move(collectives);
  if (memory_nodes) graph->graph_template()->memory_made = graph_memory_made_;
  std::optional<std::vector<sanitizer::Access>> sanitized;
  if (sanitizer::ever_enabled()) sanitized = sanitizer::capture_ended(*this);
  if (auto accesses = footprint(std::move(sanitized), host_functions)) graph->set_captured_accesses(std::move(*accesses));
  return graph;
}

bool Capture::end_graph_memory() {
  std::vector<void*> temporaries;
  std::vector<std::weak_ptr<const void>> allocations;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    temporaries.swap(temporaries_);
    allocations.swap(graph_allocations_);
  }
  // Note [Graph memory]: on the capture's own stream, after the joins, each free node follows every user.
  for (void* pointer : temporaries) backend().memory().free_device(pointer, stream_->handle());
  Holds results;
  for (const std::weak_ptr<const void>& allocation : allocations) {
    if (std::shared_ptr<const void> alive = allocation.lock()) results.push_back(std::move(alive));
  }
  if (!results.empty()) keep(std::move(results));  // the graph holds its results' memory
  return !allocations.empty();
}

void Capture::abandon() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ended_) return;
    ended_ = true;
  }
  try {
    on_device_of(*stream_, [&] {
      GraphHandle handle = backend().capture().end_capture(stream_->raw_handle());
      backend().graphs().destroy_graph(handle);
    });
  } catch (...) {
    // The capture is over either way; the body's own exception is what the caller reports.
  }
  std::vector<std::function<void()>> deferred;
  finish(deferred);
  for (auto& action : deferred) {
    try {
      action();
    } catch (...) {
    }
  }
  Holds holds;
  std::vector<CapturedCollective> collectives;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    holds.swap(holds_);
    collectives.swap(collectives_);
  }
  if (sanitizer::ever_enabled()) sanitizer::capture_ended(*this);
}

}  // namespace cuweave
