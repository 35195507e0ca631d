#include "sim/capture_book.hpp"

#include <algorithm>
#include <unordered_set>

namespace cuweave::sim {

namespace {

std::string name_of(std::uint64_t capture_id) { return "capture " + std::to_string(capture_id); }

std::string names_of(const std::vector<std::uint64_t>& ids) {
  std::string names;
  for (std::uint64_t id : ids) names += (names.empty() ? "" : ", ") + name_of(id);
  return names;
}

bool is_legacy(const SimStream* stream) { return stream->kind == SimStream::Kind::LegacyDefault; }

}  // namespace

CaptureBook::Frontier* CaptureBook::frontier_of(const SimStream* stream) {
  auto it = streams_.find(stream);
  return it == streams_.end() ? nullptr : &it->second;
}

void CaptureBook::refuse(const std::vector<Capture*>& invalidating, const char* call, CudaLikeError error,
                         const std::string& description) {
  for (Capture* capture : invalidating) capture->invalidated = true;
  fail(call, error, description);
}

void CaptureBook::refuse_invalidated(const Capture& capture, const char* call) {
  fail(call, kStreamCaptureInvalidated,
       name_of(capture.id) + " was invalidated by an earlier error; end it (end_capture reports the failure) and "
                             "capture again");
}

void CaptureBook::check_implicit_synchronization(const SimStream* stream, const char* call) {
  if (!is_legacy(stream)) return;
  std::vector<Capture*> blocked;
  std::vector<std::uint64_t> ids;
  for (auto& [id, capture] : captures_) {
    const bool has_blocking_stream =
        std::any_of(capture->streams.begin(), capture->streams.end(),
                    [&](const SimStream* member) { return member->device == stream->device && member->blocking; });
    if (has_blocking_stream) {
      blocked.push_back(capture.get());
      ids.push_back(id);
    }
  }
  if (!blocked.empty()) {
    refuse(blocked, call, kStreamCaptureImplicit,
           "work on the legacy default stream synchronizes implicitly with blocking streams, and a blocking stream "
           "is capturing (" + names_of(ids) + "); capture on a non-blocking stream, or queue this work on another "
           "stream");
  }
}

constexpr const char* kRecordedNotRun = "its work is recorded into a graph, not run; end the capture first";

void CaptureBook::check_mode(const char* call, const std::string& what) {
  std::vector<Capture*> forbidding;
  std::vector<std::uint64_t> ids;
  for (auto& [id, capture] : captures_) {
    if (capture->invalidated) continue;
    if (capture->mode == CaptureMode::Global ||
        (capture->mode == CaptureMode::ThreadLocal && capture->thread == std::this_thread::get_id())) {
      forbidding.push_back(capture.get());
      ids.push_back(id);
    }
  }
  if (!forbidding.empty()) {
    refuse(forbidding, call, kStreamCaptureUnsupported,
           what + " is not allowed while a global capture, or a thread-local one begun by this thread, is active (" +
               names_of(ids) + "): it could wait for work the capture holds back. Do it after the capture ends, "
                               "or capture in relaxed mode");
  }
}

CaptureBook::Capture& CaptureBook::start(SimStream* stream, CaptureMode mode, const char* call) {
  if (is_legacy(stream)) {
    fail(call, kStreamCaptureUnsupported,
         "the legacy default stream cannot be captured; capture a stream you created, or the per-thread default "
         "stream");
  }
  if (const Frontier* frontier = frontier_of(stream)) {
    fail(call, kIllegalState,
         "this stream is already capturing (" + name_of(frontier->capture->id) + "); end that capture first");
  }
  auto capture = std::make_unique<Capture>();
  capture->id = ++last_id_;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  capture->origin = stream;
  capture->streams.push_back(stream);
  streams_[stream] = Frontier{capture.get(), {}};
  Capture& started = *capture;
  captures_[capture->id] = std::move(capture);
  return started;
}

void CaptureBook::begin(SimStream* stream, CaptureMode mode) {
  std::lock_guard<std::mutex> lock(mutex_);
  start(stream, mode, "cudaStreamBeginCapture");
}

std::optional<CapturedNodes> CaptureBook::nodes(const SimStream* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Frontier* frontier = frontier_of(stream);
  if (!frontier || frontier->capture->invalidated) return std::nullopt;
  const Graph* graph = frontier->capture->graph;
  return CapturedNodes{graph, graph->nodes().size()};
}

ConditionHandle CaptureBook::create_condition(const SimStream* stream, unsigned default_value) {
  constexpr const char* kCall = "cudaGraphConditionalHandleCreate";
  std::lock_guard<std::mutex> lock(mutex_);
  const Frontier* frontier = frontier_of(stream);
  if (!frontier) fail(kCall, kIllegalState, "this stream is not capturing: a condition belongs to a graph");
  if (frontier->capture->invalidated) refuse_invalidated(*frontier->capture, kCall);
  return conditions_.make(default_value);
}

ConditionalNode CaptureBook::add_conditional(SimStream* stream, ConditionHandle condition, ConditionalKind kind,
                                             unsigned bodies) {
  constexpr const char* kCall = "cudaGraphAddNode";
  ConditionalNode made;
  ConditionalGraphNode params = new_conditional(conditions_, condition, kind, bodies, made, kCall);
  std::lock_guard<std::mutex> lock(mutex_);
  Frontier* frontier = frontier_of(stream);
  if (!frontier) fail(kCall, kIllegalState, "this stream is not capturing: there is no graph to add the node to");
  Capture* capture = frontier->capture;
  if (capture->invalidated) refuse_invalidated(*capture, kCall);
  for (GraphHandle body : made.bodies) capture->bodies.push_back(static_cast<const Graph*>(body));
  Node* node = capture->graph->add(std::move(params), frontier->nodes);
  frontier->nodes = {node};
  made.node = node;
  return made;
}

std::vector<GraphNodeHandle> CaptureBook::frontier(const SimStream* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Frontier* frontier = frontier_of(stream);
  if (!frontier) fail("cudaStreamGetCaptureInfo", kIllegalState, "this stream is not capturing");
  return std::vector<GraphNodeHandle>(frontier->nodes.begin(), frontier->nodes.end());
}

void CaptureBook::begin_into(SimStream* stream, GraphHandle body, CaptureMode mode) {
  constexpr const char* kCall = "cudaStreamBeginCaptureToGraph";
  std::lock_guard<std::mutex> lock(mutex_);
  Graph* target = nullptr;
  for (auto& [id, capture] : captures_) {
    for (const Graph* known : capture->bodies) {
      if (known == body) target = const_cast<Graph*>(known);
    }
  }
  if (!target) {
    fail(kCall, kInvalidValue, "not the body of a conditional node of a capture that is still going on");
  }
  Capture& started = start(stream, mode, kCall);
  started.owned.reset();
  started.graph = target;
}

void CaptureBook::end_into(SimStream* stream) {
  constexpr const char* kCall = "cudaStreamEndCapture";
  std::lock_guard<std::mutex> lock(mutex_);
  const Frontier* frontier = frontier_of(stream);
  if (!frontier) fail(kCall, kIllegalState, "this stream is not capturing");
  Capture* capture = frontier->capture;
  if (capture->origin != stream || capture->owned) {
    fail(kCall, kStreamCaptureUnmatched, "this stream is not the one that began capturing into a body");
  }
  check_joined_and_finish(capture, *frontier, kCall);
}

std::unique_ptr<Graph> CaptureBook::end(SimStream* stream) {
  constexpr const char* kCall = "cudaStreamEndCapture";
  std::lock_guard<std::mutex> lock(mutex_);
  const Frontier* frontier = frontier_of(stream);
  if (!frontier) fail(kCall, kIllegalState, "this stream is not capturing");
  Capture* capture = frontier->capture;
  const std::uint64_t id = capture->id;
  if (capture->origin != stream) {
    fail(kCall, kStreamCaptureUnmatched,
         "this stream joined " + name_of(id) + ", which began on another stream; end a capture on the stream that "
                                               "began it");
  }
  if (capture->mode != CaptureMode::Relaxed && capture->thread != std::this_thread::get_id()) {
    fail(kCall, kStreamCaptureWrongThread,
         "a global or thread-local capture must be ended by the thread that began it (or capture in relaxed mode)");
  }
  std::unique_ptr<Graph> graph = std::move(capture->owned);
  check_joined_and_finish(capture, *frontier, kCall);
  return graph;
}

void CaptureBook::check_joined_and_finish(Capture* capture, const Frontier& origin, const char* call) {
  const std::uint64_t id = capture->id;
  if (capture->invalidated) {
    finish(capture);
    fail(call, kStreamCaptureInvalidated,
         name_of(id) + " was invalidated by an earlier error (reported then); its work was discarded");
  }
  // Joined: every other stream's last nodes are among the origin's last nodes or what they depend on.
  std::unordered_set<const Node*> joined;
  std::vector<const Node*> pending(origin.nodes.begin(), origin.nodes.end());
  while (!pending.empty()) {
    const Node* node = pending.back();
    pending.pop_back();
    if (!joined.insert(node).second) continue;
    pending.insert(pending.end(), node->dependencies.begin(), node->dependencies.end());
  }
  const bool all_joined = std::all_of(capture->streams.begin(), capture->streams.end(), [&](const SimStream* member) {
    const std::vector<Node*>& last = streams_.at(member).nodes;
    return std::all_of(last.begin(), last.end(), [&](const Node* node) { return joined.count(node) > 0; });
  });
  if (!all_joined) {
    finish(capture);
    fail(call, kStreamCaptureUnjoined,
         "a stream forked from " + name_of(id) + " (it waited for an event recorded in the capture) has work the "
         "capturing stream never waited for");
  }
  finish(capture);
}

void CaptureBook::finish(Capture* capture) {
  for (const SimStream* member : capture->streams) streams_.erase(member);
  for (auto it = events_.begin(); it != events_.end();) {
    if (it->second.capture == capture) {
      // They stood for points of the graph; afterwards they look never recorded.
      scheduler_.forget_recordings(const_cast<SimEvent*>(it->first));
      it = events_.erase(it);
    } else {
      ++it;
    }
  }
  captures_.erase(capture->id);
}

CaptureState CaptureBook::state(const SimStream* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (is_legacy(stream)) {
    // As cudaStreamIsCapturing does, without invalidating: the legacy stream cannot capture, and its work
    // would synchronize with a capturing blocking stream.
    for (auto& [id, capture] : captures_) {
      for (const SimStream* member : capture->streams) {
        if (member->device == stream->device && member->blocking) {
          fail("cudaStreamGetCaptureInfo", kStreamCaptureImplicit,
               "the legacy default stream synchronizes implicitly with a capturing blocking stream (" + name_of(id) +
                   ")");
        }
      }
    }
    return {};
  }
  const Frontier* frontier = frontier_of(stream);
  if (!frontier) return {};
  return {frontier->capture->invalidated ? CaptureState::Status::Invalidated : CaptureState::Status::Active,
          frontier->capture->id};
}

bool CaptureBook::capture_or_run(SimStream* stream, const char* call,
                                 const std::function<std::vector<NodeParams>()>& make_chain,
                                 const std::function<void()>& run) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Frontier* frontier = frontier_of(stream)) {
    if (frontier->capture->invalidated) refuse_invalidated(*frontier->capture, call);
    std::vector<NodeParams> chain = make_chain();
    if (!frontier->capture->owned) {  // a conditional node's body
      for (const NodeParams& params : chain) {
        if (const char* forbidden = forbidden_in_body(params)) {
          refuse({frontier->capture}, call, kStreamCaptureUnsupported, std::string(forbidden) + kNotInABody);
        }
      }
    }
    for (NodeParams& params : chain) {
      Node* node = frontier->capture->graph->add(std::move(params), frontier->nodes);
      frontier->nodes = {node};
    }
    return true;
  }
  check_implicit_synchronization(stream, call);
  run();
  return false;
}

