// Note [Graph function calls in C]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A hit of cuweave.graph_function (one NumPy input like the previous call's) is a copy into pinned staging,
// one replay and one wait: on an H100, 1 KB, about 10 µs of which the GPU takes most. Written in Python, the
// call itself (the __call__ frame with *args, unpacking the cached state, comparing shapes, NumPy's
// setitem machinery for 1 KB) cost 0.6-1.5 µs more than the copy, replay and wait alone, in four processes
// (tools/probes/round_trip_breakdown.py). So GraphFunction (python/cuweave/graph_function.py) derives from
// this type, whose tp_call answers such a hit in C++ — the identity checks, a memcpy, Graph::launch and
// Stream::synchronize — and hands every other call to the Python method `_call`, the general path. A
// Python subclass that defines no __call__ inherits the slot (set with pybind11's custom_type_setup).
// Measured after (H100, 1 KB, one process): f(x) 10.43 µs, the graph's replay + synchronize alone 10.43.
//
// Calls from several threads take turns (GraphFunctionBase::take_turn): the staging, the results and the replay
// stream are shared, and a capture on that stream forbids waiting on it meanwhile. A thread that must wait
// for its turn releases the GIL first, as the call it waits for may need the GIL to finish.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "bindings/exception_translation.hpp"
#include "bindings/gil.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/python_callbacks.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/graph.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::bindings {

namespace {

// What a hit needs, set by GraphFunction for its most recent graph (none while there is none, or while it
// copies its results). Immutable once set; replaced as a whole.
struct FastPath {
  py::array staging;  // pinned, C-contiguous: the graph's H2D copy reads it
  void* staging_data = nullptr;
  std::size_t nbytes = 0;
  PyObject* descr = nullptr;  // staging's dtype (kept alive by staging); an input's must be this very object
  std::vector<Py_ssize_t> shape;
  std::shared_ptr<Graph> graph;
  std::shared_ptr<Stream> stream;
  py::object result;  // the pinned output array (or a tuple of them) the graph writes
  bool fresh = true;  // each call returns new arrays copied from `result`; else `result` itself

  // The input is a C-contiguous ndarray (not a subclass) of staging's dtype and shape.
  bool accepts(PyObject* value) const {
    const auto& numpy = py::detail::npy_api::get();
    if (Py_TYPE(value) != numpy.PyArray_Type_) return false;
    const auto* array = py::detail::array_proxy(value);
    if (array->descr != descr || array->nd != static_cast<int>(shape.size())) return false;
    if (!(array->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_)) return false;
    return std::equal(shape.begin(), shape.end(), array->dimensions);
  }
};

class GraphFunctionBase {
 public:
  std::shared_ptr<const FastPath> fast;  // LOCK: calls_ (set and cleared inside a turn)
  std::uint64_t fast_hits = 0;           // LOCK: calls_

  // One call at a time; recursive, so that a call that calls the function again (during its capture) fails in
  // the capture rather than deadlocking. Never waits while holding the GIL.
  std::unique_lock<std::recursive_mutex> take_turn() {
    std::unique_lock<std::recursive_mutex> turn(calls_, std::try_to_lock);
    if (!turn.owns_lock()) {
      py::gil_scoped_release release;
      turn.lock();
    }
    return turn;
  }

