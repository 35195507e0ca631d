// Stream capture and graphs: cuweave.capture's core, Graph (explicit construction, introspection,
// update, replay) and GraphNode. DOT export and Jupyter rendering live in cuweave/_graph_view.py.
#include <unordered_map>

#include "bindings/arrays.hpp"
#include "bindings/conditions.hpp"
#include "bindings/devices.hpp"
#include "bindings/dtypes.hpp"
#include "bindings/gil.hpp"
#include "bindings/kernel_arguments.hpp"
#include "bindings/misfit.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/python_callbacks.hpp"
#include "bindings/streams.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/event.hpp"
#include "cuweave/graph.hpp"
#include "cuweave/host_callbacks.hpp"
#include "cuweave/kernel.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

namespace {

// A function of cuweave/_graph_view.py, where a Graph's drawings and summary are made.
py::object graph_view(const char* function) { return py::module_::import("cuweave._graph_view").attr(function); }

// A node of one version of a graph's template. Nodes stay valid while the graph keeps that template
// (Graph.update() gives it another one).
struct GraphNode {
  std::shared_ptr<GraphTemplate> owner;
  GraphNodeHandle handle = nullptr;
  GraphNodeKind kind = GraphNodeKind::Other;
  std::string label;
  std::shared_ptr<Kernel> kernel;  // kernel nodes added by add_kernel: their parameter sizes
  std::vector<std::shared_ptr<GraphNode>> dependencies;
};

CaptureMode capture_mode_from(const std::string& mode) {
  if (mode == "global") return CaptureMode::Global;
  if (mode == "thread_local") return CaptureMode::ThreadLocal;
  if (mode == "relaxed") return CaptureMode::Relaxed;
  throw InvalidArgument("capture mode must be \"global\", \"thread_local\" or \"relaxed\", not \"" + mode + "\"");
}

std::vector<GraphNodeHandle> dependencies_from(const Graph& graph, py::handle after) {
  std::vector<GraphNodeHandle> handles;
  if (after.is_none()) return handles;
  auto check = [&](py::handle item) {
    if (!py::isinstance<GraphNode>(item)) {
      throw WrongType(std::string("`after` takes GraphNode objects (returned by the add_* methods), not ") +
                      Py_TYPE(item.ptr())->tp_name);
    }
    const GraphNode& node = item.cast<const GraphNode&>();
    if (node.owner != graph.graph_template()) {
      throw InvalidArgument("a node in `after` belongs to another graph (or to this graph before update())");
    }
    handles.push_back(node.handle);
  };
  if (py::isinstance<GraphNode>(after)) {
    check(after);
  } else {
    for (py::handle item : py::iter(after)) check(item);
  }
  return handles;
}

std::shared_ptr<GraphNode> make_node(const Graph& graph, GraphNodeHandle handle, GraphNodeKind kind,
                                     std::string label, std::shared_ptr<Kernel> kernel = nullptr) {
  auto node = std::make_shared<GraphNode>();
  node->owner = graph.graph_template();
  node->handle = handle;
  node->kind = kind;
  node->label = std::move(label);
  node->kernel = std::move(kernel);
  return node;
}

const GraphNode& checked_node(const Graph& graph, const GraphNode& node, GraphNodeKind kind, const char* what) {
  if (node.owner != graph.graph_template()) {
    throw InvalidArgument("this node belongs to another graph (or to this graph before update()); take it from "
                          "graph.nodes again");
  }
  if (node.kind != kind) {
    throw InvalidArgument(std::string(what) + " applies to " + to_string(kind) + " nodes; this is a " +
                          to_string(node.kind) + " node");
  }
  return node;
}

// One side of a copy node: a device array or a C-contiguous NumPy array; its pointer, bytes and holds.
struct CopySide {
  void* data = nullptr;
  std::size_t bytes = 0;
  std::vector<std::int64_t> shape;
  std::string typestr;
  Holds holds;
};

CopySide copy_side(py::handle object, bool destination) {
  CopySide side;
  if (is_device_side(object)) {
    auto array = as_device_array(object);
    CUWEAVE_EXPECTS(array->contiguous(), "graph copies need contiguous device arrays");
    if (destination) CUWEAVE_EXPECTS(!array->readonly(), "the destination device array is read-only");
    side.data = array->data();
    side.bytes = array->nbytes();
    side.shape = array->shape();
    side.typestr = array->dtype().typestr;
    side.holds.push_back(array->memory_hold());
  } else {
    py::array array = host_array(object, destination);
    side.data = array.mutable_data();
    side.bytes = static_cast<std::size_t>(array.nbytes());
    side.shape = shape_of(array);
    side.typestr = typestr_of(array);
    side.holds = host_holds(array);
  }
  return side;
}

// Both sides of a copy node, checked to have one layout: destination and source pointers, bytes, and holds.
struct CopyPair {
  void* destination;
  const void* source;
  std::size_t bytes;
  Holds holds;
};

CopyPair copy_pair(py::handle destination, py::handle source) {
  CopySide dst = copy_side(destination, true);
  CopySide src = copy_side(source, false);
  check_same_layout("the source", src.shape, src.typestr, dst.shape, dst.typestr);
  Holds holds = std::move(dst.holds);
  for (Hold& hold : src.holds) holds.push_back(std::move(hold));
  return CopyPair{dst.data, src.data, dst.bytes, std::move(holds)};
}

std::vector<std::shared_ptr<GraphNode>> list_nodes(Graph& graph) {
  const std::vector<GraphNodeInfo> infos = graph.nodes();
  std::unordered_map<GraphNodeHandle, std::shared_ptr<GraphNode>> by_handle;
  std::vector<std::shared_ptr<GraphNode>> nodes;
  for (const GraphNodeInfo& info : infos) {
    auto node = make_node(graph, info.node, info.kind, info.label);
    for (GraphNodeHandle dependency : info.dependencies) {
      auto it = by_handle.find(dependency);
      if (it != by_handle.end()) node->dependencies.push_back(it->second);
    }
    by_handle[info.node] = node;
    nodes.push_back(std::move(node));
  }
  return nodes;
}

}  // namespace