void CaptureBook::record_or_run(SimEvent* event, SimStream* stream, const std::function<void()>& run) {
  constexpr const char* kCall = "cudaEventRecord";
  std::lock_guard<std::mutex> lock(mutex_);
  if (const Frontier* frontier = frontier_of(stream)) {
    if (frontier->capture->invalidated) refuse_invalidated(*frontier->capture, kCall);
    events_[event] = *frontier;  // no node: the event now stands for this point of the capture
    return;
  }
  check_implicit_synchronization(stream, kCall);
  events_.erase(event);
  run();
}

void CaptureBook::wait_or_run(SimStream* stream, SimEvent* event, const std::function<void()>& run) {
  constexpr const char* kCall = "cudaStreamWaitEvent";
  std::lock_guard<std::mutex> lock(mutex_);
  Frontier* mine = frontier_of(stream);
  auto captured = events_.find(event);
  if (captured != events_.end()) {
    Capture* theirs = captured->second.capture;
    if (mine && mine->capture != theirs) {
      refuse({mine->capture, theirs}, kCall, kStreamCaptureIsolation,
             "a stream of " + name_of(mine->capture->id) + " waited for an event recorded in " +
                 name_of(theirs->id));
    }
    if (theirs->invalidated) refuse_invalidated(*theirs, kCall);
    const std::vector<Node*>& nodes = captured->second.nodes;
    if (mine) {
      for (Node* node : nodes) {
        if (std::find(mine->nodes.begin(), mine->nodes.end(), node) == mine->nodes.end()) mine->nodes.push_back(node);
      }
      return;  // a plain union, as CUDA: a join keeps the edge from the node its branches forked from
    }
    if (is_legacy(stream)) {
      check_implicit_synchronization(stream, kCall);
      refuse({theirs}, kCall, kStreamCaptureUnsupported,
             "the legacy default stream cannot join a capture (" + name_of(theirs->id) +
                 "); make a stream you created wait for this event");
    }
    streams_[stream] = Frontier{theirs, nodes};  // a fork: the stream joins the capture
    theirs->streams.push_back(stream);
    return;
  }
  if (mine) {
    if (mine->capture->invalidated) refuse_invalidated(*mine->capture, kCall);
    if (!scheduler_.has_recording(event)) return;  // waits for nothing, as outside capture
    refuse({mine->capture}, kCall, kStreamCaptureIsolation,
           "a stream of " + name_of(mine->capture->id) + " waited for an event recorded outside any capture");
  }
  check_implicit_synchronization(stream, kCall);
  run();
}

