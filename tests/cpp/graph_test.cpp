// Graph built node by node: replays run nodes in dependency order and write their bytes, edits reach the
// executable at the next replay, and the footprint is what its nodes touch (Note [Graph footprints]).
#include "cuweave/graph.hpp"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "cuweave/backend.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "gate.hpp"

namespace cuweave {
namespace {

using testing::independent_stream;

std::shared_ptr<DeviceArray> bytes_on(std::int64_t count, const std::shared_ptr<Stream>& stream) {
  return DeviceArray::allocate({count}, DType::from_typestr("|u1"), stream);
}

// The simulator's device memory is host memory: once the stream has synchronized, a test reads it directly.
std::vector<unsigned char> read(const DeviceArray& array) {
  const auto* first = static_cast<const unsigned char*>(array.data());
  return std::vector<unsigned char>(first, first + array.nbytes());
}

class GraphTest : public ::testing::Test {
 protected:
  void TearDown() override { backend().devices().synchronize_device(0); }
  // 64 bytes, each `value` once the allocation is done (written by the host: simulator memory).
  std::shared_ptr<DeviceArray> filled(unsigned char value) {
    auto array = bytes_on(64, stream);
    stream->synchronize();
    std::memset(array->data(), value, 64);
    return array;
  }
  // `array`'s bytes after a replay of `graph`.
  std::vector<unsigned char> replayed(Graph& graph, const DeviceArray& array) {
    graph.launch(stream);
    stream->synchronize();
    return read(array);
  }
  std::shared_ptr<Stream> stream = independent_stream();
};

TEST_F(GraphTest, HostNodesRunInDependencyOrderAtEveryReplay) {
  auto graph = Graph::create(0);
  std::mutex mutex;
  std::vector<int> ran;
  auto note = [&](int which) {
    return [&, which] {
      std::lock_guard<std::mutex> lock(mutex);
      ran.push_back(which);
    };
  };
  GraphNodeHandle first = graph->add_host({}, note(1), "first");
  GraphNodeHandle second = graph->add_host({first}, note(2), "second");
  graph->add_host({second}, note(3), "third");
  for (int replay = 0; replay < 3; ++replay) graph->launch(stream);
  stream->synchronize();
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3, 1, 2, 3, 1, 2, 3}));
  EXPECT_TRUE(graph->instantiated());
}

TEST_F(GraphTest, MemsetAndCopyNodesWriteTheirBytes) {
  auto source = bytes_on(256, stream);
  auto destination = bytes_on(256, stream);
  stream->synchronize();
  auto graph = Graph::create(0);
  GraphNodeHandle set = graph->add_memset({}, source->data(), 7, 256, {source->memory_hold()});
  graph->add_copy({set}, destination->data(), source->data(), 256, {source->memory_hold(), destination->memory_hold()});
  graph->launch(stream);
  stream->synchronize();
  EXPECT_EQ(read(*destination), std::vector<unsigned char>(256, 7));
}

TEST_F(GraphTest, AnEditReachesTheExecutableAtTheNextReplay) {
  auto source = filled(1);
  auto other = filled(2);
  auto destination = filled(0);
  auto graph = Graph::create(0);
  GraphNodeHandle copy = graph->add_copy({}, destination->data(), source->data(), 64, {});
  EXPECT_EQ(replayed(*graph, *destination), std::vector<unsigned char>(64, 1));
  EXPECT_EQ(graph->last_refresh(), Graph::Refresh::Instantiated);
  graph->set_copy(copy, destination->data(), other->data(), 64, {});
  EXPECT_EQ(replayed(*graph, *destination), std::vector<unsigned char>(64, 2));
  EXPECT_NE(graph->last_refresh(), Graph::Refresh::None);  // updated or instantiated again, never stale
}

TEST_F(GraphTest, RepointingsAfterAReplayReachTheExecutableAndAnotherChangeStillDoes) {
  auto source = filled(1);
  auto other = filled(2);
  auto third = filled(3);
  auto destination = filled(0);
  auto graph = Graph::create(0);
  GraphNodeHandle copy = graph->add_copy({}, destination->data(), source->data(), 64, {});
  graph->launch(stream);
  // Repointed at every replay, between two sources (Note [Repointing node by node]).
  for (int round = 0; round < 4; ++round) {
    const bool to_other = round % 2 == 0;
    EXPECT_EQ(graph->replace_pointers({{to_other ? source->data() : other->data(),
                                        to_other ? other->data() : source->data(), 64}},
                                      {}, {}),
              1u);
    EXPECT_EQ(replayed(*graph, *destination), std::vector<unsigned char>(64, to_other ? 2 : 1));
    EXPECT_EQ(graph->last_refresh(), Graph::Refresh::Updated);
  }
  // A repointing, then another kind of change: both reach the executable.
  graph->replace_pointers({{source->data(), other->data(), 64}}, {}, {});
  graph->set_copy(copy, destination->data(), third->data(), 64, {});
  EXPECT_EQ(replayed(*graph, *destination), std::vector<unsigned char>(64, 3));
}

