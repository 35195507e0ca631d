// The catch-alls of the classes' methods (Note [Calls that do not fit]), made from each method's own signature.
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "bindings/misfit.hpp"

namespace cuweave::bindings {
namespace {

// The call a catch-all is retrying, on this thread: while it runs, that catch-all steps aside.
thread_local const void* retrying_self = nullptr;
thread_local const CallShape* retrying_shape = nullptr;

// Python's notation for a parameter list of pybind11's docstring ("self: X, other: Y, *, wait: bool = True"):
// the names and defaults, without the types and without self ("other, *, wait=True").
std::string python_parameters(const std::string& typed) {
  std::string result;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= typed.size(); ++i) {
    const char c = i < typed.size() ? typed[i] : ',';
    if (c == '[' || c == '(' || c == '{') ++depth;
    if (c == ']' || c == ')' || c == '}') --depth;
    if (c != ',' || depth != 0) continue;
    std::string parameter = typed.substr(start, i - start);
    start = i + 1;
    parameter.erase(0, parameter.find_first_not_of(' '));
    const std::size_t colon = parameter.find(':'), equals = parameter.find(" = ");
    std::string name = parameter.substr(0, colon == std::string::npos ? parameter.find(' ') : colon);
    if (name.empty() || name == "self" || name == "/") continue;
    if (equals != std::string::npos) name += "=" + parameter.substr(equals + 3);
    result += (result.empty() ? "" : ", ") + name;
  }
  return result;
}

// "Class.method(parameters)" for each overload pybind11's docstring lists, joined by " or " (pybind11's own
// "name(*args, **kwargs)" header of an overloaded method is no overload); empty when one is a catch-all already.
std::string method_signature(const std::string& owner, const std::string& name, const std::string& doc) {
  std::string signatures;
  const std::string head = name + "(";
  for (std::size_t at = doc.find(head); at != std::string::npos; at = doc.find(head, at + 1)) {
    if (at > 0 && doc[at - 1] != '\n' && doc[at - 1] != ' ') continue;  // inside another word
    const std::size_t close = doc.find(") -> ", at);
    if (close == std::string::npos || doc.find('\n', at) < close) continue;
    const std::string parameters = python_parameters(doc.substr(at + head.size(), close - at - head.size()));
    if (parameters == "*args, **kwargs") return "";  // a catch-all already
    signatures += (signatures.empty() ? "" : " or ") + owner + "." + name + "(" + parameters + ")";
  }
  return signatures;
}

}  // namespace

void bind_method_misfits(py::module_& m) {
  static std::deque<std::string> texts;  // the CallShapes' text: alive as long as the module
  static std::deque<CallShape> shapes;
  for (const auto& entry : py::reinterpret_borrow<py::dict>(m.attr("__dict__"))) {
    const py::handle cls = entry.second;
    if (!PyType_Check(cls.ptr()) || !py::hasattr(cls, "__module__") ||
        !cls.attr("__module__").equal(m.attr("__name__"))) {  // not another module's class the module names
      continue;
    }
    const std::string owner = cls.attr("__name__").cast<std::string>();
    std::vector<std::pair<std::string, std::string>> methods;  // (name, signature); the class changes below
    for (const py::handle item : cls.attr("__dict__").attr("items")()) {  // a mappingproxy, not a dict
      const py::tuple member = py::reinterpret_borrow<py::tuple>(item);
      const std::string name = py::str(member[0]);
      if (name.rfind('_', 0) == 0 || !PyInstanceMethod_Check(member[1].ptr())) continue;
      const py::object doc = py::handle(PyInstanceMethod_GET_FUNCTION(member[1].ptr())).attr("__doc__");
      if (doc.is_none()) continue;
      const std::string text = doc.cast<std::string>();
      std::string signature = method_signature(owner, name, text);
      if (!signature.empty()) methods.emplace_back(name, std::move(signature));
    }
    for (const auto& [name, signature] : methods) {
      texts.push_back(owner + "." + name + "()");
      const char* call = texts.back().c_str();
      texts.push_back(signature);
      shapes.push_back(CallShape{call, texts.back().c_str()});
      const CallShape& shape = shapes.back();
      // pybind11 tries each overload first without conversions, and only then with them; the catch-all, last
      // in the chain, is reached in that first pass by a call the real overloads take only with a conversion (a
      // float parameter given an int). So, when the call names only parameters the method has, it first calls
      // the method once more, stepping aside meanwhile, which lets pybind11 convert; only when that fails for
      // want of a fitting overload does it answer in cuweave's words. A call that fits costs nothing: it never
      // reaches the catch-all.
      py::cpp_function catch_all(
          [&shape, name](py::handle self, const py::args& args, const py::kwargs& kwargs) -> py::object {
            if (retrying_self == self.ptr() && retrying_shape == &shape) throw py::reference_cast_error();
            if (!names_fit(shape, args, kwargs)) refuse_misfit(shape, args, kwargs);  // no conversion would help
            const void* outer_self = std::exchange(retrying_self, self.ptr());
            const CallShape* outer_shape = std::exchange(retrying_shape, &shape);
            try {
              py::object result = self.attr(name.c_str())(*args, **kwargs);
              retrying_self = outer_self;
              retrying_shape = outer_shape;
              return result;
            } catch (py::error_already_set& error) {
              retrying_self = outer_self;
              retrying_shape = outer_shape;
              const std::string text = py::str(error.value());
              if (error.matches(PyExc_TypeError) && text.rfind(name + "(): incompatible function arguments", 0) == 0) {
                refuse_misfit(shape, args, kwargs);
              }
              throw;
            }
          },
          py::name(name.c_str()), py::is_method(cls), py::sibling(py::getattr(cls, name.c_str(), py::none())));
      py::object owner_class = py::reinterpret_borrow<py::object>(cls);
      py::detail::add_class_method(owner_class, name.c_str(), catch_all);
    }
  }
}

}  // namespace cuweave::bindings
