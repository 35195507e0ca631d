// The hook table (cuweave/_torch_native/hook_table.h): the active weave and the stream-race sanitizer as plain C
// functions, for a hook built apart from cuweave against another library (PyTorch's dispatcher hook,
// cuweave/_torch_native/hook.cpp). The hook runs where that library released the GIL: the weave's calls take it only
// to note a traced call site; the sanitizer's take it to read a call site the thread has not met before, to adopt a
// stream, and to hand a race to Python.
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "bindings/call_sites.hpp"
#include "bindings/exception_translation.hpp"
#include "bindings/gil.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "cuweave/adopted_stream.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/current_stream.hpp"
#include "cuweave/default_stream.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/trace.hpp"
#include "cuweave/weave.hpp"
#include "hook_table.h"

namespace cuweave::bindings {
namespace {

// The first failure of a table call on this thread since the last raise_hook_failure(): the hook cannot raise
// through the library that called it (PyTorch logs and drops a callback's exception), so the block's end raises it.
thread_local std::exception_ptr hook_failure;

int failed() noexcept {
  if (!hook_failure) hook_failure = std::current_exception();
  return -1;
}

int jobs(int* device) noexcept {
  try {
    int bits = sanitizer::enabled() ? CUWEAVE_HOOK_CHECKS : 0;
    if (Weave::active() != nullptr) {
      const std::shared_ptr<Stream> current = current_stream::get();
      // Under a capture each operator is placed once, as the graph is made, not at each replay: the Python hooks
      // place it then, and keep what it touches for the graph.
      if (!(Capture::any_active() && Capture::of(*current))) {
        bits |= CUWEAVE_HOOK_PLACES;
        *device = current->device();
      }
    }
    return bits;
  } catch (...) {
    failed();
    return 0;
  }
}

std::vector<sanitizer::Access>& accesses_of(const cuweave_range* ranges, std::size_t count) {
  thread_local std::vector<sanitizer::Access> accesses;
  accesses.clear();
  for (std::size_t i = 0; i < count; ++i) {
    accesses.push_back({ranges[i].begin, ranges[i].begin + ranges[i].bytes,
                        ranges[i].writes ? sanitizer::AccessKind::Write : sanitizer::AccessKind::Read});
  }
  return accesses;
}

int place(const cuweave_range* ranges, std::size_t count, cuweave_placed* placed) noexcept {
  try {
    Weave* weave = Weave::active();
    CUWEAVE_EXPECTS(weave != nullptr, "no weave is active on this thread");
    std::optional<UnblockedEnqueue> unblocked;  // a library calling with the GIL held: released while paused
    if (PyGILState_Check()) unblocked.emplace();
    std::optional<trace::CallSiteNote> note;
    if (trace::active() && !unblocked) {  // the weave's records and waits named at the Python line that called
      PyGILState_STATE gil = PyGILState_Ensure();
      note.emplace();
      PyGILState_Release(gil);
    }
    const std::vector<sanitizer::Access>& accesses = accesses_of(ranges, count);
    const std::shared_ptr<Stream> stream = weave->place(sanitizer::AccessSpan(accesses.data(), accesses.size()),
                                                        nullptr);
    // The legacy default stream as 0 whatever handle the backend gives it (CUDA's cudaStreamLegacy is 1): PyTorch
    // names it 0 and takes another odd number for none of its streams.
    placed->stream_handle = stream->is_legacy_default() ? 0 : reinterpret_cast<std::uintptr_t>(stream->handle());
    placed->device = stream->device();
    placed->stream = stream.get();  // the weave's strands hold it until the weave ends
    return 0;
  } catch (...) {
    return failed();
  }
}

int allocated(std::uintptr_t begin, std::size_t bytes, void* stream) noexcept {
  try {
    if (Weave* weave = Weave::active()) {
      weave->allocated(reinterpret_cast<const void*>(begin), bytes, *static_cast<const Stream*>(stream));
    }
    return 0;
  } catch (...) {
    return failed();
  }
}

// --- The sanitizer's calls ------------------------------------------------------------------------------------------

// The library's streams it never destroys, adopted once each (guarded by the GIL), and those this thread has used
// (read without it).
std::map<std::pair<std::uintptr_t, int>, std::shared_ptr<Stream>>& lasting_streams() {
  static auto* streams = new std::map<std::pair<std::uintptr_t, int>, std::shared_ptr<Stream>>;  // leaked: at exit
  return *streams;
}
thread_local std::map<std::pair<std::uintptr_t, int>, std::shared_ptr<Stream>> lasting_streams_used;

bool warned_capturing = false;  // guarded by the GIL

// cuweave's stream for `given` where it needs no adoption: the weave's, a default stream, or a lasting one this
// thread has used; null otherwise.
std::shared_ptr<Stream> stream_at_hand(const cuweave_stream& given) {
  if (given.placed != nullptr) return static_cast<Stream*>(given.placed)->shared_from_this();
  if (given.handle == 0) return DefaultStream::legacy(given.device);
  if (!given.lasting) return nullptr;
  const auto found = lasting_streams_used.find({given.handle, given.device});
  return found != lasting_streams_used.end() && !found->second->closed() ? found->second : nullptr;
}

// cuweave's stream for `given`, under the GIL: as stream_at_hand, else an adoption of the library's stream (kept where
// it lasts), told that its owner reports its synchronizes. Null for a stream first met while it takes part in a
// capture that it did not begin: CUDA refuses to describe it, and asking would invalidate the capture (a
// RuntimeWarning says so once).
std::shared_ptr<Stream> stream_of(const cuweave_stream& given) {
  if (std::shared_ptr<Stream> at_hand = stream_at_hand(given)) return at_hand;
  const std::pair<std::uintptr_t, int> key{given.handle, given.device};
  if (given.lasting) {
    auto found = lasting_streams().find(key);
    if (found != lasting_streams().end() && !found->second->closed()) {
      lasting_streams_used[key] = found->second;
      return found->second;
    }
  }
  std::shared_ptr<Stream> adopted;
  try {
    adopted = AdoptedStream::adopt(reinterpret_cast<StreamHandle>(given.handle), Hold());
  } catch (const BackendError& error) {
    const std::string& name = error.name();
    if (name.rfind("cudaErrorStreamCapture", 0) != 0) throw;
    if (!warned_capturing) {
      warned_capturing = true;
      if (PyErr_WarnEx(PyExc_RuntimeWarning,
                       "cuweave: PyTorch's work on a stream first met inside a capture that the stream did not begin "
                       "is not checked by the sanitizer (run one operation on that stream before the capture to have "
                       "it checked)", 1) != 0) {
        throw py::error_already_set();
      }
    }
    return nullptr;
  }
  sanitizer::owner_reports_synchronizes(*adopted);  // PyTorch's GPU trace tells each one
  if (given.lasting) lasting_streams()[key] = lasting_streams_used[key] = adopted;
  return adopted;
}

// The first race found on this thread since raise_found(), kept until the library's call ends (hook_table.h says
// why), with the thread to raise it in.
struct FoundRace {
  std::exception_ptr error;
  unsigned long raise_in = 0;
};
thread_local std::optional<FoundRace> found_race;

// The race raise_found() last set as this thread's own asynchronous exception, until Python raises it or
// hold_raised() takes it back: the class set (a strong reference, let go with the GIL) and the race.
struct SetRace {
  PyObject* deferred = nullptr;
  std::exception_ptr error;
};
thread_local SetRace set_race;

// Lets go of set_race; with the GIL.
void forget_set_race() {
  Py_CLEAR(set_race.deferred);
  set_race.error = nullptr;
}

// A race found inside the library's call (or, on_race="warn", its warning made an error), raised in Python thread
// `raise_in` (0: this one) once it next runs Python: after the call has returned. Call inside the catch block, with
// the GIL. The class set is one that, made with no arguments, is the error again (cuweave.errors._deferred).
void raise_later(unsigned long raise_in) {
  const std::exception_ptr race = std::current_exception();
  set_python_error_from_current_exception();
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  py::object error = py::reinterpret_steal<py::object>(value);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  const py::object deferred = py::module_::import("cuweave.errors").attr("_deferred")(error);
  const unsigned long here = PyThread_get_thread_ident();
  PyThreadState_SetAsyncExc(raise_in != 0 ? raise_in : here, deferred.ptr());
  if (raise_in == 0 || raise_in == here) {
    forget_set_race();
    set_race = SetRace{deferred.inc_ref().ptr(), race};
  }
}

// Whether set_race is still this thread's pending asynchronous exception; with the GIL. Before Python 3.12 the thread
// state holds the pending one; from 3.12 on Python makes the exception as it raises it, and the class notes that.
bool set_race_pending() {
#if PY_VERSION_HEX < 0x030C0000
  return PyThreadState_Get()->async_exc == set_race.deferred;
#else
  PyObject* raised = PyObject_GetAttrString(set_race.deferred, "_cuweave_raised");
  if (raised == nullptr) throw py::error_already_set();
  const int truth = PyObject_IsTrue(raised);
  Py_DECREF(raised);
  if (truth < 0) throw py::error_already_set();
  return truth == 0;
#endif
}

// Takes set_race back from Python if it is still pending (returned), else lets go of it; with the GIL.
SetRace take_back_set_race() {
  if (set_race.deferred == nullptr) return {};
  if (!set_race_pending()) {
    forget_set_race();
    return {};
  }
  PyThreadState_SetAsyncExc(PyThread_get_thread_ident(), nullptr);
  return std::exchange(set_race, SetRace{});
}

int hold_raised() noexcept {
  if (set_race.deferred == nullptr || !Py_IsInitialized()) return 0;  // the common case: no GIL taken
  try {
    py::gil_scoped_acquire gil;
    SetRace held = take_back_set_race();
    if (held.deferred == nullptr) return 0;
    // It was found first: it goes before any race found since (none is, between two calls of the library).
    found_race = FoundRace{held.error, 0};
    Py_DECREF(held.deferred);
    return 1;
  } catch (...) {
    return failed();
  }
}

// Calls `call(*arguments)` with set_race taken back, and sets it again after (also when the call raises): for the
// Python code a library runs outside its calls, where the hook cannot hold it (PyTorch's GPU trace callbacks as a
// block is freed at a del), and which drops what it raises.
py::object call_holding_raised(const py::function& call, const py::args& arguments) {
  SetRace held = take_back_set_race();
  if (held.deferred == nullptr) return call(*arguments);
  const auto set_again = [&held] {
    forget_set_race();  // one set inside the call goes: the held one was found first
    PyThreadState_SetAsyncExc(PyThread_get_thread_ident(), held.deferred);
    set_race = std::exchange(held, SetRace{});
  };
  try {
    py::object result = call(*arguments);
    set_again();
    return result;
  } catch (...) {
    set_again();
    throw;
  }
}

// Keeps the race being handled (call inside the catch block); 1.
int keep_race(unsigned long raise_in) noexcept {
  if (!found_race) found_race = FoundRace{std::current_exception(), raise_in};
  return 1;
}

int raise_found() noexcept {
  if (!found_race || !Py_IsInitialized()) return 0;
  try {
    py::gil_scoped_acquire gil;  // also where the kept error is let go: a Python warning holds Python objects
    const FoundRace race = *std::exchange(found_race, std::nullopt);
    try {
      std::rethrow_exception(race.error);
    } catch (...) {
      raise_later(race.raise_in);
    }
    return 0;
  } catch (...) {
    return failed();
  }
}

// Runs `call(stream)`, one of the sanitizer's calls about an operation on `stream` (null: none), keeping a race it
// finds for raise_found(). 0, 1 for a race, or -1 for any other failure. Where the calling library released the GIL
// it runs without it if it can (Note [Call sites without the GIL]): the call site is one this thread met, the stream
// one at hand; otherwise under the GIL, which reading the call site anew and adopting a stream need. `call` is not run
// for a stream that could not be adopted.
template <typename Call>
int sanitizer_call(unsigned long raise_in, const cuweave_stream* stream, Call&& call) noexcept {
  if (!Py_IsInitialized()) return 0;
  try {
    if (!PyGILState_Check()) {
      const std::uint32_t site = call_site_without_gil();
      const std::shared_ptr<Stream> on = stream != nullptr && site != 0 ? stream_at_hand(*stream) : nullptr;
      if (site != 0 && (stream == nullptr || on != nullptr)) {
        try {
          const trace::CallSiteNote noted(site);
          if (sanitizer::enabled()) call(on.get());
        } catch (const sanitizer::RaceFound&) {
          return keep_race(raise_in);
        } catch (py::error_already_set&) {  // on_race="warn" where warnings are errors
          return keep_race(raise_in);
        }
        return 0;
      }
    }
    py::gil_scoped_acquire gil;
    try {
      if (!sanitizer::enabled()) return 0;
      const std::shared_ptr<Stream> on = stream != nullptr ? stream_of(*stream) : nullptr;
      if (stream == nullptr || on != nullptr) call(on.get());
    } catch (const sanitizer::RaceFound&) {
      return keep_race(raise_in);
    } catch (py::error_already_set&) {
      return keep_race(raise_in);
    }
    return 0;
  } catch (...) {
    return failed();
  }
}

int check(const char* name, const cuweave_range* ranges, std::size_t count, const cuweave_stream* stream,
          unsigned long raise_in) noexcept {
  return sanitizer_call(raise_in, stream, [&](Stream* on) {
    const std::vector<sanitizer::Access>& accesses = accesses_of(ranges, count);
    // PyTorch reports its synchronizes: its work, on the default streams too, is never taken as waited for.
    sanitizer::foreign_operation(*on, name, sanitizer::AccessSpan(accesses.data(), accesses.size()),
                                 /*synchronizes_reported=*/true);
  });
}

int handed_out(std::uintptr_t begin, std::size_t bytes, const cuweave_stream* stream,
               unsigned long raise_in) noexcept {
  return sanitizer_call(raise_in, stream, [&](Stream* on) {
    sanitizer::foreign_handed_out(reinterpret_cast<const void*>(begin), bytes, *on, sanitizer::Allocator::PyTorch);
  });
}

int stream_recorded(std::uintptr_t block, const cuweave_stream* stream) noexcept {
  return sanitizer_call(0, stream, [&](Stream* on) {
    sanitizer::foreign_stream_recorded(reinterpret_cast<const void*>(block), *on);
  });
}

int check_host(const char* name, const cuweave_range* ranges, std::size_t count, unsigned long raise_in) noexcept {
  return sanitizer_call(raise_in, nullptr, [&](Stream*) {
    const std::vector<sanitizer::Access>& accesses = accesses_of(ranges, count);
    sanitizer::foreign_host_operation(name, sanitizer::AccessSpan(accesses.data(), accesses.size()));
  });
}

int host_handed_out(std::uintptr_t begin, std::size_t bytes) noexcept {
  return sanitizer_call(0, nullptr, [&](Stream*) { sanitizer::allocated(reinterpret_cast<const void*>(begin), bytes); });
}

int stream_synchronized(const cuweave_stream* stream) noexcept {
  return sanitizer_call(0, stream, [](Stream* on) { sanitizer::host_synchronized_stream(*on); });
}

const cuweave_hook_table table = {CUWEAVE_HOOK_TABLE_VERSION,
                                  jobs,
                                  place,
                                  allocated,
                                  check,
                                  handed_out,
                                  stream_recorded,
                                  check_host,
                                  host_handed_out,
                                  raise_found,
                                  hold_raised,
                                  stream_synchronized};

}  // namespace

void bind_hook_table(py::module_& m) {
  m.def(
      "hook_table",
      [] { return py::capsule(const_cast<cuweave_hook_table*>(&table), CUWEAVE_HOOK_TABLE_NAME); },
      "The weave and the sanitizer as C functions, in a capsule (hook_table.h in cuweave/_torch_native): for a hook "
      "built against another library, which shares no C++ ABI with cuweave.");
  m.def(
      "raise_hook_failure",
      [] {
        if (std::exception_ptr failure = std::exchange(hook_failure, nullptr)) std::rethrow_exception(failure);
        // A race a hook kept and did not raise (a call that never ended): raised now, as the block ends.
        if (std::optional<FoundRace> race = std::exchange(found_race, std::nullopt)) {
          std::rethrow_exception(race->error);
        }
      },
      "Raises the first failure of a hook table call on this thread since the last call, if there was one; else a race "
      "found since and not yet raised.");
  m.def("call_holding_raised", &call_holding_raised, py::arg("call"),
        "Calls call(*arguments) with a race the hook set to be raised in this thread and Python has not raised yet "
        "taken back, and sets it again after: for Python code the hooked library runs outside its calls and which "
        "drops what it raises (wrap it with functools.partial, which runs no Python code before the call).");
  m.def(
      "hook_steps_aside",
      [] { return Capture::any_active() && Capture::of(*current_stream::get()) != nullptr; },
      "Whether the current stream takes part in a capture: a hook in another library then leaves that library's "
      "operators to the Python hooks, which keep what a captured operator touches for the graph.");
  m.attr("weave").cast<py::module_>().def(
      "placing_device",
      [] {
        int device = -1;
        return (jobs(&device) & CUWEAVE_HOOK_PLACES) != 0 ? device : -1;
      },
      "The current stream's device where a hook built against another library places its operators now (a weave "
      "active on this thread, no capture on the current stream), else -1.");
}

}  // namespace cuweave::bindings