TEST_F(GraphTest, AfterAdoptingOtherNodesAnExecutableTakesWholeUpdatesEvenFromItsOwnGraph) {
  auto source = filled(1);
  auto other = filled(2);
  auto third = filled(3);
  auto fourth = filled(4);
  auto first = filled(0);
  auto second = filled(0);
  // `graph` reads `source` then `fourth`; `elsewhere`, the same shape, reads `other` twice.
  auto graph = Graph::create(0);
  graph->add_copy({graph->add_copy({}, first->data(), source->data(), 64, {})}, second->data(), fourth->data(), 64,
                  {});
  graph->launch(stream);
  auto sharing = Graph::create(0);
  sharing->adopt_template_of(*graph);  // `graph`'s nodes, which the executable was instantiated from
  auto elsewhere = Graph::create(0);
  elsewhere->add_copy({elsewhere->add_copy({}, first->data(), other->data(), 64, {})}, second->data(), other->data(),
                      64, {});
  graph->adopt_template_of(*elsewhere);
  EXPECT_EQ(replayed(*graph, *second), std::vector<unsigned char>(64, 2));
  // Back to its own nodes after one of them was repointed: both nodes must come back, not the repointed one alone.
  sharing->replace_pointers({{source->data(), third->data(), 64}}, {}, {});
  graph->adopt_template_of(*sharing);
  EXPECT_EQ(replayed(*graph, *first), std::vector<unsigned char>(64, 3));
  EXPECT_EQ(read(*second), std::vector<unsigned char>(64, 4));
}

TEST_F(GraphTest, AnExecutableTakesNodeUpdatesOnlyFromItsOwnGraphAndOnlyForThoseNodes) {
  auto source = filled(1);
  auto other = filled(2);
  auto first = filled(0);
  auto second = filled(0);
  GraphBackend& graphs = backend().graphs();
  GraphHandle graph = graphs.create_graph();
  GraphNodeHandle to_first = graphs.add_copy_node(graph, {}, first->data(), source->data(), 64);
  GraphNodeHandle to_second = graphs.add_copy_node(graph, {to_first}, second->data(), source->data(), 64);
  GraphExecHandle exec = graphs.instantiate_graph(graph, false, false);
  // Both nodes change in the graph; the executable is told of the first only, as CUDA's node calls do.
  const Repointed repointed = graphs.replace_pointers(graph, {{source->data(), other->data(), 64}});
  EXPECT_EQ(repointed.pointers, 2u);
  EXPECT_EQ(repointed.nodes, (std::vector<GraphNodeHandle>{to_first, to_second}));
  EXPECT_TRUE(graphs.update_graph_exec_nodes(exec, graph, {to_first}));
  graphs.launch_graph(exec, stream->handle());
  stream->synchronize();
  EXPECT_EQ(read(*first), std::vector<unsigned char>(64, 2));
  EXPECT_EQ(read(*second), std::vector<unsigned char>(64, 1));
  // A node of another graph is refused (CUDA: cudaErrorInvalidValue).
  GraphHandle another = graphs.create_graph();
  GraphNodeHandle foreign = graphs.add_copy_node(another, {}, first->data(), other->data(), 64);
  EXPECT_THROW(graphs.update_graph_exec_nodes(exec, another, {foreign}), BackendError);
  EXPECT_THROW(graphs.update_graph_exec_nodes(exec, graph, {foreign}), BackendError);
  graphs.destroy_graph_exec(exec);
  graphs.destroy_graph(another);
  graphs.destroy_graph(graph);
}

TEST_F(GraphTest, AHandBuiltGraphTouchesWhatItsNodesTouch) {
  auto source = bytes_on(128, stream);
  auto destination = bytes_on(128, stream);
  auto graph = Graph::create(0);
  graph->add_copy({}, destination->data(), source->data(), 128, {});
  const auto begin_of = [](const DeviceArray& array) { return reinterpret_cast<std::uintptr_t>(array.data()); };
  bool reads_source = false, writes_destination = false;
  for (const sanitizer::Access& access : graph->touches()) {
    reads_source |= access.begin == begin_of(*source) && access.end == begin_of(*source) + 128 &&
                    access.kind == sanitizer::AccessKind::Read;
    writes_destination |= access.begin == begin_of(*destination) && access.end == begin_of(*destination) + 128 &&
                          access.kind == sanitizer::AccessKind::Write;
  }
  EXPECT_TRUE(reads_source);
  EXPECT_TRUE(writes_destination);
  graph->add_host({}, [] {}, "anything");  // a host function may touch anything
  const auto touched = graph->touches();
  ASSERT_EQ(touched.size(), 1u);
  EXPECT_EQ(touched[0].begin, sanitizer::everything().begin);
  EXPECT_EQ(touched[0].end, sanitizer::everything().end);
}

TEST_F(GraphTest, AReplayOnAnotherDevicesStreamIsRefused) {
  auto graph = Graph::create(1);  // the core tests simulate two devices
  graph->add_empty({});
  EXPECT_THROW(graph->launch(stream), InvalidArgument);
}

}  // namespace
}  // namespace cuweave