 private:
  std::recursive_mutex calls_;
};

const py::detail::type_info* base_info = nullptr;

// New NumPy arrays holding what the pinned output array (or tuple of them) `result` holds now.
PyObject* copy_of(PyObject* result) {
  const auto& numpy = py::detail::npy_api::get();
  if (!PyTuple_Check(result)) return numpy.PyArray_NewCopy_(result, 0 /* C order */);
  const Py_ssize_t count = PyTuple_GET_SIZE(result);
  PyObject* copies = PyTuple_New(count);
  if (copies == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* copy = numpy.PyArray_NewCopy_(PyTuple_GET_ITEM(result, i), 0);
    if (copy == nullptr) {
      Py_DECREF(copies);
      return nullptr;
    }
    PyTuple_SET_ITEM(copies, i, copy);
  }
  return copies;
}

PyObject* general_path(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* call = PyObject_GetAttrString(self, "_call");
  if (call == nullptr) return nullptr;
  PyObject* result = PyObject_Call(call, args, kwargs);
  Py_DECREF(call);
  return result;
}

PyObject* graph_function_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* instance = reinterpret_cast<py::detail::instance*>(self);
  // Null until the base's __init__ has run (a subclass that skipped it takes the general path).
  auto* base = static_cast<GraphFunctionBase*>(instance->get_value_and_holder(base_info, false).value_ptr());
  if (base == nullptr) return general_path(self, args, kwargs);
  std::unique_lock<std::recursive_mutex> turn;
  try {
    turn = base->take_turn();
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
  if (!base->fast || (kwargs && PyDict_GET_SIZE(kwargs) != 0) || PyTuple_GET_SIZE(args) != 1 ||
      !base->fast->accepts(PyTuple_GET_ITEM(args, 0))) {
    return general_path(self, args, kwargs);
  }
  // Its own reference, though only a turn changes base->fast: a few ns for never reading a freed one.
  const std::shared_ptr<const FastPath> fast = base->fast;
  try {
    // The previous replay has finished reading the staging: the previous call waited for it.
    const auto* input = py::detail::array_proxy(PyTuple_GET_ITEM(args, 0));
    std::memmove(fast->staging_data, input->data, fast->nbytes);
    {
      UnblockedEnqueue unblocked;
      fast->graph->launch(fast->stream);
    }
    synchronize_stream(*fast->stream, "GraphFunction.__call__()");
  } catch (...) {
    set_python_error_from_current_exception();
    return nullptr;
  }
  ++base->fast_hits;
  // A copy made inside the turn: the next call's replay rewrites the outputs.
  return fast->fresh ? copy_of(fast->result.ptr()) : fast->result.inc_ref().ptr();
}

}  // namespace

void bind_graph_function(py::module_& m) {
  // The slot is set before the type is readied, so that the type's dict gets a __call__ for it and Python
  // subclasses inherit it.
  py::class_<GraphFunctionBase> base(
      m, "_GraphFunctionBase",
      "cuweave.GraphFunction's base: answers a call like the previous one in C++ (Note [Graph function calls in "
      "C]); other calls go to the method _call.",
      py::custom_type_setup([](PyHeapTypeObject* heap_type) { heap_type->ht_type.tp_call = graph_function_call; }));
  base.def(py::init<>())
      .def(
          "_set_fast_path",
          [](GraphFunctionBase& self, py::array staging, std::shared_ptr<Graph> graph, std::shared_ptr<Stream> stream,
             py::object result, bool fresh) {
            if (!(staging.flags() & py::array::c_style) || !staging.writeable()) {
              throw InvalidArgument("a graph function's staging must be a writeable C-contiguous array");
            }
            auto fast = std::make_shared<FastPath>();
            fast->descr = reinterpret_cast<PyObject*>(py::detail::array_proxy(staging.ptr())->descr);
            fast->shape.assign(staging.shape(), staging.shape() + staging.ndim());
            fast->staging_data = staging.mutable_data();
            fast->nbytes = static_cast<std::size_t>(staging.nbytes());
            fast->staging = std::move(staging);
            fast->graph = std::move(graph);
            fast->stream = std::move(stream);
            fast->result = std::move(result);
            fast->fresh = fresh;
            self.fast = std::move(fast);
          },
          py::arg("staging"), py::arg("graph"), py::arg("stream"), py::arg("result"), py::arg("fresh"),
          "Answers later one-input calls whose input has staging's dtype (the same object), shape and a "
          "C-contiguous layout: copy into staging, replay graph on stream, wait, return result (a tuple of arrays "
          "or one), or new arrays copied from it when `fresh`.")
      .def("_clear_fast_path", [](GraphFunctionBase& self) { self.fast.reset(); })
      .def(
          "_in_turn",
          [](GraphFunctionBase& self, const py::function& function, const py::args& args) {
            auto turn = self.take_turn();
            return function(*args);
          },
          "function(*args) as a call of this graph function: after the calls of other threads, before theirs.")
      .def_property_readonly("_fast_hits", [](const GraphFunctionBase& self) { return self.fast_hits; });
  base_info = py::detail::get_type_info(typeid(GraphFunctionBase));
}

}  // namespace cuweave::bindings
