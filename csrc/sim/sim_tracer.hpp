// The simulator's Tracer: operations carry their activity from issue to run, and the scheduler stamps
// them with the host clock as they run (Note [Tracing] in cuweave/trace.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cuweave/tracer.hpp"
#include "cuweave/trace.hpp"

namespace cuweave::sim {

struct SimStream;
struct Node;

// An operation's activity: filled in when issued, stamped when it runs, then delivered.
struct OperationTrace {
  trace::Origin origin;
  trace::Activity activity;
};

class FaultPlan;
class Handles;
class MemoryRegistry;

class SimTracer final : public Tracer {
 public:
  SimTracer(Handles& handles, FaultPlan& faults) : handles_(handles), faults_(faults) {}

  // Refused only by an injected fault (Note [Injected faults]), as CUPTI refuses beside another CUDA tool.
  void start() override;
  void stop() noexcept override {}
  // Activities are delivered as operations run: nothing waits in a buffer.
  void flush() override {}
  std::uint64_t now_ns() override { return clock_ns(); }
  std::uint64_t stream_id(StreamHandle stream, int device) override;
  // No other library launches kernels on the simulator: there is nothing to report.
  void watch_launches(std::shared_ptr<ForeignLaunches>) override {}
  void place_foreign_work(bool) noexcept override {}

  static std::uint64_t clock_ns() noexcept;

 private:
  Handles& handles_;  // what a stream handle means
  FaultPlan& faults_;
};

// The activity of an operation issued now on `stream`, or null when no trace takes it.
std::shared_ptr<OperationTrace> traced(trace::Kind kind, const SimStream& stream, std::string name = {},
                                       std::size_t bytes = 0, trace::Direction direction = trace::Direction::None);
// The direction of a copy between these addresses (simulated device memory or host memory).
trace::Direction copy_direction(MemoryRegistry& memory, const void* destination, const void* source);
// A fresh id linking an event recording to the waits for it.
std::uint64_t next_link() noexcept;
// Delivers the activity of one node of a traced graph replay that ran from `start_ns` to now.
void deliver_node(const OperationTrace& replay, const Node& node, std::uint64_t start_ns);

}  // namespace cuweave::sim
