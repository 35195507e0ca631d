// Traces and ranges (Note [Tracing] in cuweave/trace.hpp): the session object, the Python call-site
// provider, and the origin a cuweave helper thread inherits.
#include <atomic>
#include <unordered_map>

#include "bindings/call_sites.hpp"
#include "bindings/gil.hpp"
#include "bindings/module_parts.hpp"
#include "bindings/pybind.hpp"
#include "bindings/python_frames.hpp"
#include "cuweave/backend.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/ranges.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/trace.hpp"

namespace cuweave::bindings {

namespace {

// Frames in these files are plumbing, never the user's call site.
std::string package_directory;  // python/cuweave/, set by cuweave/__init__.py; read under the GIL

bool is_plumbing(const std::string& file) {
  if (!package_directory.empty() && file.compare(0, package_directory.size(), package_directory) == 0) return true;
  auto ends_with = [&](const char* tail) {
    const std::size_t n = std::char_traits<char>::length(tail);
    return file.size() >= n && file.compare(file.size() - n, n, tail) == 0;
  };
  // PyTorch's and CuPy's own frames between the user's call and cuweave's hooks (_torch_hooks.py, _cupy_hooks.py).
  const bool in_library = file.find("-packages/torch/") != std::string::npos ||
                          file.find("-packages/cupy/") != std::string::npos ||
                          file.find("-packages/cupyx/") != std::string::npos;
  return in_library || ends_with("/threading.py") || ends_with("/contextlib.py");
}

// A frame's place in its code: the instruction offset where Python has it (3.11 on), which costs nothing to
// read, where the line number scans the code's line table at each call (a sanitized operation's largest
// cost of finding its call site); the line is read once per new offset.
struct SiteKey {
  PyCodeObject* code;
  int position;
  bool operator==(const SiteKey& other) const { return code == other.code && position == other.position; }
};
struct SiteKeyHash {
  std::size_t operator()(const SiteKey& key) const {
    return std::hash<const void*>()(key.code) * 31 + static_cast<std::size_t>(key.position);
  }
};

// Code objects in the cache stay referenced, so an address is never reused for another while cached.
std::unordered_map<SiteKey, std::uint32_t, SiteKeyHash> known_sites;  // guarded by the GIL
// The two sites found last: a loop's operations ask from one place again and again (two lookups saved per ask), or
// from two that alternate (an operation making a new array, and the free of the array its result replaced).
struct RecentSite {
  SiteKey key{nullptr, 0};
  std::uint32_t site = 0;
};
struct RecentSites {
  RecentSite sites[2];
  unsigned char next_replaced = 0;  // the entry a new site takes

