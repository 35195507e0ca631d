// A simulated graph replayed after memory its nodes touch was freed faults as a GPU does where the pages were given
// back: cudaErrorIllegalAddress at the next synchronization, the device's context lost, no further node run (Note
// [Replays of freed memory]). Each test makes a simulator of its own: a lost context stays lost.
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/arithmetic.hpp"
#include "cuweave/errors.hpp"
#include "sim/simulator.hpp"

namespace cuweave::sim {
namespace {

constexpr std::size_t kBytes = 64;

class SimGraphReplayTest : public ::testing::Test {
 protected:
  Backend& backend() { return simulator->backend(); }

  // The graph of what `work` queues on the stream, captured and instantiated.
  GraphExecHandle captured(const std::function<void()>& work) {
    backend().capture().begin_capture(stream, CaptureMode::ThreadLocal);
    work();
    const GraphHandle graph = backend().capture().end_capture(stream);
    graphs.push_back(graph);
    const GraphExecHandle exec = backend().graphs().instantiate_graph(graph, false, false);
    execs.push_back(exec);
    return exec;
  }
  void* device_bytes() {
    void* pointer = backend().memory().allocate_device(kBytes, 0, stream);
    synchronize();
    std::memset(pointer, 0, kBytes);  // simulator memory is host memory
    return pointer;
  }
  void free_now(void* pointer) {
    backend().memory().free_device(pointer, stream);
    synchronize();  // the free has run: the memory is gone
  }
  void synchronize() { backend().streams().synchronize_stream(stream); }
  // The name of the error the next synchronization raises ("" for none).
  std::string synchronize_error() {
    try {
      synchronize();
      return "";
    } catch (const ContextLost& error) {
      return error.name();
    }
  }

  void TearDown() override {
    for (GraphExecHandle exec : execs) backend().graphs().destroy_graph_exec(exec);
    for (GraphHandle graph : graphs) backend().graphs().destroy_graph(graph);
    backend().streams().destroy_stream(stream);
  }

  std::unique_ptr<Simulator> simulator = std::make_unique<Simulator>();
  StreamHandle stream = simulator->backend().streams().create_stream(0, 0, false);
  std::vector<GraphHandle> graphs;
  std::vector<GraphExecHandle> execs;
};

TEST_F(SimGraphReplayTest, AMemsetOfFreedMemoryFaultsAndTheLaunchRunsNoFurtherNode) {
  void* freed = device_bytes();
  auto* kept = static_cast<unsigned char*>(device_bytes());
  const GraphExecHandle exec = captured([&] {
    backend().memory().memset_async(freed, 7, kBytes, stream);
    backend().memory().memset_async(kept, 9, kBytes, stream);  // after the first: one stream
  });
  backend().graphs().launch_graph(exec, stream);
  EXPECT_EQ(synchronize_error(), "");
  EXPECT_EQ(kept[0], 9);
  std::memset(kept, 0, kBytes);
  free_now(freed);
  backend().graphs().launch_graph(exec, stream);
  EXPECT_EQ(synchronize_error(), "cudaErrorIllegalAddress");
  EXPECT_EQ(kept[0], 0) << "a node after the faulting one ran";
  EXPECT_EQ(synchronize_error(), "cudaErrorIllegalAddress");  // the context stays lost
}

TEST_F(SimGraphReplayTest, AnArithmeticKernelReadingFreedMemoryFaults) {
  void* freed = device_bytes();
  void* out = device_bytes();
  Arithmetic add;
  add.op = ArithmeticOp::Add;
  add.type = NumericType::Float32;
  add.out = out;
  add.x = out;
  add.y = freed;
  add.count = kBytes / sizeof(float);
  const GraphExecHandle exec = captured([&] { backend().kernels().arithmetic(add, stream); });
  free_now(freed);
  backend().graphs().launch_graph(exec, stream);
  EXPECT_EQ(synchronize_error(), "cudaErrorIllegalAddress");
}

TEST_F(SimGraphReplayTest, ACopyFaultsOnItsFreedDeviceSideNotOnItsPageableHostSide) {
  std::vector<unsigned char> pageable(kBytes, 5);
  auto* live = static_cast<unsigned char*>(device_bytes());
  void* freed = device_bytes();
  const GraphExecHandle into_live = captured([&] {
    backend().memory().copy_async(live, pageable.data(), kBytes, stream);
  });
  const GraphExecHandle into_freed = captured([&] {
    backend().memory().copy_async(freed, pageable.data(), kBytes, stream);
  });
  free_now(freed);
  backend().graphs().launch_graph(into_live, stream);
  EXPECT_EQ(synchronize_error(), "");
  EXPECT_EQ(live[kBytes - 1], 5);
  backend().graphs().launch_graph(into_freed, stream);
  EXPECT_EQ(synchronize_error(), "cudaErrorIllegalAddress");
}

TEST_F(SimGraphReplayTest, AFillOfMemoryFreedAndReusedOnTheStreamReplaysAsOnAGpu) {
  // A block freed on a stream is handed to the next allocation of its size there (Note [Reuse in a stream's
  // order]): the memory exists, so the replay writes it, as CUDA's pool would let it.
  void* first = device_bytes();
  const float one = 1.0f;
  const GraphExecHandle exec = captured([&] {
    backend().kernels().fill(first, kBytes / sizeof(float), &one, sizeof(one), stream);
  });
  backend().memory().free_device(first, stream);
  void* second = backend().memory().allocate_device(kBytes, 0, stream);
  ASSERT_EQ(second, first);
  backend().graphs().launch_graph(exec, stream);
  EXPECT_EQ(synchronize_error(), "");
  float value = 0;
  std::memcpy(&value, second, sizeof(value));
  EXPECT_EQ(value, 1.0f);
  backend().memory().free_device(second, stream);
}

}  // namespace
}  // namespace cuweave::sim
