// Note [Tracing]
// ~~~~~~~~~~~~~~
// A trace records what ran where: every kernel, copy, memset, event record and wait, host callback and
// graph replay (with its nodes) issued while it is open, with start and end on the backend's trace clock,
// the stream and device it ran on, and the Python call site that issued it. The core owns the bookkeeping
// (sessions, origins, call sites, ranges); each backend observes execution its own way and hands what ran
// to deliver() through its Tracer facet (backend.hpp):
//  * the CUDA backend through CUPTI, loaded on first use, which also sees other libraries' work;
//  * the simulator through its scheduler, which stamps each operation as it runs.
//
// Which traces an operation belongs to is decided when it is issued (current_origin()): the traces open on
// the issuing thread (nested ones included), traces opened for all threads, or the origin that a cuweave
// helper thread inherited from the thread it works for (OriginScope). So two threads tracing at once get
// separate traces. While no trace is open nothing is recorded and no hot path pays more than the relaxed
// atomic load in active(); the CUDA backend's hot paths pay nothing at all (CUPTI observes from outside).
//
// Closing a trace waits for the work issued inside it (each device is synchronized, unless a capture is
// active somewhere, where that would invalidate it) and for the host callbacks launched so far, then
// flushes the backend, so that a closed trace is complete.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cuweave::trace {

enum class Kind : std::uint8_t { Kernel, Copy, Memset, EventRecord, EventWait, HostCallback, Graph, Range };
enum class Direction : std::uint8_t { None, HostToDevice, DeviceToHost, DeviceToDevice, HostToHost, PeerToPeer };

const char* to_string(Kind kind) noexcept;
const char* to_string(Direction direction) noexcept;

// One thing that ran. Times are on the backend's trace clock (Tracer::now_ns), in nanoseconds; an event
// record or wait whose execution time the backend cannot observe has start_ns == end_ns == 0.
struct Activity {
  Kind kind = Kind::Kernel;
  Direction direction = Direction::None;
  std::string name;               // kernel name, range name, callable name; empty where the kind says it all
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  int device = -1;                // -1: the host (ranges)
  std::uint64_t stream = 0;       // the backend's stream id (Tracer::stream_id); 0 for ranges
  // (device is -1 for a CUDA event wait: CUPTI does not say; the stream's other activities and label do)
  std::uint64_t bytes = 0;        // copies and memsets
  std::uint64_t correlation = 0;  // the API call that issued it, increasing in issue order; a graph's nodes
                                  // share their replay's
  std::uint64_t link = 0;         // an event record and the waits for that recording share it (0: none)
  std::uint32_t call_site = 0;    // call_site(id); 0: unknown
  std::uint64_t thread = 0;       // the issuing host thread (native id); for ranges, the thread they ran on
  std::uint32_t depth = 0;        // ranges: how many enclosing ranges were open on the thread
  bool graph_node = false;        // ran as a node of the graph replay named by `correlation`
};

struct CallSite {
  std::string file;
  int line = 0;
  std::string function;
};

// Interns a call site; ids start at 1 (0 means unknown). Thread-safe.
std::uint32_t intern_call_site(const std::string& file, int line, const std::string& function);
CallSite call_site(std::uint32_t id);

// Installed by the bindings: the calling thread's Python call site (interned), or 0 when it cannot tell
// (no Python frame, the GIL not held). Called only while a trace takes the thread's operations.
using CallSiteProvider = std::uint32_t (*)();
void set_call_site_provider(CallSiteProvider provider) noexcept;

// What a lane is: a stream as cuweave knows it.
struct StreamLabel {
  std::uint64_t stream = 0;  // Tracer::stream_id
  int device = 0;
  std::string kind;          // Stream::origin()
  int priority = 0;
  bool blocking = true;
  std::string name;          // the user's name for the stream, possibly empty
};

// Which activities a session of bounded size keeps once it holds `limit` of them.
enum class Keep : std::uint8_t { First, Last };

// The record of one `with cuweave.trace():` block. A long program's trace grows by one Activity (about 150
// bytes with a typical kernel name) per operation; a session made with a limit keeps at most `limit`
// activities, the first or the last ones to arrive, and counts the others (dropped()), so that its memory
// stays bounded however long the program runs.
class Session {
 public:
  static constexpr std::size_t kUnlimited = static_cast<std::size_t>(-1);
  explicit Session(bool all_threads, std::size_t limit = kUnlimited, Keep keep = Keep::Last)
      : all_threads_(all_threads), limit_(limit), keep_(keep) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  bool all_threads() const noexcept { return all_threads_; }
  std::size_t limit() const noexcept { return limit_; }
  Keep keep() const noexcept { return keep_; }
  bool recording() const noexcept { return recording_.load(std::memory_order_acquire); }
  std::uint64_t begin_ns() const noexcept { return begin_ns_; }
  std::uint64_t end_ns() const noexcept { return end_ns_; }
  std::string backend() const { return backend_; }