namespace {
const CallShape kGraphCall{"Graph()", "Graph(device=None)"};
}  // namespace

void bind_graph(py::module_& m) {
  py::class_<GraphNode, std::shared_ptr<GraphNode>>(m, "GraphNode", "A node of a cuweave.Graph.")
      .def(py::init(made_elsewhere<GraphNode>("GraphNode", "a Graph's nodes are read from graph.nodes")))
      .def_property_readonly("kind", [](const GraphNode& n) { return to_string(n.kind); },
                             "\"kernel\", \"copy\", \"memset\", \"host\", \"event_record\", \"event_wait\", "
                             "\"empty\", \"graph\", \"allocation\", \"free\" or \"other\".")
      .def_property_readonly("label", [](const GraphNode& n) { return n.label; })
      .def_property_readonly("dependencies", [](const GraphNode& n) { return n.dependencies; },
                             "The nodes this one runs after (filled in for nodes listed by Graph.nodes).")
      .def("__repr__", [](const GraphNode& n) {
        return "<cuweave.GraphNode " + std::string(to_string(n.kind)) + " '" + n.label + "'>";
      });

  py::class_<Graph, std::shared_ptr<Graph>>(m, "Graph", py::dynamic_attr(), R"doc(
A CUDA graph: captured with ``cuweave.capture`` or built node by node. ``replay(stream)`` launches it (it
is instantiated on first use); changing it later (new arguments, repointed buffers, new nodes) is applied
at the next replay by an exec update, or a new instantiation where the topology changed.)doc")
      .def(py::init([](py::handle device) { return Graph::create(resolve_device(device)); }),
           py::arg("device") = py::none(), "An empty graph for explicit construction.")
      .def(py::init(misfit_init<Graph>(kGraphCall)))
      .def_property_readonly("device", &Graph::device)
      .def_property_readonly("nodes", &list_nodes, "Every node, dependencies before dependents.")
      // Drawn and summed up in Python (cuweave/_graph_view.py), which lays the SVG out without Graphviz.
      .def(
          "to_dot",
          [](py::object self, const std::string& name) {
            return graph_view("to_dot")(self, name).cast<std::string>();
          },
          py::arg("name") = "cuweave_graph", "The graph in Graphviz's DOT language (``dot -Tsvg`` draws it).")
      .def(
          "_repr_svg_", [](py::object self) { return graph_view("to_svg")(self).cast<std::string>(); },
          "An SVG drawing of the graph (Jupyter shows it inline): one row per depth, arrows to dependents.")
      .def_property_readonly(
          "kinds", [](py::object self) { return graph_view("kinds")(self); },
          "How many nodes of each kind the graph has, e.g. ``Counter({\"kernel\": 3, \"copy\": 2})``.")
      .def("__repr__", [](py::object self) { return graph_view("describe")(self).cast<std::string>(); })
      .def("__len__", [](Graph& g) { return g.nodes().size(); })
      .def_property_readonly("instantiated", &Graph::instantiated)
      .def_property(
          "node_priorities", &Graph::node_priorities,
          flag_setter(&Graph::set_node_priorities, "Graph.node_priorities", "node_priorities"),
          "False by default: a replay runs every kernel at the priority of the stream it goes to. True: each kernel "
          "runs at the priority of the stream it was captured on, so a graph replayed on a normal stream keeps "
          "the urgency of work captured on a high-priority one (CUDA's per-node priorities). Takes effect from "
          "the next replay, which instantiates the graph anew.")
      .def_property_readonly("last_refresh", [](const Graph& g) { return to_string(g.last_refresh()); },
                             "How the executable was last brought up to date: \"instantiated\", \"updated\" (exec "
                             "update in place) or \"reinstantiated\" (the topology changed); \"none\" before.")
      .def(
          "add_kernel",
          [](Graph& g, std::shared_ptr<Kernel> kernel, py::handle grid, py::handle block, py::handle args,
             std::size_t shared_mem, py::handle after) {
            const auto deps = dependencies_from(g, after);
            Operation operation(kernel->operation_name());
            PackedArguments packed = pack(*kernel, args, operation);
            GraphNodeHandle node = g.add_kernel(*kernel, deps, dim3_from(grid, "grid"), dim3_from(block, "block"),
                                                shared_mem, packed.pointers.data(), operation);
            return make_node(g, node, GraphNodeKind::Kernel, kernel->name(), kernel);
          },
          py::arg("kernel"), py::arg("grid"), py::arg("block"), py::arg("args"), py::kw_only(),
          py::arg("shared_mem") = 0, py::arg("after") = py::none(),
          "Adds a launch of a cuweave.compile() kernel (arguments as for Kernel.__call__), after the nodes in `after`.")
      .def(
          "add_copy",
          [](Graph& g, py::handle destination, py::handle source, py::handle after) {
            const auto deps = dependencies_from(g, after);
            CopyPair copy = copy_pair(destination, source);
            GraphNodeHandle node = g.add_copy(deps, copy.destination, copy.source, copy.bytes, std::move(copy.holds));
            return make_node(g, node, GraphNodeKind::Copy, "copy " + std::to_string(copy.bytes) + " bytes");
          },
          py::arg("destination"), py::arg("source"), py::kw_only(), py::arg("after") = py::none(),
          "Adds a copy between device arrays and/or NumPy arrays of the same shape and dtype (pinned NumPy memory "
          "copies asynchronously; the arrays are kept alive by the graph).")
      .def(
          "add_memset",
          [](Graph& g, py::handle destination, int value, py::handle after) {
            CUWEAVE_EXPECTS(value >= 0 && value <= 255, "memset writes one byte value (0..255)");
            const auto deps = dependencies_from(g, after);
            auto array = as_device_array(destination);
            CUWEAVE_EXPECTS(array->contiguous() && !array->readonly(), "memset needs a writable contiguous device array");
            GraphNodeHandle node = g.add_memset(deps, array->data(), value, array->nbytes(), {array->memory_hold()});
            return make_node(g, node, GraphNodeKind::Memset, "memset " + std::to_string(array->nbytes()) + " bytes");
          },
          py::arg("destination"), py::arg("value"), py::kw_only(), py::arg("after") = py::none(),
          "Adds a node setting every byte of a device array to `value`.")
      .def(
          "add_host",
          [](Graph& g, py::object function, py::args args, py::kwargs kwargs) {
            std::function<void()> callback = python_host_callback(function, args, "add_host", "a cuweave graph host node");
            py::object after = kwargs.contains("after") ? py::object(kwargs["after"]) : py::object(py::none());
            if (py::len(kwargs) > (kwargs.contains("after") ? 1u : 0u)) {
              throw WrongType("add_host takes the keyword argument `after` only");
            }
            const auto deps = dependencies_from(g, after);
            GraphNodeHandle node = g.add_host(deps, std::move(callback), callable_name(function));
            return make_node(g, node, GraphNodeKind::Host, "host function");
          },
          py::arg("function"),
          "``add_host(function, *args, after=None)``: calls ``function(*args)`` on cuweave's callback thread at every replay, "
          "once the nodes in `after` are done. Its exception is re-raised by the replay stream's synchronize().")
      .def(
          "add_event_record",
          [](Graph& g, std::shared_ptr<Event> event, py::handle after) {
            const auto deps = dependencies_from(g, after);
            GraphNodeHandle node = g.add_event_record(deps, event->handle(), event);
            return make_node(g, node, GraphNodeKind::EventRecord, "record event");
          },
          py::arg("event"), py::kw_only(), py::arg("after") = py::none())
      .def(
          "add_event_wait",
          [](Graph& g, std::shared_ptr<Event> event, py::handle after) {
            const auto deps = dependencies_from(g, after);
            GraphNodeHandle node = g.add_event_wait(deps, event->handle(), event);
            return make_node(g, node, GraphNodeKind::EventWait, "wait event");
          },
          py::arg("event"), py::kw_only(), py::arg("after") = py::none())
      .def(
          "add_empty",
          [](Graph& g, py::handle after) {
            const auto deps = dependencies_from(g, after);
            return make_node(g, g.add_empty(deps), GraphNodeKind::Empty, "empty");
          },
          py::kw_only(), py::arg("after") = py::none(), "Adds a node that does nothing: a join point.")
      .def(
          "create_condition",
          [](Graph& g, unsigned default_value) { return g.create_condition(default_value); },
          py::arg("default") = 0,
          "A condition (its integer handle) for a conditional node of this graph, set to `default` at the start of "
          "every replay. cuweave.Condition(default, graph=g) wraps it.")
      .def(
          "add_conditional",
          [](Graph& g, const std::string& kind, py::handle condition, unsigned bodies, py::handle after) {
            const auto deps = dependencies_from(g, after);
            const ConditionHandle handle = condition_handle(condition);
            auto [node, body_graphs] = g.add_conditional(deps, handle, conditional_kind_from(kind), bodies);
            return py::make_tuple(make_node(g, node, GraphNodeKind::Conditional, kind), body_graphs);
          },
          py::arg("kind"), py::arg("condition"), py::arg("bodies") = 1, py::kw_only(), py::arg("after") = py::none(),
          "Adds a conditional node (\"if\" with 1 or 2 bodies, \"while\" with 1, \"switch\" with one per case) "
          "under `condition` (a handle from create_condition, or a cuweave.Condition). Returns (node, bodies): "
          "each body a Graph to add nodes to, replayed only as part of this graph.")
      .def(
          "add_set_condition",
          [](Graph& g, py::handle condition, py::handle element_arg, const std::string& comparison,
             py::handle threshold, py::handle after) {
            const auto deps = dependencies_from(g, after);
            const ConditionHandle handle = condition_handle(condition);
            auto element = as_device_array(element_arg);
            const ConditionRule rule = condition_rule(*element, comparison, threshold);
            GraphNodeHandle node = g.add_set_condition(deps, handle, rule, element);
            return make_node(g, node, GraphNodeKind::Kernel, "set_condition");
          },
          py::arg("condition"), py::arg("element"), py::arg("comparison") = "!=", py::arg("threshold") = 0,
          py::kw_only(), py::arg("after") = py::none(),
          "Adds a node setting `condition` from `element` (one element of a device array): 1 or 0 by `comparison` "
          "with `threshold`, or (\"value\") the element itself as a switch's case index.")
      .def_property_readonly("is_body", &Graph::is_body, "Whether this is a conditional node's body.")
      .def(
          "add_graph",
          [](Graph& g, const Graph& child, py::handle after) {
            const auto deps = dependencies_from(g, after);
            return make_node(g, g.add_child(deps, child), GraphNodeKind::ChildGraph, "graph");
          },
          py::arg("child"), py::kw_only(), py::arg("after") = py::none(),
          "Embeds a copy of another graph as one node.")
      .def(
          "set_arguments",
          [](Graph& g, const GraphNode& node, py::handle args) {
            checked_node(g, node, GraphNodeKind::Kernel, "set_arguments");
            if (!node.kernel) {
              throw InvalidArgument("set_arguments needs a node added with add_kernel (its parameter sizes are "
                                    "known); for captured kernels use Graph.rebind()");
            }
            Operation operation(node.kernel->operation_name());
            PackedArguments packed = pack(*node.kernel, args, operation);
            g.set_kernel_arguments(node.handle, packed.pointers.data(), operation);
          },
          py::arg("node"), py::arg("args"),
          "New arguments for a kernel node (applied at the next replay, by an exec update).")
      .def(
          "set_copy",
          [](Graph& g, const GraphNode& node, py::handle destination, py::handle source) {
            checked_node(g, node, GraphNodeKind::Copy, "set_copy");
            CopyPair copy = copy_pair(destination, source);
            g.set_copy(node.handle, copy.destination, copy.source, copy.bytes, std::move(copy.holds));
          },
          py::arg("node"), py::arg("destination"), py::arg("source"),
          "Repoints a copy node (applied at the next replay, by an exec update).")
      .def(
          "rebind",
          [](Graph& g, py::dict mapping) {
            std::vector<PointerRemap> remaps;
            Holds holds, released;
            for (auto item : mapping) {
              auto old_array = as_device_array(item.first);
              auto new_array = as_device_array(item.second);
              if (old_array->nbytes() != new_array->nbytes() || old_array->dtype().typestr != new_array->dtype().typestr) {
                throw InvalidArgument("rebind maps each array to one of the same dtype and size (" +
                                      std::to_string(old_array->nbytes()) + " bytes of " + old_array->dtype().typestr +
                                      " -> " + std::to_string(new_array->nbytes()) + " bytes of " +
                                      new_array->dtype().typestr + ")");
              }
              CUWEAVE_EXPECTS(new_array->device() == g.device(), "rebind's new arrays must be on the graph's device");
              remaps.push_back(PointerRemap{old_array->data(), new_array->data(), old_array->nbytes()});
              holds.push_back(new_array->memory_hold());
              released.push_back(old_array->memory_hold());
            }
            return g.replace_pointers(remaps, std::move(holds), released);
          },
          py::arg("mapping"),
          "Repoints every kernel argument, copy and memset of the graph from each old device array to its new one "
          "(a dict old -> new, same dtype and size); applied at the next replay by an exec update, no re-capture. "
          "Returns how many pointers changed.")
      .def(
          "update",
          [](Graph& g, const Graph& other) { return to_string(g.adopt_template_of(other)); }, py::arg("other"),
          "Takes `other`'s nodes and parameters (e.g. a re-capture with new buffers): an exec update in place "
          "when the topology is the same, else a new instantiation. Returns \"updated\" or \"reinstantiated\".")
      .def("instantiate", [](Graph& g) { return to_string(g.refresh()); },
           "Instantiates now (replay does it on first use) or applies pending changes.")
      .def(
          "upload",
          [](Graph& g, py::handle stream) { g.upload(resolve_stream(stream)); }, py::arg("stream") = py::none(),
          "Prepares the device for the first replay on `stream` ahead of time.");

  py::class_<Capture, std::shared_ptr<Capture>>(m, "CaptureState",
                                               "The core of a cuweave.capture block (use cuweave.capture).")
      .def_property_readonly("stream", &Capture::stream)
      .def_property_readonly("mode", [](const Capture& c) { return to_string(c.mode()); })
      .def_property_readonly("ended", &Capture::ended)
      .def("end", &Capture::end, "Ends the capture and returns its Graph; raises CaptureError (unjoined fork, "
                                 "invalidated capture) after the capture has ended.")
      .def("abandon", &Capture::abandon, "Ends the capture and drops what it captured. Never raises.");

  m.def(
      "begin_capture",
      [](py::handle stream, const std::string& mode, bool graph_memory) {
        std::shared_ptr<Stream> resolved = resolve_stream(stream);
        const CaptureMode capture_mode = capture_mode_from(mode);
        // Beginning waits for other threads' bookkeeping calls to end, which may wait for a stream-ordered
        // callback that needs the GIL.
        ReleaseGil release;
        return Capture::begin(std::move(resolved), capture_mode, graph_memory);
      },
      py::arg("stream"), py::arg("mode") = "global", py::arg("graph_memory") = false);
}

}  // namespace cuweave::bindings
