#include "sim/sim_tracer.hpp"

#include <atomic>
#include <chrono>
#include <variant>

#include "sim/fault_plan.hpp"
#include "sim/handles.hpp"
#include "sim/memory_registry.hpp"
#include "sim/scheduler.hpp"
#include "sim/sim_graph.hpp"

namespace cuweave::sim {

void SimTracer::start() {
  if (faults_.strikes(FaultKind::ToolAttach, "cuptiSubscribe")) {
    FaultPlan::fail(FaultKind::ToolAttach, "cuptiSubscribe");
  }
}

namespace {
std::atomic<std::uint64_t> correlations{0};
std::atomic<std::uint64_t> links{0};

int device_of(MemoryRegistry& memory, const void* pointer) {
  auto range = memory.find(pointer);
  return range && range->kind == MemoryKind::Device ? range->device : -1;
}
}  // namespace

std::uint64_t SimTracer::clock_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

std::uint64_t SimTracer::stream_id(StreamHandle stream, int device) {
  // An error here could be passed over by its caller, so the simulator stops the process, as the GPU run did.
  handles_.crash_unless_live_stream(stream, "cuptiGetStreamIdEx", "A trace must not name a stream after it is destroyed.");
  return handles_.stream_on(stream, device, "cuptiGetStreamIdEx")->id;
}

std::uint64_t next_link() noexcept { return links.fetch_add(1, std::memory_order_relaxed) + 1; }

trace::Direction copy_direction(MemoryRegistry& memory, const void* destination, const void* source) {
  const int to = device_of(memory, destination);
  const int from = device_of(memory, source);
  if (to >= 0 && from >= 0) return to == from ? trace::Direction::DeviceToDevice : trace::Direction::PeerToPeer;
  if (to >= 0) return trace::Direction::HostToDevice;
  if (from >= 0) return trace::Direction::DeviceToHost;
  return trace::Direction::HostToHost;
}

std::shared_ptr<OperationTrace> traced(trace::Kind kind, const SimStream& stream, std::string name, std::size_t bytes,
                                       trace::Direction direction) {
  if (!trace::active()) return nullptr;
  trace::Origin origin = trace::current_origin();
  if (!origin) return nullptr;
  auto operation = std::make_shared<OperationTrace>();
  operation->origin = std::move(origin);
  trace::Activity& activity = operation->activity;
  activity.kind = kind;
  activity.name = std::move(name);
  activity.bytes = bytes;
  activity.direction = direction;
  activity.device = stream.device;
  activity.stream = stream.id;
  activity.correlation = correlations.fetch_add(1, std::memory_order_relaxed) + 1;
  return operation;
}

void deliver_node(const OperationTrace& replay, const Node& node, std::uint64_t start_ns) {
  trace::Activity activity = replay.activity;
  activity.graph_node = true;
  activity.start_ns = start_ns;
  activity.end_ns = SimTracer::clock_ns();
  activity.name = label(node);
  activity.bytes = 0;
  activity.direction = trace::Direction::None;
  if (const auto* copy = std::get_if<CopyNode>(&node.params)) {
    activity.kind = trace::Kind::Copy;
    activity.bytes = copy->bytes;
    activity.direction = copy->direction;
  } else if (const auto* memset = std::get_if<MemsetNode>(&node.params)) {
    activity.kind = trace::Kind::Memset;
    activity.bytes = memset->bytes;
  } else {
    activity.kind = trace::Kind::Kernel;
  }
  trace::deliver(replay.origin, std::move(activity));
}

}  // namespace cuweave::sim
