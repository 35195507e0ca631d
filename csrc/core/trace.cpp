// Trace sessions, origins and call sites (Note [Tracing] in trace.hpp).
#include "cuweave/default_stream.hpp"
#include "cuweave/services.hpp"
#include "cuweave/trace.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <unordered_map>

#include "cuweave/backend.hpp"
#include "cuweave/capture.hpp"
#include "cuweave/errors.hpp"
#include "cuweave/host_callbacks.hpp"
#include "cuweave/sanitizer.hpp"
#include "cuweave/stream.hpp"

namespace cuweave::trace {

namespace detail {
std::atomic<int> open_sessions{0};
std::atomic<int> call_sites_wanted{0};
}

const char* to_string(Kind kind) noexcept {
  switch (kind) {
    case Kind::Kernel: return "kernel";
    case Kind::Copy: return "copy";
    case Kind::Memset: return "memset";
    case Kind::EventRecord: return "event_record";
    case Kind::EventWait: return "event_wait";
    case Kind::HostCallback: return "host_callback";
    case Kind::Graph: return "graph";
    case Kind::Range: return "range";
  }
  return "unknown";
}

const char* to_string(Direction direction) noexcept {
  switch (direction) {
    case Direction::None: return "";
    case Direction::HostToDevice: return "H2D";
    case Direction::DeviceToHost: return "D2H";
    case Direction::DeviceToDevice: return "D2D";
    case Direction::HostToHost: return "H2H";
    case Direction::PeerToPeer: return "P2P";
  }
  return "";
}

namespace {

// Interned call sites; index 0 is "unknown".
struct CallSites {
  std::mutex mutex;
  std::vector<CallSite> sites{CallSite{}};                  // LOCK: mutex
  std::unordered_map<std::string, std::uint32_t> by_key;    // LOCK: mutex
};

CallSites& call_sites() {
  static auto* sites = new CallSites;  // leaked: used by threads that may outlive static destruction
  return *sites;
}

std::atomic<CallSiteProvider> provider{nullptr};

// The traces open for every thread, and all open traces (for stream labels).
struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<Session>> all_threads;  // LOCK: mutex
  std::vector<std::shared_ptr<Session>> open;         // LOCK: mutex
  std::atomic<int> all_threads_count{0};
  std::mutex start_stop;  // serializes Tracer::start/stop with the count they depend on (no CUDA under `mutex`)
};

Registry& registry() {
  static auto* instance = new Registry;  // leaked, as above
  return *instance;
}

struct ThreadState {
  std::vector<std::shared_ptr<Session>> sessions;  // this thread's open traces, innermost last
  const Origin* inherited = nullptr;               // set by OriginScope
  std::uint32_t noted_call_site = 0;               // set by CallSiteNote
  int unobserved = 0;                              // Unobserved scopes open
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

void append_recording(std::vector<std::shared_ptr<Session>>& to, const std::vector<std::shared_ptr<Session>>& from) {
  for (const auto& session : from) {
    if (session->recording() && std::find(to.begin(), to.end(), session) == to.end()) to.push_back(session);
  }
}

std::uint32_t provided_call_site() {
  CallSiteProvider current = provider.load(std::memory_order_acquire);
  return current ? current() : 0;
}

}  // namespace

std::uint32_t intern_call_site(const std::string& file, int line, const std::string& function) {
  CallSites& sites = call_sites();
  std::string key = file;
  key += '\0';
  key += std::to_string(line);
  key += '\0';
  key += function;
  std::lock_guard<std::mutex> lock(sites.mutex);
  auto [it, inserted] = sites.by_key.emplace(std::move(key), 0);
  if (inserted) {
    it->second = static_cast<std::uint32_t>(sites.sites.size());
    sites.sites.push_back(CallSite{file, line, function});
  }
  return it->second;
}

CallSite call_site(std::uint32_t id) {
  CallSites& sites = call_sites();
  std::lock_guard<std::mutex> lock(sites.mutex);
  return id < sites.sites.size() ? sites.sites[id] : CallSite{};
}

void set_call_site_provider(CallSiteProvider function) noexcept { provider.store(function, std::memory_order_release); }

std::uint64_t this_thread_id() noexcept {
  thread_local const std::uint64_t id = static_cast<std::uint64_t>(::syscall(SYS_gettid));
  return id;
}

void Session::add(Activity activity) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  if (activities_.size() < limit_) {
    activities_.push_back(std::move(activity));
    return;
  }
  ++dropped_;
  if (keep_ == Keep::First || limit_ == 0) return;
  activities_[oldest_] = std::move(activity);  // the ring overwrites its oldest
  oldest_ = (oldest_ + 1) % limit_;
}

