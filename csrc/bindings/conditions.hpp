// Conditional nodes' conditions from Python.
#pragma once

#include <string>
#include "bindings/pybind.hpp"
#include "cuweave/condition.hpp"

namespace cuweave::bindings {

// A condition's handle: an int, or an object with __index__ such as cuweave.Condition (TypeError otherwise).
ConditionHandle condition_handle(py::handle condition);
// "if", "while" or "switch" (ValueError otherwise).
ConditionalKind conditional_kind_from(const std::string& kind);
// How a conditional node's condition follows one element (bind_conditional.cpp): ValueError/TypeError naming
// what is wrong with the element, the comparison or the threshold.
ConditionRule condition_rule(const DeviceArray& element, const std::string& comparison, py::handle threshold);

}  // namespace cuweave::bindings
