// Simulated work that runs after memory it touches was freed (a graph replayed after its memory was freed; a kernel,
// memset or copy whose memory a free on another stream ended first) faults as a GPU does where the pages were given
// back: cudaErrorIllegalAddress at the next synchronization, the device's context lost, no byte moved (Note [Work on
// freed memory]). Each test makes a simulator of its own: a lost context stays lost.
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

class SimFreedMemoryTest : public ::testing::Test {
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

TEST_F(SimFreedMemoryTest, AReplayedMemsetOfFreedMemoryFaultsAndTheLaunchRunsNoFurtherNode) {
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

TEST_F(SimFreedMemoryTest, AReplayedArithmeticKernelReadingFreedMemoryFaults) {
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

TEST_F(SimFreedMemoryTest, AReplayedCopyFaultsOnItsFreedDeviceSideNotOnItsPageableHostSide) {
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

TEST_F(SimFreedMemoryTest, AReplayedFillOfMemoryFreedAndReusedOnTheStreamReplaysAsOnAGpu) {
  // A block freed on a stream is handed to the next allocation of its size there (Note [Reuse in a stream's
  // order]): the memory exists, so the replay writes it, as CUDA's pool would let it.
  void* first = device_bytes();
  const float one = 1.0f;
  const GraphExecHandle exec = captured([&] {
    backend().kernels().fill(first, kBytes / sizeof(float), &one, sizeof(one), stream);
  });
  // Only before the free has run: the stream is held until the allocation has taken the block.
  const HostFlagHandle held = backend().streams().create_host_flag();
  backend().streams().stream_wait_host_flag(stream, held);
  backend().memory().free_device(first, stream);
  void* second = backend().memory().allocate_device(kBytes, 0, stream);
  backend().graphs().launch_graph(exec, stream);
  backend().streams().raise_host_flag(held);
  EXPECT_EQ(synchronize_error(), "");
  backend().streams().destroy_host_flag(held);
  ASSERT_EQ(second, first);
  float value = 0;
  std::memcpy(&value, second, sizeof(value));
  EXPECT_EQ(value, 1.0f);
  backend().memory().free_device(second, stream);
}

// Work held behind a host flag on the stream while another stream frees its memory: when it runs, the memory is gone.
class SimFreedBeforeRunTest : public SimFreedMemoryTest {
 protected:
  // The stream's later work waits until free_elsewhere_then_release.
  void hold() { backend().streams().stream_wait_host_flag(stream, flag); }
  // Frees `pointer` on another stream, unordered with the held one, and lets the held stream run.
  void free_elsewhere_then_release(void* pointer) {
    backend().memory().free_device(pointer, other);
    backend().streams().synchronize_stream(other);  // the free has run
    backend().streams().raise_host_flag(flag);
  }
  void TearDown() override {
    backend().streams().destroy_stream(other);
    backend().streams().destroy_host_flag(flag);
    SimFreedMemoryTest::TearDown();
  }
  HostFlagHandle flag = simulator->backend().streams().create_host_flag();
  StreamHandle other = simulator->backend().streams().create_stream(0, 0, false);
};

TEST_F(SimFreedBeforeRunTest, AKernelWritingMemoryFreedBeforeItRanFaults) {
  void* freed = device_bytes();
  const float one = 1.0f;
  hold();
  backend().kernels().fill(freed, kBytes / sizeof(float), &one, sizeof(one), stream);
  free_elsewhere_then_release(freed);
  EXPECT_EQ(synchronize_error(), "cudaErrorIllegalAddress");
}

TEST_F(SimFreedBeforeRunTest, AMemsetOfMemoryFreedBeforeItRanFaults) {
  void* freed = device_bytes();
  hold();
  backend().memory().memset_async(freed, 7, kBytes, stream);
  free_elsewhere_then_release(freed);
  EXPECT_EQ(synchronize_error(), "cudaErrorIllegalAddress");
}

TEST_F(SimFreedBeforeRunTest, ACopyOutOfMemoryFreedBeforeItRanFaultsAndItsPinnedDestinationKeepsItsBytes) {
  void* freed = device_bytes();
  auto* pinned = static_cast<unsigned char*>(backend().memory().allocate_pinned(kBytes));
  std::memset(pinned, 3, kBytes);
  hold();
  backend().memory().copy_async(pinned, freed, kBytes, stream);
  free_elsewhere_then_release(freed);
  EXPECT_EQ(synchronize_error(), "cudaErrorIllegalAddress");
  EXPECT_EQ(pinned[0], 3);
  backend().memory().free_pinned(pinned);
}

TEST_F(SimFreedBeforeRunTest, WorkOnMemoryThatStillExistsRuns) {
  auto* kept = static_cast<unsigned char*>(device_bytes());
  void* freed_elsewhere = device_bytes();  // not touched by the held work
  hold();
  backend().memory().memset_async(kept, 9, kBytes, stream);
  free_elsewhere_then_release(freed_elsewhere);
  EXPECT_EQ(synchronize_error(), "");
  EXPECT_EQ(kept[kBytes - 1], 9);
}

}  // namespace
}  // namespace cuweave::sim