void Session::add_stream(StreamLabel label) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  for (const StreamLabel& known : streams_) {
    if (known.stream == label.stream && known.device == label.device) return;  // the first label wins
  }
  streams_.push_back(std::move(label));
}

std::vector<Activity> Session::activities() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Activity> ordered;
  ordered.reserve(activities_.size());
  ordered.insert(ordered.end(), activities_.begin() + static_cast<std::ptrdiff_t>(oldest_), activities_.end());
  ordered.insert(ordered.end(), activities_.begin(), activities_.begin() + static_cast<std::ptrdiff_t>(oldest_));
  return ordered;
}

std::uint64_t Session::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

std::vector<StreamLabel> Session::streams() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return streams_;
}

Origin current_origin() {
  Origin origin;
  if (!active()) return origin;
  ThreadState& state = thread_state();
  if (state.unobserved > 0) return origin;
  append_recording(origin.sessions, state.sessions);
  if (state.inherited) append_recording(origin.sessions, state.inherited->sessions);
  Registry& reg = registry();
  if (reg.all_threads_count.load(std::memory_order_acquire) > 0) {
    std::lock_guard<std::mutex> lock(reg.mutex);
    append_recording(origin.sessions, reg.all_threads);
  }
  if (origin.sessions.empty()) return origin;
  origin.thread = this_thread_id();
  origin.call_site = provided_call_site();
  if (origin.call_site == 0) origin.call_site = state.noted_call_site;
  if (origin.call_site == 0 && state.inherited) origin.call_site = state.inherited->call_site;
  return origin;
}

std::uint32_t current_call_site() {
  const std::uint32_t site = provided_call_site();
  if (site != 0) return site;
  ThreadState& state = thread_state();
  if (state.noted_call_site != 0) return state.noted_call_site;
  return state.inherited ? state.inherited->call_site : 0;
}

void want_call_sites(bool wanted) noexcept {
  detail::call_sites_wanted.fetch_add(wanted ? 1 : -1, std::memory_order_relaxed);
}

Origin every_open_trace() {
  Origin origin;
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  append_recording(origin.sessions, reg.open);
  return origin;
}

void deliver(const Origin& origin, Activity activity) {
  if (activity.call_site == 0) activity.call_site = origin.call_site;
  if (activity.thread == 0) activity.thread = origin.thread;
  for (std::size_t i = 0; i + 1 < origin.sessions.size(); ++i) origin.sessions[i]->add(activity);
  if (!origin.sessions.empty()) origin.sessions.back()->add(std::move(activity));
}

void begin(const std::shared_ptr<Session>& session) {
  CUWEAVE_EXPECTS(session && !session->recording() && session->begin_ns_ == 0,
                  "this trace was already used; open a new one with cuweave.trace()");
  Registry& reg = registry();
  Backend& backend_instance = backend();
  {
    std::lock_guard<std::mutex> start_stop(reg.start_stop);
    if (detail::open_sessions.load(std::memory_order_acquire) == 0) backend_instance.tracer().start();
    session->backend_ = backend_instance.name();
    session->begin_ns_ = backend_instance.tracer().now_ns();
    session->recording_.store(true, std::memory_order_release);
    {
      std::lock_guard<std::mutex> lock(reg.mutex);
      reg.open.push_back(session);
      if (session->all_threads()) {
        reg.all_threads.push_back(session);
        reg.all_threads_count.fetch_add(1, std::memory_order_acq_rel);
      }
    }
    detail::open_sessions.fetch_add(1, std::memory_order_acq_rel);
  }
  if (!session->all_threads()) thread_state().sessions.push_back(session);
}

