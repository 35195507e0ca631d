// Shared by the binding files: Python-side Holds, stream resolution and dtype conversion.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "cuweave/arithmetic.hpp"
#include "cuweave/condition.hpp"
#include "cuweave/paused_streams.hpp"
#include "cuweave/hold.hpp"
#include "cuweave/operation.hpp"
#include "cuweave/trace.hpp"
#include "cuweave/weave.hpp"

namespace cuweave {
class Stream;
class DeviceArray;
class PinnedBlock;
struct DType;
namespace sanitizer {
struct Conflict;
}
}  // namespace cuweave

namespace cuweave::bindings {

namespace py = pybind11;

// Releases the GIL around a call that may block. While a trace is open it first notes the Python call
// site, which operations issued without the GIL cannot read (Note [Tracing]). Use it wherever a binding
// releases the GIL, also as py::call_guard<ReleaseGil>.
struct ReleaseGil {
  trace::CallSiteNote note;
  py::gil_scoped_release release;
};

// Around a call that queues work on a stream: releases the GIL while a stream is paused for the host, whose
// queue may be full (Note [Enqueueing behind a paused stream]); otherwise keeps it, at the cost of one
// relaxed atomic load. The enclosed code must not touch Python objects.
class UnblockedEnqueue {
 public:
  UnblockedEnqueue() {
    if (paused_streams::any()) {
      note_.emplace();
      state_ = PyEval_SaveThread();
    }
  }
  UnblockedEnqueue(const UnblockedEnqueue&) = delete;
  UnblockedEnqueue& operator=(const UnblockedEnqueue&) = delete;
  ~UnblockedEnqueue() {
    if (state_) PyEval_RestoreThread(state_);
  }

