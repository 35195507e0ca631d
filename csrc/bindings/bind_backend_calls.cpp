// cuweave._core.backend_calls: the active backend's calls as CUDA makes them, with raw pointers and none of
// cuweave's checks or scopes (no StreamDeviceScope: the thread's current device is whatever the caller made
// it). For the tests of CUDA's device rules (tests/python/test_device_rules.py), which must be provoked the same
// way on the GPU and on the simulator (Note [Simulated device access]), and for streams made as another library
// makes them. Not for programs: misuse faults.
#include <string>
#include <tuple>
#include <vector>

#include "bindings/gil.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/python_callbacks.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/event.hpp"
#include "cuweave/graph.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

namespace {
void* pointer(std::uintptr_t address) { return reinterpret_cast<void*>(address); }
std::uintptr_t address(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer); }
}  // namespace

void bind_backend_calls(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "backend_calls", "The backend's calls with raw pointers and no checks, for tests of CUDA's device rules.");
  m.def(
      "allocate",
      [](std::size_t bytes, int device, const Stream& stream) {
        ReleaseGil release;
        return address(backend().memory().allocate_device(bytes, device, stream.handle()));
      },
      py::arg("bytes"), py::arg("device"), py::arg("stream"), "cudaMallocFromPoolAsync from cuweave's pool of `device`.");
  m.def(
      "free",
      [](std::uintptr_t data, const Stream& stream) {
        ReleaseGil release;
        backend().memory().free_device(pointer(data), stream.handle());
      },
      py::arg("pointer"), py::arg("stream"), "cudaFreeAsync.");
  m.def(
      "allocate_unpooled",
      [](std::size_t bytes, int device) {
        ReleaseGil release;
        return address(backend().memory().allocate_unpooled(bytes, device));
      },
      py::arg("bytes"), py::arg("device"), "cudaMalloc on `device`.");
  m.def(
      "free_unpooled",
      [](std::uintptr_t data) {
        ReleaseGil release;
        backend().memory().free_unpooled(pointer(data));
      },
      py::arg("pointer"), "cudaFree.");
  m.def(
      "copy",
      [](std::uintptr_t destination, std::uintptr_t source, std::size_t bytes, const Stream& stream) {
        ReleaseGil release;
        backend().memory().copy_async(pointer(destination), pointer(source), bytes, stream.handle());
      },
      py::arg("destination"), py::arg("source"), py::arg("bytes"), py::arg("stream"),
      "cudaMemcpyAsync(cudaMemcpyDefault).");
  m.def(
      "copy_batch",
      [](const std::vector<std::tuple<std::uintptr_t, std::uintptr_t, std::size_t>>& copies, const Stream& stream) {
        std::vector<BatchedCopy> batch;
        for (const auto& [destination, source, bytes] : copies) {
          batch.push_back(BatchedCopy{pointer(destination), pointer(source), bytes,
                                      !backend().memory().is_pinned(pointer(source)) &&
                                          backend().memory().pointer_device(pointer(source)) < 0});
        }
        ReleaseGil release;
        backend().memory().copy_batch(batch, stream.handle());
      },
      py::arg("copies"), py::arg("stream"), "cudaMemcpyBatchAsync of (destination, source, bytes) triples.");
  m.def(
      "copy_between_devices",
      [](std::uintptr_t destination, int destination_device, std::uintptr_t source, int source_device,
         std::size_t bytes, const Stream& stream) {
        ReleaseGil release;
        backend().memory().copy_between_devices(pointer(destination), destination_device, pointer(source),
                                                source_device, bytes, stream.handle());
      },
      py::arg("destination"), py::arg("destination_device"), py::arg("source"), py::arg("source_device"),
      py::arg("bytes"), py::arg("stream"), "cudaMemcpyAsync where the devices reach each other, else cudaMemcpyPeerAsync.");
  m.def(
      "fill_bytes",
      [](std::uintptr_t destination, std::size_t bytes, std::uint8_t value, const Stream& stream) {
        ReleaseGil release;
        backend().kernels().fill(pointer(destination), bytes, &value, 1, stream.handle());
      },
      py::arg("destination"), py::arg("bytes"), py::arg("value"), py::arg("stream"),
      "The built-in fill kernel: a kernel launch writing `bytes` bytes at `destination`.");
  m.def(
      "record",
      [](const Event& event, const Stream& stream) {
        ReleaseGil release;
        backend().streams().record_event(event.handle(), stream.handle());
      },
      py::arg("event"), py::arg("stream"), "cudaEventRecord.");
  m.def(
      "wait",
      [](const Stream& stream, const Event& event) {
        ReleaseGil release;
        backend().streams().stream_wait_event(stream.handle(), event.handle());
      },
      py::arg("stream"), py::arg("event"), "cudaStreamWaitEvent.");
  m.def(
      "synchronize",
      [](const Stream& stream) {
        ReleaseGil release;
        backend().streams().synchronize_stream(stream.handle());
      },
      py::arg("stream"), "cudaStreamSynchronize.");
  m.def(
      "create_stream",
      [](int device) {
        ReleaseGil release;
        return address(backend().streams().create_stream(device, 0, false));
      },
      py::arg("device"), "cudaStreamCreateWithPriority (non-blocking): a stream cuweave does not know, as a peer's.");
  m.def(
      "destroy_stream",
      [](std::uintptr_t handle) {
        ReleaseGil release;
        backend().streams().destroy_stream(static_cast<StreamHandle>(pointer(handle)));
      },
      py::arg("handle"), "cudaStreamDestroy.");
  m.def(
      "stream_info",
      [](const Stream& stream) {
        const StreamInfo info = backend().streams().stream_info(stream.handle());
        return py::make_tuple(info.device, info.priority, info.blocking);
      },
      py::arg("stream"), "cudaStreamGetDevice, cudaStreamGetPriority, cudaStreamGetFlags: (device, priority, blocking).");
  m.def(
      "begin_capture",
      [](std::uintptr_t handle) {
        ReleaseGil release;
        backend().capture().begin_capture(static_cast<StreamHandle>(pointer(handle)), CaptureMode::Relaxed);
      },
      py::arg("handle"), "cudaStreamBeginCapture (relaxed), as CuPy's Stream.begin_capture() makes it.");
  m.def(
      "end_capture",
      [](std::uintptr_t handle) {
        ReleaseGil release;
        backend().graphs().destroy_graph(backend().capture().end_capture(static_cast<StreamHandle>(pointer(handle))));
      },
      py::arg("handle"), "cudaStreamEndCapture, then cudaGraphDestroy: raises as ending the capture does.");
  m.def(
      "allocate_in_capture",
      [](std::size_t bytes, int device, const Stream& stream) {
        ReleaseGil release;
        return address(backend().memory().allocate_in_capture(bytes, device, stream.handle()));
      },
      py::arg("bytes"), py::arg("device"), py::arg("stream"),
      "cudaMallocFromPoolAsync on a capturing stream: an allocation node.");
  m.def(
      "end_capture_keeping",
      [](std::uintptr_t handle) {
        ReleaseGil release;
        return address(backend().capture().end_capture(static_cast<StreamHandle>(pointer(handle))));
      },
      py::arg("handle"), "cudaStreamEndCapture: the graph's handle (destroy it with destroy_graph).");
  m.def(
      "create_graph", [] { return address(backend().graphs().create_graph()); }, "cudaGraphCreate.");
  m.def(
      "destroy_graph", [](std::uintptr_t graph) { backend().graphs().destroy_graph(pointer(graph)); },
      py::arg("graph"), "cudaGraphDestroy.");
  m.def(
      "add_child_graph",
      [](std::uintptr_t graph, std::uintptr_t child) {
        return address(backend().graphs().add_child_graph_node(pointer(graph), {}, pointer(child)));
      },
      py::arg("graph"), py::arg("child"), "cudaGraphAddChildGraphNode (a copy of `child`), after no node.");
  m.def(
      "instantiate",
      [](std::uintptr_t graph, bool free_on_launch) {
        return address(backend().graphs().instantiate_graph(pointer(graph), false, free_on_launch));
      },
      py::arg("graph"), py::arg("free_on_launch") = false,
      "cudaGraphInstantiate (with cudaGraphInstantiateFlagAutoFreeOnLaunch where `free_on_launch`).");
  m.def(
      "destroy_exec", [](std::uintptr_t exec) { backend().graphs().destroy_graph_exec(pointer(exec)); },
      py::arg("exec"), "cudaGraphExecDestroy.");
  m.def(
      "launch",
      [](std::uintptr_t exec, const Stream& stream) {
        ReleaseGil release;
        backend().graphs().launch_graph(pointer(exec), stream.handle());
      },
      py::arg("exec"), py::arg("stream"), "cudaGraphLaunch.");
  m.def(
      "node_kinds",
      [](std::uintptr_t graph) {
        std::vector<std::string> kinds;
        for (const GraphNodeInfo& node : backend().graphs().graph_nodes(pointer(graph))) {
          kinds.push_back(to_string(node.kind));
        }
        return kinds;
      },
      py::arg("graph"), "The kinds of the graph's nodes, dependencies first.");
  m.def(
      "enable_peer_access",
      [](int device, int peer) {
        ReleaseGil release;
        return backend().memory().enable_peer_access(device, peer);
      },
      py::arg("device"), py::arg("peer"),
      "Peer access between the two devices both ways, with each one's pool granted to the other; whether it could.");
}

}  // namespace cuweave::bindings