void CaptureBook::refuse_on_capturing_stream_locked(const SimStream* stream, const char* call, const char* doing,
                                                     const char* fix) {
  if (const Frontier* frontier = frontier_of(stream)) {
    if (frontier->capture->invalidated) refuse_invalidated(*frontier->capture, call);
    refuse({frontier->capture}, call, kStreamCaptureUnsupported,
           std::string("cannot ") + doing + " a stream while it is capturing (" + name_of(frontier->capture->id) +
               "): " + fix);
  }
}

void CaptureBook::check_stream_synchronize(const SimStream* stream, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  refuse_on_capturing_stream_locked(stream, call, "synchronize", kRecordedNotRun);
  check_mode(call, "synchronizing a stream");
}

void CaptureBook::check_stream_query(const SimStream* stream, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  refuse_on_capturing_stream_locked(stream, call, "query", kRecordedNotRun);
}

void CaptureBook::check_stream_described(const SimStream* stream, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  refuse_on_capturing_stream_locked(stream, call, "describe", "ask before the capture begins, or after it ends");
}

void CaptureBook::check_stream_ordered_memory(const SimStream* stream, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_implicit_synchronization(stream, call);
}

void CaptureBook::check_batched_copies(const SimStream* stream, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Frontier* frontier = frontier_of(stream);
  if (frontier == nullptr) return;
  if (frontier->capture->invalidated) refuse_invalidated(*frontier->capture, call);
  // Refused with the capture left intact (seen on an H200): nothing was queued.
  fail(call, kStreamCaptureUnsupported,
       "cannot queue a batch of copies on a stream while it is capturing (" + name_of(frontier->capture->id) +
           "): copy one by one while capturing (a graph has no node for a batch)");
}