  // Thread-safe; ignored once the session is closed.
  void add(Activity activity);
  void add_stream(StreamLabel label);
  // What was kept, in arrival order.
  std::vector<Activity> activities() const;
  // How many activities arrived beyond the limit and were not kept.
  std::uint64_t dropped() const;
  std::vector<StreamLabel> streams() const;

 private:
  friend void begin(const std::shared_ptr<Session>&);
  friend void end(const std::shared_ptr<Session>&);

  const bool all_threads_;
  const std::size_t limit_;
  const Keep keep_;
  std::atomic<bool> recording_{false};
  std::uint64_t begin_ns_ = 0;  // set by begin(), before recording
  std::uint64_t end_ns_ = 0;    // set by end(), once closed
  std::string backend_;
  mutable std::mutex mutex_;
  std::vector<Activity> activities_;  // LOCK: mutex_; with Keep::Last and full, a ring whose oldest is at oldest_
  std::size_t oldest_ = 0;            // LOCK: mutex_
  std::uint64_t dropped_ = 0;         // LOCK: mutex_
  std::vector<StreamLabel> streams_;  // LOCK: mutex_
  bool closed_ = false;               // LOCK: mutex_
};

// Where an issued operation's activity goes: the traces it belongs to, its call site and thread.
struct Origin {
  std::vector<std::shared_ptr<Session>> sessions;
  std::uint32_t call_site = 0;
  std::uint64_t thread = 0;
  explicit operator bool() const noexcept { return !sessions.empty(); }
};

namespace detail {
extern std::atomic<int> open_sessions;
extern std::atomic<int> call_sites_wanted;  // besides traces: the race sanitizer's reports
}

// True while any trace is open anywhere (one relaxed load: the only cost tracing adds when off).
inline bool active() noexcept { return detail::open_sessions.load(std::memory_order_relaxed) > 0; }

// The traces an operation the calling thread issues now belongs to, and its call site; empty when none.
Origin current_origin();
// The calling thread's Python call site now (interned; 0: unknown), traced or not: what the sanitizer
// names. Reads the Python frame when the GIL is held, else the site a CallSiteNote noted.
std::uint32_t current_call_site();
// Keeps CallSiteNote noting call sites while no trace is open (the sanitizer, while on). Counted.
void want_call_sites(bool wanted) noexcept;
// Every open trace, with no call site: for records a backend cannot attribute to a thread.
Origin every_open_trace();
// Adds `activity` (call site and thread taken from `origin` unless set) to each of the origin's sessions.
void deliver(const Origin& origin, Activity activity);

// Opens `session`: it takes the operations of the calling thread (and of helper threads working for it),
// or of every thread if it was made with all_threads. Starts the backend's collection. Nestable.
void begin(const std::shared_ptr<Session>& session);
// Closes `session` (see the Note): waits for its work, flushes, labels the streams. Call without the GIL.
void end(const std::shared_ptr<Session>& session);

// A stream is going away while traces are open: they keep its label (called by ~Stream when active()).
void label_stream(const StreamLabel& label);

// The calling thread's native id (what Python's threading.get_native_id() returns).
std::uint64_t this_thread_id() noexcept;

// Makes the operations the calling thread issues belong to `origin` while alive: for a cuweave helper
// thread working for a traced thread. An empty origin changes nothing.
class OriginScope {
 public:
  explicit OriginScope(Origin origin);
  OriginScope(const OriginScope&) = delete;
  OriginScope& operator=(const OriginScope&) = delete;
  ~OriginScope();

 private:
  std::unique_ptr<Origin> origin_;  // null when empty: nothing changed
  const Origin* previous_ = nullptr;
};

// While alive, operations the calling thread issues where no Python frame can be read (the GIL released)
// are credited to the call site current when it was made. Costs one relaxed load when no trace is open.
class CallSiteNote {
 public:
  CallSiteNote();
  // Notes `site`, found by the caller (0: notes nothing).
  explicit CallSiteNote(std::uint32_t site);
  CallSiteNote(const CallSiteNote&) = delete;
  CallSiteNote& operator=(const CallSiteNote&) = delete;
  ~CallSiteNote();

 private:
  bool set_ = false;
  std::uint32_t previous_ = 0;
};

// While alive, what the calling thread issues belongs to no trace: for cuweave's own bookkeeping (the
// events that lifetimes and staging slots follow), which would only clutter a user's timeline.
class Unobserved {
 public:
  Unobserved() noexcept;
  Unobserved(const Unobserved&) = delete;
  Unobserved& operator=(const Unobserved&) = delete;
  ~Unobserved();

 private:
  bool set_ = false;
};

}  // namespace cuweave::trace
