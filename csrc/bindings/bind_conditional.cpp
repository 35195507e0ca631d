// Conditional graph nodes (Note [Conditional nodes]): conditions, the built-in kernel that sets one, and
// the node whose bodies are captured. The with-block API lives in cuweave/_conditionals.py.
#include "bindings/arrays.hpp"
#include "bindings/conditions.hpp"
#include "bindings/dtypes.hpp"
#include "bindings/gil.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/streams.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/conditional.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/submission.hpp"
#include "cuweave/weave.hpp"

namespace cuweave::bindings {

ConditionalKind conditional_kind_from(const std::string& kind) {
  if (kind == "if") return ConditionalKind::If;
  if (kind == "while") return ConditionalKind::While;
  if (kind == "switch") return ConditionalKind::Switch;
  throw InvalidArgument("a conditional node is \"if\", \"while\" or \"switch\", not \"" + kind + "\"");
}

namespace {

Comparison comparison_from(const std::string& comparison) {
  if (comparison == "value") return Comparison::Value;
  if (comparison == "==") return Comparison::Equal;
  if (comparison == "!=") return Comparison::NotEqual;
  if (comparison == ">") return Comparison::Greater;
  if (comparison == ">=") return Comparison::GreaterEqual;
  if (comparison == "<") return Comparison::Less;
  if (comparison == "<=") return Comparison::LessEqual;
  throw InvalidArgument("a comparison is one of \">\", \">=\", \"<\", \"<=\", \"==\", \"!=\" (or \"value\" for a "
                        "switch's case index), not \"" + comparison + "\"");
}

}  // namespace

ConditionHandle condition_handle(py::handle condition) {
  if (py::isinstance<py::bool_>(condition) || !PyIndex_Check(condition.ptr())) {
    throw WrongType(std::string("a condition is a handle from Graph.create_condition() or a cuweave.Condition, not ") +
                    Py_TYPE(condition.ptr())->tp_name);
  }
  py::object integer = py::reinterpret_steal<py::object>(PyNumber_Index(condition.ptr()));
  if (!integer) throw py::error_already_set();
  return integer.cast<ConditionHandle>();
}

ConditionRule condition_rule(const DeviceArray& element, const std::string& comparison, py::handle threshold) {
  if (element.size() != 1) {
    throw InvalidArgument("a condition is computed from one element; this array has " +
                          std::to_string(element.size()) + " (pass a 0-d or 1-element array, e.g. x[i:i+1])");
  }
  ConditionRule rule;
  rule.element = element.data();
  rule.type = numeric_type(element);
  rule.comparison = comparison_from(comparison);
  if (rule.comparison != Comparison::Value) rule.threshold = scalar_for(threshold, rule.type);
  return rule;
}

void bind_conditional(py::module_& m) {
  m.def(
      "create_condition",
      [](py::handle stream_arg, unsigned default_value) {
        std::shared_ptr<Stream> stream = resolve_stream(stream_arg);
        return create_condition(*stream, default_value);
      },
      py::arg("stream"), py::arg("default"),
      "A new condition (its integer handle) of the graph `stream` captures into, set to `default` at the start "
      "of every replay.");

  m.def(
      "synchronize_when_capture_ends",
      [](const std::shared_ptr<Stream>& capturing, const std::shared_ptr<Stream>& stream) {
        std::shared_ptr<Capture> capture = Capture::of(*capturing);
        if (!capture) throw InvalidArgument("the stream is not capturing");
        capture->defer([stream] { stream->synchronize(); });  // a failure surfaces from the capture's end
      },
      py::arg("capturing"), py::arg("stream"),
      "Synchronizes `stream` once the capture on `capturing` has ended (where a global capture forbids it "
      "before): work queued there (e.g. writing what the graph will read) completes before any replay.");

  m.def(
      "set_condition",
      [](ConditionHandle condition, py::handle element_arg, const std::string& comparison, py::handle threshold,
         py::handle stream_arg) {
        auto element = as_device_array(element_arg);
        const ConditionRule rule = condition_rule(*element, comparison, threshold);
        Operation operation("set_condition");
        operation.reads(element);
        std::shared_ptr<Stream> stream = placed(operation, stream_arg);
        UnblockedEnqueue unblocked;
        stream->set_condition_async(operation, condition, rule);
      },
      py::arg("condition"), py::arg("element"), py::arg("comparison"), py::arg("threshold"), py::arg("stream"),
      "Queues a kernel on the capturing `stream` setting `condition` from the array's one element: 1 or 0 by "
      "`comparison` with `threshold`, or (\"value\") the element itself as a switch's case index.");

  py::class_<Conditional, std::shared_ptr<Conditional>>(m, "ConditionalNode",
                                                        "A conditional node added to a capture, and its bodies.")
      .def_static(
          "add",
          [](py::handle stream_arg, ConditionHandle condition, const std::string& kind, unsigned bodies) {
            // Inside a weave the node follows everything before it and everything after follows it: the weave
            // does not see into its bodies (Note [Weaving]).
            std::shared_ptr<Stream> stream = resolve_stream(stream_arg);
            if (Weave* weave = Weave::active()) stream = weave->place({sanitizer::everything()}, std::move(stream));
            return Conditional::add(std::move(stream), condition, conditional_kind_from(kind), bodies);
          },
          py::arg("stream"), py::arg("condition"), py::arg("kind"), py::arg("bodies"))
      .def_property_readonly("body_count", &Conditional::body_count)
      .def_property_readonly("stream", &Conditional::stream)
      .def("begin_body", &Conditional::begin_body, py::arg("index"),
           "Begins capturing body `index` on a new stream, returned.")
      .def("end_body", &Conditional::end_body)
      .def("abandon_body", &Conditional::abandon_body);
}

}  // namespace cuweave::bindings