  const RecentSite* find(const SiteKey& key) const {
    for (const RecentSite& recent : sites) {
      if (recent.key == key) return &recent;
    }
    return nullptr;
  }
  bool holds_code(PyCodeObject* code) const { return sites[0].key.code == code || sites[1].key.code == code; }
  void add(const SiteKey& key, std::uint32_t site) {
    sites[next_replaced] = RecentSite{key, site};
    next_replaced ^= 1;
  }
};
// Note [Call sites without the GIL]: another library's hook may ask for the call site of an operation it is inside,
// where that library released the GIL (PyTorch's operators); taking the GIL back cost such a check a sixth of its
// host time. The thread's own frames hold still meanwhile (it is the one running below them), so a site this thread
// met before is found from them without the GIL: what that lookup reads is the thread's own.
thread_local RecentSites recent_sites;  // this thread's; their code is code the caches keep
thread_local std::unordered_map<SiteKey, std::uint32_t, SiteKeyHash> known_sites_met;  // what it found in known_sites
std::unordered_map<PyCodeObject*, bool> plumbing_code;  // guarded by the GIL; keeps each code it holds
thread_local std::unordered_map<PyCodeObject*, bool> plumbing_code_met;  // what this thread asked of plumbing_code

bool is_plumbing(PyCodeObject* code) {
  auto it = plumbing_code.find(code);
  if (it == plumbing_code.end()) {
    Py_INCREF(reinterpret_cast<PyObject*>(code));
    it = plumbing_code.emplace(code, is_plumbing(py::handle(code->co_filename).cast<std::string>())).first;
  }
  plumbing_code_met.emplace(code, it->second);
  return it->second;
}

// The innermost of `frames` outside cuweave and the standard library's plumbing, as an interned call site.
std::uint32_t innermost_user_site(PythonFrames& frames) {
  for (; !frames.done(); frames.next()) {
    PyCodeObject* code = frames.code();  // borrowed
    if (!recent_sites.holds_code(code) && is_plumbing(code)) continue;
    const SiteKey key{code, frames.position()};
    if (const RecentSite* recent = recent_sites.find(key)) return recent->site;
    std::uint32_t site = 0;
    auto it = known_sites.find(key);
    if (it != known_sites.end()) {
      site = it->second;
    } else {
      Py_INCREF(reinterpret_cast<PyObject*>(code));  // kept by the cache
#if PY_VERSION_HEX >= 0x030B0000
      PyObject* function = code->co_qualname;
#else
      PyObject* function = code->co_name;
#endif
      site = trace::intern_call_site(py::handle(code->co_filename).cast<std::string>(), frames.line(),
                                     py::handle(function).cast<std::string>());
      known_sites.emplace(key, site);
    }
    recent_sites.add(key, site);
    known_sites_met.emplace(key, site);
    return site;
  }
  return 0;
}

// This thread's state where it holds the GIL, else null. From 3.12 the interpreter keeps each thread's attached
// state in a thread-local variable, null while the thread does not hold the GIL: read directly, without the
// thread-specific key PyGILState_Check looks up (a sixth of finding a call site). 3.11 keeps only the holder's,
// another thread's state that may be freed meanwhile: asked through PyGILState_Check there.
PyThreadState* gil_holding_thread() {
#if PY_VERSION_HEX >= 0x030D0000
  return PyThreadState_GetUnchecked();
#elif PY_VERSION_HEX >= 0x030C0000
  return _PyThreadState_UncheckedGet();
#else
  return PyGILState_Check() ? PyThreadState_Get() : nullptr;
#endif
}

#if CUWEAVE_INTERPRETER_FRAMES
// The innermost user's site where this thread found it before and every frame inside it is code this thread already
// found to be plumbing; 0 otherwise. It reads the thread's frames and tables only: nothing is allocated, so no
// collection can start, and the GIL is needed for none of it (Note [Call sites without the GIL]).
std::uint32_t met_user_site(PythonFrames& frames) {
  for (; !frames.done(); frames.next()) {
    PyCodeObject* code = frames.code();
    const SiteKey key{code, frames.position()};
    if (recent_sites.holds_code(code)) {
      if (const RecentSite* recent = recent_sites.find(key)) return recent->site;
    }
    const auto plumbing = plumbing_code_met.find(code);
    if (plumbing != plumbing_code_met.end() && plumbing->second) continue;  // on to its caller
    const auto known = known_sites_met.find(key);
    if (known == known_sites_met.end()) return 0;
    recent_sites.add(key, known->second);
    return known->second;
  }
  return 0;
}
#endif

// The thread whose call site stands in for a thread with no frame of the user's (Note [A stand-in call site]);
// 0: none. Python's thread ident.
std::atomic<unsigned long> stand_in_thread{0};

// Note [A stand-in call site]
// Some threads run another library's work for a thread that waits: PyTorch's autograd engine runs a backward
// pass's operators and frees on a thread of its own, whose only Python frames are the hooks', while the thread
// that called backward() waits in it. Named as nowhere, the report would lose its most useful line, so the hooks
// name a stand-in, the thread they were attached on, and such work is credited to that thread's innermost
// frame of the user's: the backward() call.
std::uint32_t stand_in_site() {
  const unsigned long ident = stand_in_thread.load(std::memory_order_relaxed);
  if (ident == 0 || ident == PyThread_get_thread_ident()) return 0;
  // Under the GIL, which thread states are added and deleted under: the list holds still while it is walked.
  for (PyThreadState* thread = PyInterpreterState_ThreadHead(PyInterpreterState_Get()); thread != nullptr;
       thread = PyThreadState_Next(thread)) {
    if (thread->thread_id != ident) continue;
    PythonFrames frames(thread);
    return innermost_user_site(frames);
  }
  return 0;
}

// The calling thread's call site. The walk may allocate (a new site's names; frame objects, on the versions that walk
// them: Note [Call sites without frame objects]), and an allocation may start a garbage collection, which runs
// finalizers: a cuweave.Stream's destructor, say, which tells the sanitizer, whose lock the caller may hold (the
// sanitizer and traces ask for call sites under their locks: a deadlock, seen in CI). So no collection starts during
// the walk; a pending one runs at the next allocation after it.
std::uint32_t python_call_site() {
  if (!Py_IsInitialized()) return 0;
  PyThreadState* const thread = gil_holding_thread();
  if (thread == nullptr) return 0;
#if CUWEAVE_INTERPRETER_FRAMES
  {
    // The usual ask (a loop's operations): a site this thread met before, found without allocating, so without holding
    // collections off.
    PythonFrames frames(thread);
    if (const std::uint32_t met = met_user_site(frames)) return met;
  }
#endif
  const int collecting = PyGC_Disable();
  std::uint32_t site = 0;
  {
    PythonFrames frames(thread);
    site = innermost_user_site(frames);
  }
  if (site == 0) site = stand_in_site();
  if (collecting) PyGC_Enable();
  return site;
}

py::object call_site_tuple(std::uint32_t id) {
  if (id == 0) return py::none();
  trace::CallSite site = trace::call_site(id);
  return py::make_tuple(site.file, site.line, site.function);
}

// `with origin:` on a helper thread makes what it issues belong to the traces of the thread that made it.
class InheritedOrigin {
 public:
  InheritedOrigin() : origin_(trace::current_origin()) {}
  bool tracing() const { return static_cast<bool>(origin_); }
  void enter() {
    CUWEAVE_EXPECTS(!scope_, "this trace origin is already entered");
    scope_ = std::make_unique<trace::OriginScope>(origin_);
  }
  void exit() { scope_.reset(); }