namespace {

// Waits until the work issued so far, host callbacks included, has completed (as far as it safely can).
void wait_for_issued_work() {
  DeviceBackend& devices = backend().devices();
  if (!Capture::any_active()) {  // a device synchronize would invalidate a capture in progress
    for (int device = 0, count = devices.device_count(); device < count; ++device) {
      devices.synchronize_device(device);
      if (sanitizer::enabled()) sanitizer::host_synchronized_device(device);  // the host waited: an ordering
    }
  }
  // A trace closed from inside a callback cannot wait for the callbacks (its own among them).
  if (HostCallbacks::running_stream() == nullptr) services().host_callbacks().wait_for_all();
}

StreamLabel label_of(const Stream::Description& stream, Tracer& tracer) {
  return StreamLabel{tracer.stream_id(stream.handle, stream.device), stream.device, stream.origin,
                     stream.priority, stream.blocking, stream.name};
}

void label_streams(Session& session, Tracer& tracer) {
  // The legacy default streams always get a lane name: other libraries' work often runs there.
  const int devices = backend().devices().device_count();
  for (int device = 0; device < devices; ++device) DefaultStream::legacy(device);
  for (const Stream::Description& stream : Stream::live()) {
    try {
      session.add_stream(label_of(stream, tracer));
    } catch (...) {
      // A stream the backend can no longer name (its device lost) gets no label: its lane says only its id.
    }
  }
}

}  // namespace

void end(const std::shared_ptr<Session>& session) {
  CUWEAVE_EXPECTS(session && session->recording(), "this trace is not open");
  if (!session->all_threads()) {
    auto& stack = thread_state().sessions;
    auto it = std::find(stack.begin(), stack.end(), session);
    CUWEAVE_EXPECTS(it != stack.end(), "a trace must be closed on the thread that opened it");
    stack.erase(it);
  }
  session->recording_.store(false, std::memory_order_release);  // no new operations join it
  Registry& reg = registry();
  Tracer& tracer = backend().tracer();
  auto close = [&] {  // whether collecting succeeded or not
    {
      std::lock_guard<std::mutex> lock(session->mutex_);
      session->closed_ = true;
    }
    {
      std::lock_guard<std::mutex> lock(reg.mutex);
      reg.open.erase(std::remove(reg.open.begin(), reg.open.end(), session), reg.open.end());
      auto it = std::find(reg.all_threads.begin(), reg.all_threads.end(), session);
      if (it != reg.all_threads.end()) {
        reg.all_threads.erase(it);
        reg.all_threads_count.fetch_sub(1, std::memory_order_acq_rel);
      }
    }
    std::lock_guard<std::mutex> start_stop(reg.start_stop);
    if (detail::open_sessions.fetch_sub(1, std::memory_order_acq_rel) == 1) tracer.stop();
  };
  try {
    wait_for_issued_work();
    tracer.flush();
    label_streams(*session, tracer);
    session->end_ns_ = tracer.now_ns();
  } catch (...) {
    close();
    throw;
  }
  close();
}

void label_stream(const StreamLabel& label) {
  Registry& reg = registry();
  std::vector<std::shared_ptr<Session>> open;
  {
    std::lock_guard<std::mutex> lock(reg.mutex);
    open = reg.open;
  }
  for (const auto& session : open) session->add_stream(label);
}

OriginScope::OriginScope(Origin origin) {
  if (!origin) return;
  origin_ = std::make_unique<Origin>(std::move(origin));
  ThreadState& state = thread_state();
  previous_ = state.inherited;
  state.inherited = origin_.get();
}

OriginScope::~OriginScope() {
  if (origin_) thread_state().inherited = previous_;
}

Unobserved::Unobserved() noexcept {
  if (!active()) return;
  ++thread_state().unobserved;
  set_ = true;
}

Unobserved::~Unobserved() {
  if (set_) --thread_state().unobserved;
}

CallSiteNote::CallSiteNote() {
  if (!active() && detail::call_sites_wanted.load(std::memory_order_relaxed) == 0) return;
  ThreadState& state = thread_state();
  previous_ = state.noted_call_site;
  const std::uint32_t site = provided_call_site();
  if (site != 0) state.noted_call_site = site;
  set_ = true;
}

CallSiteNote::CallSiteNote(std::uint32_t site) {
  if (site == 0 || (!active() && detail::call_sites_wanted.load(std::memory_order_relaxed) == 0)) return;
  ThreadState& state = thread_state();
  previous_ = state.noted_call_site;
  state.noted_call_site = site;
  set_ = true;
}

CallSiteNote::~CallSiteNote() {
  if (set_) thread_state().noted_call_site = previous_;
}

}  // namespace cuweave::trace
