#include "cuweave/graph.hpp"

#include <algorithm>

#include "cuweave/capture.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/paused_streams.hpp"
#include "cuweave/host_callbacks.hpp"
#include "cuweave/kernel.hpp"
#include "cuweave/lifetime_tracker.hpp"
#include "cuweave/operation.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/services.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"

namespace cuweave {

const char* to_string(Graph::Refresh refresh) noexcept {
  switch (refresh) {
    case Graph::Refresh::None: return "none";
    case Graph::Refresh::Instantiated: return "instantiated";
    case Graph::Refresh::Updated: return "updated";
    case Graph::Refresh::Reinstantiated: return "reinstantiated";
  }
  return "unknown";
}

const char* to_string(GraphNodeKind kind) noexcept {
  switch (kind) {
    case GraphNodeKind::Kernel: return "kernel";
    case GraphNodeKind::Copy: return "copy";
    case GraphNodeKind::Memset: return "memset";
    case GraphNodeKind::Host: return "host";
    case GraphNodeKind::EventRecord: return "event_record";
    case GraphNodeKind::EventWait: return "event_wait";
    case GraphNodeKind::Empty: return "empty";
    case GraphNodeKind::ChildGraph: return "graph";
    case GraphNodeKind::Allocation: return "allocation";
    case GraphNodeKind::Free: return "free";
    case GraphNodeKind::Conditional: return "conditional";
    case GraphNodeKind::Other: return "other";
  }
  return "unknown";
}

void GraphFootprint::set_node(GraphNodeHandle node, sanitizer::AccessSpan accesses) {
  ++changes;
  for (auto& [handle, known_accesses] : nodes) {
    if (handle == node) {
      known_accesses.assign(accesses.begin(), accesses.end());
      return;
    }
  }
  nodes.emplace_back(node, std::vector<sanitizer::Access>(accesses.begin(), accesses.end()));
}

void GraphFootprint::remap(const std::vector<PointerRemap>& remaps) {
  ++changes;
  auto moved = [&](sanitizer::Access& access) {
    for (const PointerRemap& remap : remaps) {
      const auto old_begin = reinterpret_cast<std::uintptr_t>(remap.old_base);
      if (access.begin >= old_begin && access.end <= old_begin + remap.bytes) {
        const auto new_begin = reinterpret_cast<std::uintptr_t>(remap.new_base);
        access.end = new_begin + (access.end - old_begin);
        access.begin = new_begin + (access.begin - old_begin);
        return;
      }
    }
  };
  for (sanitizer::Access& access : captured) moved(access);
  for (auto& node : nodes) {
    for (sanitizer::Access& access : node.second) moved(access);
  }
}

std::vector<sanitizer::Access> GraphFootprint::all() const {
  std::vector<sanitizer::Access> accesses = captured;
  for (const auto& node : nodes) accesses.insert(accesses.end(), node.second.begin(), node.second.end());
  return accesses;
}

GraphTemplate::~GraphTemplate() { backend().graphs().destroy_graph(handle); }

GraphExecutable::~GraphExecutable() {
  paused_streams::release_when_none([exec = handle] { backend().graphs().destroy_graph_exec(exec); });
}

Graph::Graph(std::shared_ptr<GraphTemplate> graph_template) : template_(std::move(graph_template)) {}

std::shared_ptr<Graph> Graph::create(int device) {
  auto graph_template = std::make_shared<GraphTemplate>(backend().graphs().create_graph(), device);
  return std::shared_ptr<Graph>(new Graph(std::move(graph_template)));
}

std::shared_ptr<Graph> Graph::adopt(GraphHandle handle, int device, Holds holds,
                                    std::vector<std::shared_ptr<CallbackLedger>> ledgers) {
  auto graph_template = std::make_shared<GraphTemplate>(handle, device);
  graph_template->holds = std::move(holds);
  graph_template->ledgers = std::move(ledgers);
  graph_template->footprint.known = false;  // until the capture tells what it touched
  return std::shared_ptr<Graph>(new Graph(std::move(graph_template)));
}

Graph::~Graph() {
  try {
    if (exec_) retire({std::move(exec_)});
  } catch (...) {
    // Retiring failed (the device is gone): nothing more can run, so dropping is safe.
  }
}

void Graph::retire(Holds holds) {
  if (holds.empty() || !last_stream_) return;  // never replayed: nothing queued uses them
  if (last_stream_->closed()) {
    // A destroyed stream's queued work still runs, but no event can be recorded on it any more: its work
    // is over once the event recorded as it closed is.
    if (EventHandle closing = last_stream_->closing_event()) {
      holds.push_back(last_stream_);
      services().lifetimes().hold_until_event(closing, last_stream_->device(), std::move(holds));
    } else {
      backend().devices().synchronize_device(last_stream_->device());
    }
    return;
  }
  if (Capture::any_active()) {
    if (std::shared_ptr<Capture> capture = Capture::of(*last_stream_)) {
      // The stream is being captured: wait for its earlier work once the capture has ended.
      std::shared_ptr<Stream> stream = last_stream_;
      auto kept = std::make_shared<Holds>(std::move(holds));
      capture->defer([stream, kept] { services().lifetimes().hold_until_complete(*stream, std::move(*kept)); });
      return;
    }
  }
  services().lifetimes().hold_until_complete(*last_stream_, std::move(holds));
}

void Graph::follow(const std::shared_ptr<Stream>& stream) {
  if (last_stream_ && last_stream_ != stream) retire({exec_});
  last_stream_ = stream;
}

namespace {
void append(Holds& to, Holds from) {
  for (Hold& hold : from) to.push_back(std::move(hold));
}
}  // namespace

void Graph::changed(Holds holds) {
  append(template_->holds, std::move(holds));
  template_->other_change = ++template_->version;
}

GraphNodeHandle Graph::added(GraphNodeHandle node, Holds holds) {
  changed(std::move(holds));
  return node;
}

GraphNodeHandle Graph::added(GraphNodeHandle node, Holds holds, sanitizer::AccessSpan accesses) {
  template_->footprint.set_node(node, accesses);
  return added(node, std::move(holds));
}

namespace {
std::vector<sanitizer::Access> copy_accesses(void* destination, const void* source, std::size_t bytes) {
  return {sanitizer::writes(destination, bytes), sanitizer::reads(source, bytes)};
}

// What a node described by `operation` keeps alive as long as the graph: its arrays' memory (no stream orders a
// node's use), and what the operation keeps besides.
Holds memory_holds(Operation& operation) {
  Holds holds;
  holds.reserve(operation.arrays().size() + operation.kept().size());
  for (const ArrayUse& use : operation.arrays()) holds.push_back(use.array->memory_hold());
  for (Hold& kept : operation.kept()) holds.push_back(std::move(kept));
  return holds;
}
}  // namespace

GraphNodeHandle Graph::add_kernel(const Kernel& kernel, const std::vector<GraphNodeHandle>& dependencies, Dim3 grid,
                                  Dim3 block, std::size_t shared_bytes, void** arguments, Operation& operation) {
  CUWEAVE_EXPECTS(kernel.device() == device(), "the kernel is loaded on device " + std::to_string(kernel.device()) +
                                                   " but the graph is for device " + std::to_string(device()));
  Holds holds = memory_holds(operation);
  holds.push_back(kernel.module_hold());
  return added(
      backend().graphs().add_kernel_node(target(), dependencies, kernel.handle(), grid, block, shared_bytes, arguments),
      std::move(holds), operation.accesses());
}

GraphNodeHandle Graph::add_copy(const std::vector<GraphNodeHandle>& dependencies, void* destination,
                                const void* source, std::size_t bytes, Holds holds) {
  return added(backend().graphs().add_copy_node(target(), dependencies, destination, source, bytes), std::move(holds),
               copy_accesses(destination, source, bytes));
}

GraphNodeHandle Graph::add_memset(const std::vector<GraphNodeHandle>& dependencies, void* destination, int value,
                                  std::size_t bytes, Holds holds) {
  return added(backend().graphs().add_memset_node(target(), dependencies, destination, value, bytes), std::move(holds),
               {sanitizer::writes(destination, bytes)});
}

GraphNodeHandle Graph::add_host(const std::vector<GraphNodeHandle>& dependencies, std::function<void()> callback,
                                std::string name) {
  refuse_in_body("a host node");
  auto ledger = std::make_shared<CallbackLedger>();  // one per host node: ledgers of child graphs stay apart
  HostFunction function = nullptr;
  void* user_data = nullptr;
  Hold kept =
      services().host_callbacks().add_to_graph(ledger, std::move(callback), function, user_data, std::move(name));
  GraphNodeHandle node = backend().graphs().add_host_node(target(), dependencies, function, user_data);
  template_->ledgers.push_back(std::move(ledger));
  template_->footprint.known = false;  // a host function may touch anything (Note [Graph footprints])
  return added(node, {std::move(kept)});
}

GraphNodeHandle Graph::add_event_record(const std::vector<GraphNodeHandle>& dependencies, EventHandle event,
                                        Hold event_owner) {
  refuse_in_body("an event record node");
  template_->footprint.recorded_events.push_back(event);
  return added(backend().graphs().add_event_record_node(target(), dependencies, event), {std::move(event_owner)});
}

GraphNodeHandle Graph::add_event_wait(const std::vector<GraphNodeHandle>& dependencies, EventHandle event,
                                      Hold event_owner) {
  refuse_in_body("an event wait node");
  template_->footprint.waited_events.push_back(event);
  return added(backend().graphs().add_event_wait_node(target(), dependencies, event), {std::move(event_owner)});
}

GraphNodeHandle Graph::add_empty(const std::vector<GraphNodeHandle>& dependencies) {
  return added(backend().graphs().add_empty_node(target(), dependencies), {});
}

GraphNodeHandle Graph::add_child(const std::vector<GraphNodeHandle>& dependencies, const Graph& child) {
  CUWEAVE_EXPECTS(&child != this, "a graph cannot contain itself");
  CUWEAVE_EXPECTS(child.device() == device(), "the child graph is for device " + std::to_string(child.device()) +
                                                  " but this graph is for device " + std::to_string(device()));
  CUWEAVE_EXPECTS(!child.is_body(), "a conditional node's body is part of its graph; embed a graph of its own");
  if (!child.template_->ledgers.empty()) refuse_in_body("a graph with host nodes");
  if (!child.template_->collectives.empty()) refuse_in_body("a graph with collectives");
  if (child.template_->memory_made) refuse_copy_of_graph_memory("cudaGraphAddChildGraphNode");
  GraphNodeHandle node = backend().graphs().add_child_graph_node(target(), dependencies, child.template_->handle);
  for (const auto& ledger : child.template_->ledgers) template_->ledgers.push_back(ledger);
  for (const auto& collective : child.template_->collectives) template_->collectives.push_back(collective);
  const GraphFootprint& embedded = child.template_->footprint;
  if (!embedded.known) template_->footprint.known = false;
  GraphFootprint& footprint = template_->footprint;
  footprint.waited_events.insert(footprint.waited_events.end(), embedded.waited_events.begin(),
                                 embedded.waited_events.end());
  footprint.recorded_events.insert(footprint.recorded_events.end(), embedded.recorded_events.begin(),
                                   embedded.recorded_events.end());
  return added(node, {child.template_}, child.template_->footprint.all());
}

ConditionHandle Graph::create_condition(unsigned default_value) {
  return backend().graphs().create_graph_condition(target(), default_value);
}

std::pair<GraphNodeHandle, std::vector<std::shared_ptr<Graph>>> Graph::add_conditional(
    const std::vector<GraphNodeHandle>& dependencies, ConditionHandle condition, ConditionalKind kind,
    unsigned bodies) {
  CUWEAVE_EXPECTS(valid_body_count(kind, bodies), kBodyCounts);
  ConditionalNode made = backend().graphs().add_conditional_node(target(), dependencies, condition, kind, bodies);
  std::vector<std::shared_ptr<Graph>> body_graphs;
  for (GraphHandle body : made.bodies) {
    std::shared_ptr<Graph> graph(new Graph(template_));
    graph->body_ = body;
    body_graphs.push_back(std::move(graph));
  }
  return {added(made.node, {}), std::move(body_graphs)};
}

GraphNodeHandle Graph::add_set_condition(const std::vector<GraphNodeHandle>& dependencies, ConditionHandle condition,
                                         const ConditionRule& rule, const std::shared_ptr<DeviceArray>& element) {
  return added(backend().graphs().add_set_condition_node(target(), dependencies, condition, rule),
               {element->memory_hold()}, {sanitizer::touches(*element, sanitizer::AccessKind::Read)});
}

void Graph::refuse_in_body(const char* what) const {
  if (!is_body()) return;
  throw InvalidArgument(std::string(what) + kNotInABody);
}

void Graph::refuse_failed_collectives() const {
  for (const CapturedCollective& collective : template_->collectives) {
    collective.communicator->refuse_if_failed("a replay of a graph holding " + collective.what);
  }
}

void Graph::watch_collectives(const std::shared_ptr<Stream>& stream) {
  std::vector<const Communicator*> watched;  // one watch per communicator covers all its collectives here
  for (const CapturedCollective& collective : template_->collectives) {
    if (std::find(watched.begin(), watched.end(), collective.communicator.get()) != watched.end()) continue;
    watched.push_back(collective.communicator.get());
    collective.communicator->watch(stream, "a replay of a graph holding " + collective.what, collective.call);
  }
}

void Graph::refuse_body_replay() const {
  if (!is_body()) return;
  throw InvalidArgument("this is a conditional node's body: it runs as part of the graph that holds the node; replay "
                        "that graph");
}

std::vector<GraphNodeInfo> Graph::nodes() { return backend().graphs().graph_nodes(target()); }

void Graph::set_kernel_arguments(GraphNodeHandle node, void** arguments, Operation& operation) {
  backend().graphs().set_kernel_node_arguments(node, arguments);
  template_->footprint.set_node(node, operation.accesses());
  changed(memory_holds(operation));
}

void Graph::set_copy(GraphNodeHandle node, void* destination, const void* source, std::size_t bytes, Holds holds) {
  backend().graphs().set_copy_node(node, destination, source, bytes);
  template_->footprint.set_node(node, copy_accesses(destination, source, bytes));
  changed(std::move(holds));
}

std::size_t Graph::replace_pointers(const std::vector<PointerRemap>& remaps, Holds holds, const Holds& released) {
  Repointed repointed = backend().graphs().replace_pointers(target(), remaps);
  const std::size_t replaced = repointed.pointers;
  // The template no longer points into the old buffers (the executable keeps its own Holds).
  auto& kept = template_->holds;
  kept.erase(std::remove_if(kept.begin(), kept.end(),
                            [&](const Hold& hold) {
                              return std::any_of(released.begin(), released.end(),
                                                 [&](const Hold& old) { return old && old.get() == hold.get(); });
                            }),
             kept.end());
  append(kept, std::move(holds));
  if (replaced > 0) {
    template_->footprint.remap(remaps);
    if (body_) {
      changed();  // a conditional node's body: its executable is the graph's holding it
    } else {
      auto& repointings = template_->repointings;
      if (repointings.size() == GraphTemplate::kRepointingsKept) repointings.erase(repointings.begin());
      repointings.emplace_back(++template_->version, std::move(repointed.nodes));
    }
  }
  return replaced;
}

// Note [Repointing node by node]
// A woven function called with other arrays at every call (double-buffered batches) repoints its graph, then
// replays it. Updating the whole executable (cudaGraphExecUpdate) reads every node again: on two H200s a
// woven step of 50 kernel nodes, 5 of them repointed, took 267 µs a call that way. So each repointing keeps the
// nodes it changed, and an executable that was current before a run of repointings, and nothing else, gets
// those nodes alone (cudaGraphExec*NodeSetParams), which CUDA allows only with the nodes of the graph it was
// instantiated from. Any other change (a node added, a copy set, another graph's nodes adopted), a conditional
// node among them, more repointings than are kept, or CUDA refusing a node's change: the whole update, as before.
// Either way the refresh is reported as "updated".
std::optional<std::vector<GraphNodeHandle>> Graph::repointed_since_current() const {
  const GraphTemplate& current = *template_;
  if (exec_->instantiated_from.lock().get() != &current || current.other_change > exec_version_) return std::nullopt;
  const auto& repointings = current.repointings;
  if (repointings.empty() || repointings.front().first > exec_version_ + 1) return std::nullopt;  // some not kept
  std::vector<GraphNodeHandle> nodes;
  for (const auto& [version, changed_nodes] : repointings) {
    if (version <= exec_version_) continue;
    for (GraphNodeHandle node : changed_nodes) {
      if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
    }
  }
  return nodes;
}

Graph::Refresh Graph::adopt_template_of(const Graph& other) {
  refuse_body_replay();
  CUWEAVE_EXPECTS(!other.is_body(), "a conditional node's body cannot be adopted; adopt the graph that holds it");
  CUWEAVE_EXPECTS(other.device() == device(), "the other graph is for device " + std::to_string(other.device()) +
                                                  " but this graph is for device " + std::to_string(device()));
  template_ = other.template_;
  exec_version_ = template_->version - 1;  // force bringing the executable up to date
  // The executable's parameters are no longer some version of the graph it was instantiated from: only the
  // whole update brings it up to date from now on (Note [Repointing node by node]).
  if (exec_) exec_->instantiated_from.reset();
  return refresh();
}

void Graph::set_node_priorities(bool on) {
  refuse_body_replay();
  if (on == node_priorities_) return;
  node_priorities_ = on;
  // An instantiation flag: the next replay instantiates anew (an update keeps the executable's flags).
  if (exec_) drop_executable();
}

void Graph::refuse_copy_of_graph_memory(const char* call) {
  throw BackendError(call, 900, "cudaErrorStreamCaptureUnsupported",
                     "this graph's temporaries are graph memory (cuweave.woven, a graph function), and CUDA neither "
                     "launches such a graph inside a capture nor copies it into another graph: call it before or "
                     "after the capture, or call the function it wraps inside the capture instead",
                     __FILE__, __LINE__);
}

void Graph::drop_executable() {
  if (!template_->memory_made) {
    retire({std::exchange(exec_, nullptr)});
    return;
  }
  // CUDA refuses a second executable of a graph holding memory nodes while the first lives (Note [Graph memory]):
  // the old one goes first, once its replays are over.
  if (last_stream_) {
    if (last_stream_->closed()) {
      backend().devices().synchronize_device(last_stream_->device());
    } else {
      last_stream_->synchronize();
    }
  }
  exec_.reset();
}

std::shared_ptr<GraphExecutable> Graph::instantiate() const {
  auto exec = std::make_shared<GraphExecutable>(
      backend().graphs().instantiate_graph(template_->handle, node_priorities_, template_->memory_made != nullptr));
  exec->instantiated_from = template_;
  exec->holds = template_->holds;
  exec->ledgers = template_->ledgers;
  return exec;
}

Graph::Refresh Graph::refresh() {
  refuse_body_replay();
  if (exec_ && exec_version_ == template_->version) return Refresh::None;
  std::optional<std::vector<GraphNodeHandle>> repointed;
  if (exec_) repointed = repointed_since_current();
  if (!exec_) {
    exec_ = instantiate();
    last_refresh_ = Refresh::Instantiated;
  } else if ((repointed &&
              backend().graphs().update_graph_exec_nodes(exec_->handle, template_->handle, *repointed)) ||
             backend().graphs().update_graph_exec(exec_->handle, template_->handle)) {
    Holds previous = std::exchange(exec_->holds, template_->holds);
    exec_->ledgers = template_->ledgers;
    retire(std::move(previous));
    last_refresh_ = Refresh::Updated;
  } else {
    if (template_->memory_made) drop_executable();
    std::shared_ptr<GraphExecutable> exec = instantiate();
    if (exec_) {
      retire({std::exchange(exec_, std::move(exec))});
    } else {
      exec_ = std::move(exec);
    }
    last_refresh_ = Refresh::Reinstantiated;
  }
  exec_version_ = template_->version;
  return last_refresh_;
}

void Graph::upload(const std::shared_ptr<Stream>& stream) {
  CUWEAVE_EXPECTS(stream->device() == device(), "the graph is for device " + std::to_string(device()) +
                                                    " but the stream is on device " + std::to_string(stream->device()));
  on_device_of(*stream, [&] {
    refresh();
    follow(stream);
    backend().graphs().upload_graph(exec_->handle, stream->handle());
  });
}

void Graph::set_captured_accesses(std::vector<sanitizer::Access> accesses) {
  template_->footprint.captured = std::move(accesses);
  template_->footprint.known = true;
  ++template_->footprint.changes;
}

const std::vector<sanitizer::Access>& Graph::checked_accesses() const {
  static const std::vector<sanitizer::Access> none;
  if (!template_->footprint.known) return none;
  if (footprint_template_ != template_.get() || footprint_changes_ != template_->footprint.changes) {
    footprint_accesses_ = template_->footprint.all();
    footprint_template_ = template_.get();
    footprint_changes_ = template_->footprint.changes;
  }
  return footprint_accesses_;
}

void Graph::sanitize_replay(Stream& stream, const char* name) const {
  const GraphFootprint& footprint = template_->footprint;
  for (EventHandle event : footprint.waited_events) sanitizer::stream_waited_event(stream, event);
  sanitizer::operation(stream, name, checked_accesses());
  for (EventHandle event : footprint.recorded_events) sanitizer::event_recorded(event, stream);
}

std::vector<sanitizer::Access> Graph::touches() const {
  if (!template_->footprint.known) return {sanitizer::everything()};
  return checked_accesses();
}

void Graph::launch(const std::shared_ptr<Stream>& stream) {
  if (body_) refuse_body_replay();
  if (stream->device() != device()) {
    throw InvalidArgument("the graph is for device " + std::to_string(device()) + " but the stream is on device " +
                          std::to_string(stream->device()));
  }
  const bool collectives = !template_->collectives.empty();
  if (collectives) refuse_failed_collectives();
  if (Capture::any_active()) {
    if (std::shared_ptr<Capture> capture = Capture::of(*stream)) {
      // Replayed inside a capture: the graph becomes a child node of the capture (nothing is instantiated).
      if (!template_->ledgers.empty()) {
        capture->refuse_in_body(*stream, "cudaGraphAddChildGraphNode", "a graph with host callbacks");
      }
      if (collectives) capture->refuse_in_body(*stream, "cudaGraphAddChildGraphNode", "a graph with collectives");
      if (template_->memory_made) refuse_copy_of_graph_memory("cudaGraphLaunch");
      if (sanitizer::enabled()) sanitize_replay(*stream, "graph");
      on_device_of(*stream, [&] { backend().capture().capture_graph(stream->handle(), template_->handle); });
      capture->embed(*this);
      return;
    }
  }
  if (sanitizer::enabled()) sanitize_replay(*stream, "graph replay");
  on_device_of(*stream, [&] {
    if (!exec_ || exec_version_ != template_->version) refresh();
    if (last_stream_ != stream) follow(stream);
    if (exec_->ledgers.empty()) {
      backend().graphs().launch_graph(exec_->handle, stream->handle());
      if (template_->memory_made) template_->memory_made->store(true, std::memory_order_release);
      if (collectives) watch_collectives(stream);
      return;
    }
    // Credited before the launch: a host node may run before launch_graph returns.
    HostCallbacks& callbacks = services().host_callbacks();
    callbacks.replayed(exec_->ledgers, stream);
    try {
      backend().graphs().launch_graph(exec_->handle, stream->handle());
    } catch (...) {
      callbacks.replay_failed(exec_->ledgers, stream);
      throw;
    }
    if (template_->memory_made) template_->memory_made->store(true, std::memory_order_release);
    if (collectives) watch_collectives(stream);
  });
}

}  // namespace cuweave