void CaptureBook::check_memory_graph_launch(const SimStream* stream, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  refuse_on_capturing_stream_locked(stream, call, "launch a graph holding memory allocation or free nodes on",
                                    "launch it before the capture begins or after it ends (Note [Simulated graph "
                                    "memory])");
}

void CaptureBook::check_event_synchronize(const SimEvent* event, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_event_query_locked(event, call);
  check_mode(call, "waiting for an event");
}

void CaptureBook::check_event_query(const SimEvent* event, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  check_event_query_locked(event, call);
}

void CaptureBook::check_event_query_locked(const SimEvent* event, const char* call) {
  auto captured = events_.find(event);
  if (captured == events_.end()) return;
  Capture* capture = captured->second.capture;
  refuse({capture}, call, kCapturedEvent,
         "this event was recorded during " + name_of(capture->id) +
             ": it marks a point of the graph, not of work that runs; wait for or query an event recorded after "
             "the graph's launch instead");
}

void CaptureBook::check_device_synchronize(int device, const char* call) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Capture*> on_device;
  std::vector<std::uint64_t> ids;
  for (auto& [id, capture] : captures_) {
    const bool on_this_device = std::any_of(capture->streams.begin(), capture->streams.end(),
                                            [device](const SimStream* member) { return member->device == device; });
    if (!capture->invalidated && on_this_device) {
      on_device.push_back(capture.get());
      ids.push_back(id);
    }
  }
  if (!on_device.empty()) {
    refuse(on_device, call, kStreamCaptureUnsupported,
           "cannot synchronize the device while a stream on it is capturing (" + names_of(ids) +
               "); end the capture first");
  }
  check_mode(call, "synchronizing the device");
}

void CaptureBook::forget(const SimStream* stream) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  Frontier* frontier = frontier_of(stream);
  if (!frontier) return;
  Capture* capture = frontier->capture;
  capture->invalidated = true;
  if (capture->origin == stream) {
    finish(capture);  // nothing could end it any more
    return;
  }
  streams_.erase(stream);
  capture->streams.erase(std::find(capture->streams.begin(), capture->streams.end(), stream));
}

void CaptureBook::forget(const SimEvent* event) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.erase(event);
}

}  // namespace cuweave::sim