 private:
  trace::Origin origin_;
  std::unique_ptr<trace::OriginScope> scope_;
};

}  // namespace

std::uint32_t call_site_without_gil() noexcept {
#if CUWEAVE_INTERPRETER_FRAMES
  if (!Py_IsInitialized()) return 0;
  PyThreadState* const thread = PyGILState_GetThisThreadState();  // the thread's own, read without the GIL
  if (thread == nullptr) return 0;
  PythonFrames frames(thread);
  return met_user_site(frames);
#else
  return 0;
#endif
}

void bind_trace(py::module_& m) {
  trace::set_call_site_provider(&python_call_site);
  m.def("_set_package_directory", [](std::string directory) { package_directory = std::move(directory); });
  m.def("_is_plumbing", [](const std::string& file) { return is_plumbing(file); }, py::arg("file"),
        "Whether frames of `file` are plumbing (cuweave's, PyTorch's, CuPy's, threading's, contextlib's), never "
        "the user's call site.");
  m.def("_set_call_site_stand_in",
        [](unsigned long thread) { return stand_in_thread.exchange(thread, std::memory_order_relaxed); },
        py::arg("thread"),
        "Work issued from a thread with no frame of the user's is credited to `thread`'s (a threading ident; 0: "
        "none), which waits for it: PyTorch's autograd thread works for the thread that called backward(). Returns "
        "the stand-in it replaces.");
  m.def("_forget_call_sites", [] { trace::set_call_site_provider(nullptr); },
        "Stops reading Python frames (interpreter shutdown).");

  py::class_<trace::Session, std::shared_ptr<trace::Session>>(m, "TraceSession",
                                                             "The record of one trace (see cuweave.trace).")
      .def(py::init([](bool all_threads, std::optional<std::size_t> limit, const std::string& keep) {
             if (keep != "first" && keep != "last") {
               throw py::value_error("keep must be \"first\" or \"last\" (which events a trace with a limit keeps), not \"" +
                                     keep + "\"");
             }
             return std::make_shared<trace::Session>(all_threads, limit.value_or(trace::Session::kUnlimited),
                                                     keep == "first" ? trace::Keep::First : trace::Keep::Last);
           }),
           py::kw_only(), py::arg("all_threads") = false, py::arg("limit") = py::none(), py::arg("keep") = "last")
      .def("begin", [](const std::shared_ptr<trace::Session>& session) { trace::begin(session); },
           "Opens the trace: what this thread (or every thread) issues from now on is recorded.")
      .def("end", [](const std::shared_ptr<trace::Session>& session) {
             ReleaseGil release;
             trace::end(session);
           },
           "Closes the trace: waits for the work issued inside it, then collects what ran (the GIL is released).")
      .def_property_readonly("recording", &trace::Session::recording)
      .def_property_readonly("all_threads", &trace::Session::all_threads)
      .def_property_readonly("limit",
                             [](const trace::Session& session) -> std::optional<std::size_t> {
                               if (session.limit() == trace::Session::kUnlimited) return std::nullopt;
                               return session.limit();
                             })
      .def_property_readonly("keep",
                             [](const trace::Session& session) {
                               return session.keep() == trace::Keep::First ? "first" : "last";
                             })
      .def_property_readonly("dropped", &trace::Session::dropped,
                             "How many activities arrived beyond the limit and were not kept.")
      .def_property_readonly("backend", &trace::Session::backend)
      .def_property_readonly("begin_ns", &trace::Session::begin_ns)
      .def_property_readonly("end_ns", &trace::Session::end_ns)
      .def("activities",
           [](const trace::Session& session) {
             const std::vector<trace::Activity> activities = session.activities();
             std::unordered_map<std::uint32_t, py::object> sites;
             py::list result;
             for (const trace::Activity& a : activities) {
               auto site = sites.find(a.call_site);
               if (site == sites.end()) site = sites.emplace(a.call_site, call_site_tuple(a.call_site)).first;
               result.append(py::make_tuple(trace::to_string(a.kind), a.name, a.start_ns, a.end_ns, a.device,
                                            a.stream, a.bytes, trace::to_string(a.direction), a.correlation, a.link,
                                            site->second, a.thread, a.depth, a.graph_node));
             }
             return result;
           },
           "Everything recorded, as tuples (kind, name, start_ns, end_ns, device, stream, bytes, direction, "
           "correlation, link, call_site, thread, depth, graph_node), in arrival order.")
      .def("streams",
           [](const trace::Session& session) {
             py::list result;
             for (const trace::StreamLabel& s : session.streams()) {
               result.append(py::make_tuple(s.stream, s.device, s.kind, s.priority, s.blocking, s.name));
             }
             return result;
           },
           "What cuweave knows of the streams seen: tuples (stream, device, kind, priority, blocking, name).");

  py::class_<InheritedOrigin>(m, "_TraceOrigin",
                              "The traces this thread's operations belong to now, for a helper thread to adopt.")
      .def(py::init<>())
      .def_property_readonly("tracing", &InheritedOrigin::tracing)
      .def("__enter__", &InheritedOrigin::enter)
      .def("__exit__", [](InheritedOrigin& origin, py::handle, py::handle, py::handle) { origin.exit(); });

  m.def("trace_active", &trace::active, "True while any trace is open.");
  m.def("trace_stream_id", [](const Stream& stream) { return backend().tracer().stream_id(stream.handle(), stream.device()); },
        py::arg("stream"), "The id trace activities on `stream` carry.");
  m.def("range_push", &trace::push_range, py::arg("name"), "Opens a named range on this thread (see cuweave.range).");
  m.def("range_pop", &trace::pop_range, "Closes the innermost range this thread opened.");
  m.def("open_ranges", &trace::open_ranges, "How many ranges this thread has open.");
}

}  // namespace cuweave::bindings