 private:
  std::optional<trace::CallSiteNote> note_;
  PyThreadState* state_ = nullptr;
};

// Keeps a Python object alive from C++; the reference is dropped under the GIL on any thread
// (or leaked once the interpreter is finalizing).
Hold hold_python(py::handle object);
// Keeps the exception being handled; if it is dropped without being reported, it goes to
// sys.unraisablehook, so that no callback error is ever lost.
Hold hold_python_error(py::error_already_set& error, const char* context);
// A host callback calling function(*args) on cuweave's callback thread; an exception goes to the stream
// that launched or replayed it, whose synchronize() raises CallbackError (or, unreported, goes to
// sys.unraisablehook naming `context`). `api` names the caller in the TypeError for a non-callable.
std::function<void()> python_host_callback(py::handle function, py::args args, const char* api, const char* context);
// What traces call a Python callable's runs: its qualified name, else its repr.
std::string callable_name(py::handle function);
// The sanitizer's races as Python tuples (bind_sanitizer.cpp): what RaceError.races and RaceWarning hold.
py::list races_to_python(const std::vector<sanitizer::Conflict>& conflicts);
// Marks a stored error as reported and raises cuweave.CallbackError from it.
[[noreturn]] void raise_stored_callback_error(const Hold& error, const char* where);
// Waits for the work queued on `stream` with the GIL released, then raises CallbackError if a host callback
// on it raised (what Stream.synchronize() does; `where` names the call in that error).
void synchronize_stream(Stream& stream, const char* where);

// `None` -> this thread's current stream; a cuweave Stream; or any object speaking __cuda_stream__.
std::shared_ptr<Stream> resolve_stream(py::handle stream);
// The stream a `stream=` argument names: null for None (the weave's choice, or the current stream: see
// cuweave::place), else as resolve_stream.
std::shared_ptr<Stream> named_stream(py::handle stream);
// The stream for an operation touching what `accesses()` returns (a vector of sanitizer::Access): what
// resolve_stream gives, except inside cuweave.weave(), where the weave places it and queues the waits its
// accesses need (Note [Weaving]). `accesses` runs only inside a weave.
template <typename Accesses>
std::shared_ptr<Stream> stream_for(py::handle stream, Accesses&& accesses) {
  Weave* weave = Weave::active();
  if (weave == nullptr) return resolve_stream(stream);
  return weave->place(accesses(), stream.is_none() ? nullptr : resolve_stream(stream));
}
// (address, bytes, writes) ranges from Python, as accesses.
std::vector<sanitizer::Access> accesses_from(const std::vector<std::tuple<std::uintptr_t, std::size_t, bool>>& ranges);

// A cuweave Stream for `object`: a Stream, anything with __cuda_stream__, a torch or cupy stream, or
// (only with allow_raw_handle, since a wrong integer crashes the driver) an int handle.
std::shared_ptr<Stream> adopt_foreign_stream(py::handle object, bool allow_raw_handle = false);

// A device ordinal that exists (ValueError otherwise; DeviceUnavailableError without devices).
int checked_device(int device);
// `None` -> the current device; else an int (or anything with __index__, such as cuweave.Device).
int resolve_device(py::handle device);

DType dtype_from_python(py::handle dtype);
py::dtype dtype_to_python(const DType& dtype);
std::vector<std::int64_t> shape_from_python(py::handle shape);
// Throws TypeError unless `typestr` equals `expected_typestr` and ValueError unless the shapes are equal,
// naming `what` and both sides (cuweave never converts or broadcasts).
void check_same_layout(const char* what, const std::vector<std::int64_t>& shape, const std::string& typestr,
                       const std::vector<std::int64_t>& expected_shape, const std::string& expected_typestr);

// Appends what work queued on `stream` that uses `array` must hold (Note [Memory follows its stream]);
// with a null stream (a graph node), the array's memory itself.
void add_uses(Holds& holds, DeviceArray& array, const std::shared_ptr<Stream>& stream);
// Whether an operation takes strided views (a copy does), or only contiguous arrays (a built-in kernel).
enum class Layouts { Contiguous, Strided };
// Throws unless `array` is on `stream`'s device, (when `written`) writable, and contiguous where `layouts` says.
void check_usable_on(const DeviceArray& array, const Stream& stream, bool written,
                     Layouts layouts = Layouts::Contiguous);
// check_usable_on for each of `operation`'s arrays.
void check_usable(const Operation& operation, const Stream& stream, Layouts layouts = Layouts::Contiguous);
// Places `operation` (Note [One operation, one path]) on the stream the user named (or None), then checks its
// arrays there.
std::shared_ptr<Stream> placed(Operation& operation, py::handle stream_arg, Layouts layouts = Layouts::Contiguous);
// The element type of a built-in kernel's array (TypeError for types other than float32, float64, int32, int64).
NumericType numeric_type(const DeviceArray& array);
// A Python (or NumPy) real number as a scalar of `type`; ValueError for a value the type cannot hold exactly.
Scalar scalar_for(py::handle value, NumericType type);
// A condition's handle: an int, or an object with __index__ such as cuweave.Condition (TypeError otherwise).
ConditionHandle condition_handle(py::handle condition);
// "if", "while" or "switch" (ValueError otherwise).
ConditionalKind conditional_kind_from(const std::string& kind);
// How a conditional node's condition follows one element (bind_conditional.cpp): ValueError/TypeError naming
// what is wrong with the element, the comparison or the threshold.
ConditionRule condition_rule(const DeviceArray& element, const std::string& comparison, py::handle threshold);
// A DeviceArray, or a zero-copy view of a foreign GPU array (__cuda_array_interface__ or DLPack).
std::shared_ptr<DeviceArray> as_device_array(py::handle object);
// The holder inside an instance of exactly the class `info` describes, read without a caster (whose type
// lookups cost more than most hot calls' own work); null for anything else (subclasses, foreign objects, an
// instance whose __init__ has not run), which the caller hands to the general path. The holder lives in the
// Python object, which the caller's reference keeps alive.
template <typename T>
const std::shared_ptr<T>* exact_holder(PyObject* object, const py::detail::type_info* info) {
  if (info == nullptr || Py_TYPE(object) != info->type) return nullptr;
  auto* instance = reinterpret_cast<py::detail::instance*>(object);
  py::detail::value_and_holder held = instance->get_value_and_holder(info, /*throw_if_missing=*/false);
  if (!held || !held.holder_constructed()) return nullptr;
  return &held.template holder<std::shared_ptr<T>>();
}
// exact_holder of a cuweave.DeviceArray; as_device_array handles everything else.
const std::shared_ptr<DeviceArray>* exact_device_array(PyObject* object);
// True for device arrays of any library (cuweave, __cuda_array_interface__, DLPack other than NumPy).
bool is_device_side(py::handle object);
// A C-contiguous NumPy array for a host side of a copy (TypeError/ValueError naming the problem).
py::array host_array(py::handle object, bool destination);
std::vector<std::int64_t> shape_of(const py::array& array);
std::string typestr_of(const py::array& array);
// What a copy of a host array must keep alive: the array (which owns any pinned block) and its registration.
Holds host_holds(const py::array& array);
// Copies a device array into a new (or the given) NumPy array and waits for the copy (bind_copy.cpp).
// Makes `reader` wait for the streams whose queued work writes `array` (Note [Host reads follow the writer]).
void wait_for_writer(const DeviceArray& array, Stream& reader);
// Makes `waiter` wait for each of `writers` (DeviceArray::writers()) that is open and not `waiter` itself.
void order_after_writers(const std::vector<std::shared_ptr<Stream>>& writers, Stream& waiter);
// Copies `source`'s elements into `destination` (same shape and dtype, either may be strided) on `stream`.
void copy_elements(Operation& operation, Stream& stream, DeviceArray& destination, const DeviceArray& source);
// A new contiguous array with `array`'s values, copied on the named stream (None: current), after the array's
// writers when `after_writers` (a host read's order).
std::shared_ptr<DeviceArray> contiguous_copy(const std::shared_ptr<DeviceArray>& array, py::handle stream,
                                             bool after_writers);
py::array device_to_numpy(const std::shared_ptr<DeviceArray>& array, py::handle stream, py::handle out,
                          py::handle pinned);
// Copies `bytes` of `array`'s memory from byte `offset` into `destination` (writeable host memory of at least that
// size) as a host read: on `stream` (None: the current stream, after the array's writer; Note [Host reads follow
// the writer]), waiting for the copy.
void read_on_host(const std::shared_ptr<DeviceArray>& array, py::handle stream, const py::array& destination,
                  std::size_t offset, std::size_t bytes);
// The value a CUDA-stream field of a protocol carries for `stream` (1 legacy, 2 per-thread, else the handle).
std::uintptr_t protocol_stream_value(const Stream& stream);

// A pinned pool block: a cached one without a GIL round trip, else a new one with the GIL released.
std::shared_ptr<PinnedBlock> take_pinned_block(std::size_t bytes);
// A C-contiguous NumPy array of `dtype` and `shape` on `block`, which the array keeps alive.
py::array numpy_on(std::shared_ptr<PinnedBlock> block, const py::dtype& dtype, const std::vector<std::int64_t>& shape);

// Sets the Python exception types used by the translator (called once by cuweave/__init__.py).
void set_error_types(py::dict types);
// Sets the Python error for the exception being handled (the same mapping pybind11 functions get);
// for functions bound without pybind11's dispatcher. Call inside a catch block.
void set_python_error_from_current_exception() noexcept;

void bind_errors(py::module_& m);
void bind_backend(py::module_& m);
void bind_backend_calls(py::module_& m);
// Warns once per process (SimulatorTimingWarning) when a timing is read on the simulator.
void warn_if_simulated_timing();
void bind_device(py::module_& m);
void bind_stream(py::module_& m);
void bind_event(py::module_& m);
void bind_host_latch(py::module_& m);
void bind_sanitizer(py::module_& m);
void bind_pinned(py::module_& m);
void bind_array(py::module_& m);
void bind_array_views(py::module_& m);  // after bind_array
void bind_copy(py::module_& m);
void bind_ops(py::module_& m);
void bind_trace(py::module_& m);
void bind_kernel(py::module_& m);
void bind_graph(py::module_& m);
void bind_graph_function(py::module_& m);  // after bind_graph
void bind_conditional(py::module_& m);
void bind_collectives(py::module_& m);
void bind_weave(py::module_& m);
// Installs the hot methods of Stream, Graph and DeviceArray as raw CPython methods (after the classes).
void install_fast_methods(py::module_& m);

}  // namespace cuweave::bindings
