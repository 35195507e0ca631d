// The stream-race sanitizer's hooks (Note [What the sanitizer sees] in sanitizer.hpp).
#include "cuweave/sanitizer.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "cuweave/capture.hpp"
#include "cuweave/device_array.hpp"
#include "cuweave/host_write_watch.hpp"
#include "cuweave/stream.hpp"
#include "cuweave/trace.hpp"

namespace cuweave::sanitizer {

namespace detail {
std::atomic<int> enabled_count{0};
std::atomic<bool> ever_enabled{false};
}

namespace {

std::string stream_name(const Stream& stream);

// "0x..." without the ostream insertion of a pointer, which jumped to address 0 inside libstdc++ on the
// GPU machine (its Python process loads another libstdc++ than the one cuweave was built against).
std::string hex_address(std::uintptr_t address) {
  char digits[2 * sizeof(address) + 1];
  const auto result = std::to_chars(digits, digits + sizeof(digits), address, 16);
  return "0x" + std::string(digits, result.ptr);
}

// Note [Races inside a capture]: work issued into a capture runs only at replay, ordered by the graph's
// edges, which are what the capture's event records and waits made. So a capture gets a detector of its
// own, where only those order its streams (issue order from the host orders nothing in a graph): a race
// between two branches of the graph is reported while capturing. What the captured work touches, all of
// it, is then what each replay touches, as one operation on the replay stream.
// Its agents are CUDA streams, by handle and device (Note [One agent per CUDA stream]): PyTorch's operators on a
// torch.cuda.ExternalStream of the capturing stream come through a new adoption each, which is the same
// stream; and a stream object's address, once freed, may be another stream's.
struct CaptureDomain {
  RaceDetector detector;
  std::map<std::pair<StreamHandle, int>, AgentId> streams;
  std::unordered_map<EventHandle, VectorClock> events;
  std::vector<Access> accesses;

  AgentId agent(const Stream& stream) {
    const std::pair<StreamHandle, int> key{stream.raw_handle(), stream.device()};
    auto it = streams.find(key);
    if (it != streams.end()) return it->second;
    const AgentId made = detector.new_agent(stream_name(stream));
    streams.emplace(key, made);
    return made;
  }
};

// What the hooks know about streams, events and threads, next to the detector.
struct State {
  std::mutex mutex;
  RaceDetector detector;
  std::vector<Mode> modes;                                       // LOCK: mutex; innermost last
  std::unordered_map<const Stream*, AgentId> streams;            // LOCK: mutex
  // The entry of `streams` found last: a loop's operations are on one stream (LOCK: mutex; erased with it).
  const Stream* last_stream = nullptr;
  AgentId last_agent = 0;
  std::unordered_map<int, AgentId> legacy_streams;               // LOCK: mutex; by device
  std::unordered_map<int, std::unordered_set<AgentId>> blocking;  // LOCK: mutex; blocking streams by device
  std::unordered_map<int, std::unordered_set<AgentId>> by_device;  // LOCK: mutex; every stream agent
  std::unordered_map<EventHandle, VectorClock> events;           // LOCK: mutex; the clock each recorded
  std::unordered_map<const void*, VectorClock> frees_follow;     // LOCK: mutex; see free_follows()
  std::unordered_map<std::uint64_t, VectorClock> held;           // LOCK: mutex; see held_until_complete()
  std::uint64_t next_held = 0;                                   // LOCK: mutex
  VectorClock frees_after_seen;  // LOCK: mutex; the work the lifetime tracker saw complete, which frees follow
  std::vector<Conflict> deferred;  // LOCK: mutex; found where they could not be raised (a free in a destructor) or
                                   // before the operation that raises them (Note [Foreign synchronizes])
  std::unordered_map<const Capture*, std::unique_ptr<CaptureDomain>> captures;  // LOCK: mutex
  // Adopted streams with work the host has not been seen to wait for (Note [Foreign synchronizes]).
  std::unordered_map<AgentId, const Stream*> foreign_pending;  // LOCK: mutex; alive: stream_destroyed erases
  // Note [One agent per CUDA stream]: every cuweave.Stream naming one CUDA stream (the one that made it,
  // and its adoptions: the user's Stream.from_external, the PyTorch hooks', a DLPack consumer's) is one
  // agent, its program order one; the agent and how many Stream objects use it, by CUDA handle. (Default
  // streams are one object per device already, and their handles are the same on every device.) A stream
  // cuweave made and closed may have its handle reused: closing ends its part (see stream_destroyed). Another
  // library's stream outlives its adoptions, so its agent stays when the last adoption goes (count 0): what a
  // short-lived adoption ordered (the wait of a DLPack export for its consumer's stream) still orders the
  // next adoption's work. Should the owner destroy it and a new stream get its handle, the new one goes on as
  // the old one's agent; that can hide a race only between work queued before and after that reuse.
  std::unordered_map<StreamHandle, std::pair<AgentId, std::size_t>> by_handle;  // LOCK: mutex
  // Adopted streams whose owner reports its synchronizes (owner_reports_synchronizes), by CUDA handle; kept
  // across sanitize() blocks (the adoption that told it lives on), gone when a stream cuweave made takes the
  // handle.
  std::unordered_set<StreamHandle> synchronizes_reported;  // LOCK: mutex
  HostWriteWatch host_writes;  // LOCK: mutex; Note [Host writes under a copy]
  // Note [Reused blocks] in race_detector.hpp: another library's blocks in use, by first byte, and those it
  // freed and has not handed out again (at most kMostReleased, the oldest dropped first).
  struct ForeignBlock {
    std::uintptr_t end = 0;
    AgentId allocating = 0;         // the stream whose pool it came from, and goes back to
    std::vector<AgentId> recorded;  // streams recorded on the block (record_stream)
  };
  struct ReleasedBlock {
    std::uintptr_t end = 0;
    AgentId allocating = 0;
    VectorClock released_after;
    OperationInfo freed;
    std::uint64_t order = 0;  // when it was freed, to drop the oldest
  };
  std::map<std::uintptr_t, ForeignBlock> foreign_blocks;     // LOCK: mutex
  std::map<std::uintptr_t, ReleasedBlock> released_blocks;   // LOCK: mutex
  std::uint64_t releases = 0;                                // LOCK: mutex
  // Note [Agents that are gone] in race_detector.hpp: agents of streams gone, not yet dropped; the next attempt
  // to drop them comes when they are this many (twice what a failed attempt left: amortized over the streams).
  std::vector<AgentId> gone;                                 // LOCK: mutex
  std::size_t next_drop = kFirstDrop;                        // LOCK: mutex
  static constexpr std::size_t kFirstDrop = 64;
};
// Freed blocks remembered until handed out again: a block freed and never reused at the same bytes (the
// allocator split or merged it) goes after this many later frees, and its bytes, handed out again, then start
// afresh as bytes first seen (a race there may go unreported; none is reported falsely).
constexpr std::size_t kMostReleased = 1 << 16;

State& state() {
  static auto* s = new State;  // leaked: hooks may run during static destruction
  return *s;
}

std::atomic<Reporter> reporter{nullptr};

std::string stream_name(const Stream& stream) {
  std::string name;
  switch (stream.default_stream()) {
    case Stream::Default::Legacy: name = "the legacy default stream"; break;
    case Stream::Default::PerThread: name = "the per-thread default stream"; break;
    case Stream::Default::None:
      name = "stream";
      if (!stream.name().empty()) name += " '" + stream.name() + "'";
      name += " (" + hex_address(reinterpret_cast<std::uintptr_t>(stream.raw_handle())) + ")";
  }
  return name + " of device " + std::to_string(stream.device());
}

// Whether `stream` shares its agent with the other Stream objects of its CUDA handle (Note [One agent per
// CUDA stream]).
bool shared_by_handle(const Stream& stream) {
  return stream.adopted() || stream.closable();
}

AgentId new_stream_agent_locked(State& s, const Stream& stream);

// The agent of `stream` (made on first sight). LOCK: state().mutex held.
AgentId stream_agent_locked(State& s, const Stream& stream) {
  if (&stream == s.last_stream) return s.last_agent;
  auto it = s.streams.find(&stream);
  const AgentId agent = it != s.streams.end() ? it->second : new_stream_agent_locked(s, stream);
  s.last_stream = &stream;
  s.last_agent = agent;
  return agent;
}

// The agent of a stream not in `streams` yet: its handle's, or a new one. LOCK: state().mutex held.
AgentId new_stream_agent_locked(State& s, const Stream& stream) {
  // A closed stream (its free, queued after its work) is no longer the agent of its handle, which CUDA may have
  // given to a stream made since.
  const bool by_handle = shared_by_handle(stream) && !stream.closed();
  if (by_handle) {
    auto shared = s.by_handle.find(stream.raw_handle());
    if (shared != s.by_handle.end() && shared->second.second == 0 && stream.closable()) {
      // A stream cuweave just made took the handle of another library's stream that is gone: a new agent.
      s.by_handle.erase(shared);
      s.synchronizes_reported.erase(stream.raw_handle());
      shared = s.by_handle.end();
    }
    if (shared != s.by_handle.end()) {
      ++shared->second.second;
      s.streams.emplace(&stream, shared->second.first);
      return shared->second.first;
    }
  }
  const AgentId agent = s.detector.new_agent(stream_name(stream));
  s.streams.emplace(&stream, agent);
  if (by_handle) s.by_handle.emplace(stream.raw_handle(), std::make_pair(agent, 1));
  s.by_device[stream.device()].insert(agent);
  if (stream.is_legacy_default()) {
    s.legacy_streams[stream.device()] = agent;
  } else if (stream.blocking() || stream.default_stream() == Stream::Default::PerThread) {
    // The per-thread default stream synchronizes with the legacy one as blocking streams do.
    s.blocking[stream.device()].insert(agent);
  }
  return agent;
}

// The host's agent: one for every thread. Python threads order their work among themselves through what
// the sanitizer cannot see (queues, locks, the GIL), so a host synchronize made by one thread counts for
// all: races between host threads' own issue order go unreported, and no false report comes from memory
// that one thread waited for and another reuses. LOCK: state().mutex held.
constexpr const char* kHostAgent = "the host";
AgentId host_agent_locked(State& s) {
  static const AgentId agent = s.detector.new_agent(kHostAgent);
  return agent;
}

const Capture* capture_of(const Stream& stream);
bool in_others_capture(const Stream& stream);

// After the host's clock grew: the copies it now follows whose host bytes changed since they were queued
// (Note [Host writes under a copy]), found at this call site. LOCK: state().mutex held.
std::vector<Conflict> host_writes_caught_locked(State& s) {
  if (s.host_writes.size() == 0) return {};
  const AgentId host = host_agent_locked(s);
  return s.host_writes.host_caught_up(s.detector.snapshot(host), OperationInfo{kHostWrite, trace::current_call_site()},
                                      s.detector.agent_name(host));
}

// The stream of `agent` is gone: once enough such agents have gathered, those nothing refers to any more leave
// every clock and every device's list (Note [Agents that are gone] in race_detector.hpp). Never throws: it runs
// where streams are destroyed, and an agent kept costs only time. LOCK: state().mutex held.
void agent_gone_locked(State& s, AgentId agent) noexcept {
  try {
    s.gone.push_back(agent);
    if (s.gone.size() < s.next_drop) return;
    // Where the sanitizer itself still uses an agent: its streams' other adoptions, blocks of another library,
    // watched copies, streams asked about.
    std::unordered_set<AgentId> in_use;
    for (const auto& entry : s.streams) in_use.insert(entry.second);
    for (const auto& entry : s.by_handle) in_use.insert(entry.second.first);
    for (const auto& entry : s.legacy_streams) in_use.insert(entry.second);
    for (const auto& entry : s.foreign_pending) in_use.insert(entry.first);
    for (const auto& entry : s.foreign_blocks) {
      in_use.insert(entry.second.allocating);
      in_use.insert(entry.second.recorded.begin(), entry.second.recorded.end());
    }
    for (const auto& entry : s.released_blocks) in_use.insert(entry.second.allocating);
    s.host_writes.agents_in_use(in_use);
    const std::vector<AgentId> dropped = s.detector.drop_gone(s.gone, in_use);
    if (!dropped.empty()) {
      const std::unordered_set<AgentId> out(dropped.begin(), dropped.end());
      for (auto& device : s.by_device) {
        std::unordered_set<AgentId>& agents = device.second;
        for (auto it = agents.begin(); it != agents.end();) it = out.count(*it) != 0 ? agents.erase(it) : std::next(it);
      }
      for (auto& entry : s.events) s.detector.prune(entry.second);
      for (auto& entry : s.frees_follow) s.detector.prune(entry.second);
      for (auto& entry : s.held) s.detector.prune(entry.second);
      s.detector.prune(s.frees_after_seen);
      for (auto& entry : s.released_blocks) s.detector.prune(entry.second.released_after);
      s.gone.erase(std::remove_if(s.gone.begin(), s.gone.end(), [&out](AgentId a) { return out.count(a) != 0; }),
                   s.gone.end());
    }
    s.next_drop = std::max(State::kFirstDrop, 2 * s.gone.size());
  } catch (...) {
    // Out of memory in the bookkeeping: the agents stay, to be tried again with the next one gone.
  }
}

// Note [Foreign synchronizes]
// A stream adopted from another library (Stream.from_external: a PyTorch or CuPy stream) is often waited
// for by its owner (torch.cuda.Stream.synchronize(), cupy's), a call that goes straight to CUDA where the
// sanitizer cannot see it; every later use of what that stream wrote would be reported, falsely. So for
// adopted streams only, the sanitizer asks CUDA: one found idle before an operation counts as waited for
// by the host. The same holds for another library's operations on any stream (foreign_operation): CuPy's
// kernels on the legacy default stream, then cupy.cuda.Device().synchronize(). This can miss a race on an
// adopted stream whose work happened to finish in time (never on cuweave's own work, whose synchronizes it
// sees), and it never reports one that did not happen.
// An owner that tells the sanitizer its synchronizes (PyTorch: its GPU trace reports each one; see
// owner_reports_synchronizes) is taken at its word instead, and its streams are never asked: work on them is
// ordered by what the owner reports, as PyTorch's own sanitizer orders it, so a race is named whether or not
// the earlier kernel had finished by then. The default streams have no one owner: PyTorch's operations on them
// say so themselves (foreign_operation's synchronizes_reported), and are never asked about either (found idle,
// a batch's read on PyTorch's default stream would order the reuse of its block that raced with it).
// The question is asked whenever cuweave checks an operation, before it queues anything of its own on the
// adopted stream (see free_follows). A stream taking part in a capture, cuweave's or its owner's (CuPy's
// Stream.begin_capture), is not asked: a query would invalidate the capture. The host writes this lets it
// catch are reported by the next report(). LOCK: state().mutex held.
void observe_foreign_synchronizes_locked(State& s) {
  bool host_advanced = false;
  for (auto it = s.foreign_pending.begin(); it != s.foreign_pending.end();) {
    bool idle = false;
    bool unanswerable = false;
    if (capture_of(*it->second) == nullptr && !in_others_capture(*it->second)) {
      try {
        idle = backend().streams().stream_idle(it->second->raw_handle());
      } catch (...) {
        // The context failed: no answer will come, and its work stays unordered (as without this rule), rather
        // than asked about at every operation. (A stream its owner destroyed must never be asked about: CUDA crashes
        // on a destroyed handle, so an adoption must not outlive its stream.)
        unanswerable = true;
      }
    }
    if (unanswerable) {
      it = s.foreign_pending.erase(it);
    } else if (idle) {
      s.detector.join(host_agent_locked(s), it->first);
      host_advanced = true;
      it = s.foreign_pending.erase(it);
    } else {
      ++it;
    }
  }
  if (host_advanced) {
    std::vector<Conflict> caught = host_writes_caught_locked(s);
    s.deferred.insert(s.deferred.end(), caught.begin(), caught.end());
  }
}

// Work queued on `stream`: an adopted stream's, or another library's on any stream (`foreign`), is watched for
// a synchronize made elsewhere. LOCK: held.
void note_queued_locked(State& s, const Stream& stream, AgentId agent, bool foreign = false) {
  if ((foreign || stream.adopted()) && s.synchronizes_reported.count(stream.raw_handle()) == 0) {
    s.foreign_pending[agent] = &stream;
  }
}

// The legacy default stream's implicit synchronization (CUDA's default-stream rules): work on it waits
// for every blocking stream of its device, and work on a blocking stream waits for it. LOCK: held.
void implicit_synchronization_locked(State& s, const Stream& stream, AgentId agent) {
  // The usual stream (non-blocking, cuweave's own) synchronizes with no other: two lookups saved per operation.
  if (!stream.blocking() && stream.default_stream() == Stream::Default::None) return;
  const int device = stream.device();
  if (stream.is_legacy_default()) {
    for (AgentId other : s.blocking[device]) s.detector.join(agent, other);
  } else if (s.blocking[device].count(agent) != 0) {
    auto legacy = s.legacy_streams.find(device);
    if (legacy != s.legacy_streams.end()) s.detector.join(agent, legacy->second);
  }
}

// The capture `stream` takes part in, or null.
const Capture* capture_of(const Stream& stream) {
  if (!Capture::any_active()) return nullptr;
  return Capture::of(stream).get();  // alive while it captures; its domain goes when it ends
}

// Note [Work another library captures]
// Another library's capture (torch.cuda.graph, CuPy's Stream.begin_capture) turns the work queued on its stream
// into a graph that runs at each of its replays, which cuweave does not see. Taken as work done now, it would be
// reported against what the replays are ordered with (a false race), and asking CUDA whether such a stream is
// idle would invalidate the capture. So operations, event records and waits on a stream taking part in a
// capture that cuweave did not begin are not checked where they are queued; PyTorch's graphs are checked at
// their replays instead (cuweave/_torch_hooks.py tells the sanitizer each replay's reads and writes), and a
// CuPy graph's launches go unchecked. Only adopted streams are asked about (one cudaStreamGetCaptureInfo per
// operation on one, while the sanitizer is on; other libraries' work reaches the sanitizer through adoptions):
// cuweave begins every capture of the streams it made.
bool in_others_capture(const Stream& stream) {
  // The legacy default stream is never captured, and asking about it while a blocking stream captures is an
  // error of its own.
  if (!stream.adopted() || stream.closed()) return false;
  try {
    return backend().capture().capture_state(stream.raw_handle()).status != CaptureState::Status::None &&
           capture_of(stream) == nullptr;
  } catch (const BackendError&) {
    return false;  // the context failed: no capture can be going on there
  }
}

// The detector of `capture`'s graph. LOCK: state().mutex held.
CaptureDomain& domain_locked(State& s, const Capture* capture) {
  std::unique_ptr<CaptureDomain>& domain = s.captures[capture];
  if (!domain) domain = std::make_unique<CaptureDomain>();
  return *domain;
}

// Races found where nothing could raise (a free in a destructor) come first, with this call's. LOCK: s.mutex held.
void take_deferred_locked(State& s, std::vector<Conflict>& conflicts) {
  if (s.deferred.empty()) return;
  conflicts.insert(conflicts.begin(), s.deferred.begin(), s.deferred.end());
  s.deferred.clear();
}

// Raises, warns of or ignores the races found, as the innermost sanitize() block says.
void raise_found(std::vector<Conflict> conflicts) {
  if (conflicts.empty()) return;
  Mode current;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    current = s.modes.empty() ? Mode::Raise : s.modes.back();
  }
  if (current == Mode::Ignore) return;
  if (current == Mode::Raise) throw RaceFound(std::move(conflicts));
  if (Reporter r = reporter.load(std::memory_order_acquire)) {
    r(conflicts);
  } else {
    std::fprintf(stderr, "cuweave sanitizer: %s\n", describe(conflicts).c_str());
  }
}

void report(std::vector<Conflict> conflicts) {
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    take_deferred_locked(s, conflicts);
  }
  raise_found(std::move(conflicts));
}

// The two fixes of a reuse, in the words of the library whose allocator reused the block.
std::string reuse_fixes(const Reuse& r) {
  switch (r.allocator) {
    case Allocator::CuPy:
      // CuPy's pool has no record_stream: the old array must outlive the reading stream's work instead.
      return "fix either: keep the old array alive until the first's stream has passed its use (CuPy has no "
             "record_stream: hold a reference until that stream, or an event recorded on it after the use, is "
             "synchronized), or make " + r.allocating_agent + " wait for the first's stream before the new "
             "allocation (CuPy: stream.wait_event(other.record()))";
    case Allocator::PyTorch: break;
  }
  return "fix either: record the first's stream on the old tensor after its use (PyTorch: "
         "tensor.record_stream(stream)), or make " + r.allocating_agent + " wait for the first's stream before the "
         "new allocation (PyTorch: stream.wait_stream(other))";
}

std::string site_text(std::uint32_t id) {
  if (id == 0) return "an unknown call site (no Python frame)";
  const trace::CallSite site = trace::call_site(id);
  return site.file + ":" + std::to_string(site.line) + " in " + site.function;
}

}  // namespace

void enable(Mode mode) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.modes.empty()) {
      // Turned on afresh: what happened while it was off (synchronizes, frees, reuse) went unseen, so the
      // history from an earlier block would report races that were ordered meanwhile.
      s.detector.forget(0, std::numeric_limits<std::uintptr_t>::max());
      s.frees_follow.clear();
      s.held.clear();
      s.frees_after_seen = VectorClock();
      s.host_writes.clear();
      s.foreign_pending.clear();  // and asking about them would still step the simulator's schedule
      s.foreign_blocks.clear();
      s.released_blocks.clear();
      s.events.clear();
      s.deferred.clear();
    }
    s.modes.push_back(mode);
  }
  trace::want_call_sites(true);
  detail::ever_enabled.store(true, std::memory_order_relaxed);
  detail::enabled_count.fetch_add(1, std::memory_order_relaxed);
}

void disable() {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.modes.empty()) return;
    s.modes.pop_back();
  }
  trace::want_call_sites(false);
  detail::enabled_count.fetch_sub(1, std::memory_order_relaxed);
}

Mode mode() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.modes.empty() ? Mode::Raise : s.modes.back();
}

RaceFound::RaceFound(std::vector<Conflict> conflicts)
    : std::runtime_error(describe(conflicts)), conflicts_(std::move(conflicts)) {}

void set_reporter(Reporter r) noexcept { reporter.store(r, std::memory_order_release); }

std::string describe(const std::vector<Conflict>& conflicts) {
  std::ostringstream out;
  for (std::size_t i = 0; i < conflicts.size(); ++i) {
    const Conflict& c = conflicts[i];
    if (i > 0) out << "\n";
    if (c.first_run_only) {  // stepped views: their shared bytes are runs; counting them all costs a walk
      out << "race on bytes from " << hex_address(c.begin) << " (the first " << std::to_string(c.end - c.begin)
          << " bytes both touch; a stepped view may share more further on):\n";
    } else {
      out << "race on " << std::to_string(c.end - c.begin) << " bytes at " << hex_address(c.begin) << ":\n";
    }
    out
        << "  " << to_string(c.earlier_kind) << " by " << c.earlier.name << " on " << c.earlier_agent << "\n"
        << "      at " << site_text(c.earlier.call_site) << "\n"
        << "  " << to_string(c.later_kind) << " by " << c.later.name << " on " << c.later_agent << "\n"
        << "      at " << site_text(c.later.call_site) << "\n";
    if (c.reuse) {
      const Reuse& r = *c.reuse;
      out << "  the first used the block's previous holder, which was then freed\n"
          << "      at " << site_text(r.freed.call_site) << "\n"
          << "  and its allocator handed the block out again on " << r.allocating_agent << " while the first "
          << "could still be running\n"
          << "      at " << site_text(r.handed_out.call_site) << "\n"
          << "  " << reuse_fixes(r);
    } else if (c.earlier_kind == AccessKind::Free) {
      out << "  the memory was freed before this use";
    } else if (c.later.name == kHostWrite) {
      out << "  the host changed these bytes while the copy could still read them (found where the host "
             "waited for the copy, the second place): write them only after waiting for the copy "
             "(transfer.wait(), a synchronize or an event)";
    } else if (c.later_agent == kHostAgent) {
      out << "  the host " << (c.later_kind == AccessKind::Read ? "read" : "changed") << " these bytes while the "
          << "first could still " << (c.earlier_kind == AccessKind::Write ? "write" : "read") << " them: make the "
          << "host wait for the first before this (a synchronize of its stream, or of an event recorded after it; "
          << "PyTorch: torch.cuda.current_stream().synchronize())";
    } else {
      out << "  nothing orders the first before the second: make the second wait for the first "
             "(an event recorded after the first and waited for by the second's stream, or a synchronize)";
    }
  }
  return out.str();
}

namespace {

// The races an operation on a stream that `capture` captures meets in its graph.
std::vector<Conflict> check_captured(Stream& stream, std::string_view name, AccessSpan accesses,
                                     const Capture* capture) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  CaptureDomain& domain = domain_locked(s, capture);
  domain.accesses.insert(domain.accesses.end(), accesses.begin(), accesses.end());
  std::vector<Conflict> conflicts = domain.detector.operation(domain.agent(stream), std::string(name) + ", captured,",
                                                              trace::current_call_site(), accesses);
  take_deferred_locked(s, conflicts);
  return conflicts;
}

// The races an operation queued on `stream` now meets. `foreign`: another library's operation whose synchronizes
// are not reported (Note [Foreign synchronizes]).
std::vector<Conflict> check_queued(Stream& stream, std::string_view name, AccessSpan accesses, bool foreign) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.foreign_pending.empty()) observe_foreign_synchronizes_locked(s);
  const AgentId agent = stream_agent_locked(s, stream);
  s.detector.enqueue(host_agent_locked(s), agent);
  implicit_synchronization_locked(s, stream, agent);
  std::vector<Conflict> conflicts = s.detector.operation(agent, name, trace::current_call_site(), accesses);
  note_queued_locked(s, stream, agent, foreign);
  take_deferred_locked(s, conflicts);  // under this lock: taking a second one cost a sixteenth of the check
  return conflicts;
}

// Each list of races is made once, where it is found, and handed on without copies or moves: the empty lists of
// an operation that met none cost a twentieth of the check in temporaries.
void check_operation(Stream& stream, std::string_view name, AccessSpan accesses, bool foreign) {
  if (in_others_capture(stream)) return;  // Note [Work another library captures]
  const Capture* capture = capture_of(stream);
  std::vector<Conflict> conflicts =
      capture ? check_captured(stream, name, accesses, capture) : check_queued(stream, name, accesses, foreign);
  if (!conflicts.empty()) raise_found(std::move(conflicts));
}

}  // namespace

void operation(Stream& stream, std::string_view name, AccessSpan accesses) {
  check_operation(stream, name, accesses, false);
}

void foreign_operation(Stream& stream, std::string_view name, AccessSpan accesses,
                       bool synchronizes_reported) {
  if (Capture::any_active()) {
    // Its nodes are seen work (Note [Footprints of captures]).
    if (const std::shared_ptr<Capture> capture = Capture::of(stream)) capture->foreign_operation_seen();
  }
  check_operation(stream, name, accesses, !synchronizes_reported);
}

// Note [Host operations of another library]
// PyTorch copies between its streams and pinned CPU tensors without waiting (non_blocking=True), and its CPU
// operators then read or change those tensors on the host: the copies are stream operations that touch host
// bytes, and the CPU operators are operations of the host agent, ordered after a stream's work only by a
// synchronize the host made (PyTorch reports each). A read of a pinned tensor that a copy is still writing is
// the race a GPU-to-CPU copy read without a synchronize makes.
void foreign_host_operation(std::string name, AccessSpan accesses) {
  std::vector<Conflict> conflicts;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.foreign_pending.empty()) observe_foreign_synchronizes_locked(s);
    conflicts = s.detector.operation(host_agent_locked(s), OperationInfo{std::move(name), trace::current_call_site()},
                                     accesses);
  }
  report(std::move(conflicts));
}

void event_recorded(EventHandle event, Stream& stream) {
  State& s = state();
  if (in_others_capture(stream)) return;  // a node of that graph (Note [Work another library captures])
  if (const Capture* capture = capture_of(stream)) {
    std::lock_guard<std::mutex> lock(s.mutex);
    CaptureDomain& domain = domain_locked(s, capture);
    domain.events[event] = domain.detector.snapshot(domain.agent(stream));
    return;
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  const AgentId agent = stream_agent_locked(s, stream);
  s.detector.enqueue(host_agent_locked(s), agent);
  implicit_synchronization_locked(s, stream, agent);
  s.events[event] = s.detector.snapshot(agent);
  note_queued_locked(s, stream, agent);
}

void stream_waited_event(Stream& stream, EventHandle event) {
  State& s = state();
  if (in_others_capture(stream)) return;  // a dependency of that graph (Note [Work another library captures])
  if (const Capture* capture = capture_of(stream)) {
    std::lock_guard<std::mutex> lock(s.mutex);
    CaptureDomain& domain = domain_locked(s, capture);
    auto recorded = domain.events.find(event);
    if (recorded != domain.events.end()) domain.detector.join(domain.agent(stream), recorded->second);
    return;
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  auto recorded = s.events.find(event);
  if (recorded == s.events.end()) return;  // recorded before the sanitizer was on, or never: orders nothing known
  s.detector.join(stream_agent_locked(s, stream), recorded->second);
}

void stream_waited_stream(Stream& stream, Stream& other) {
  State& s = state();
  const Capture* capture = capture_of(stream);
  if (capture || capture_of(other)) {
    if (capture != capture_of(other)) return;  // one side outside the capture: CUDA refuses that join
    std::lock_guard<std::mutex> lock(s.mutex);
    CaptureDomain& domain = domain_locked(s, capture);
    domain.detector.join(domain.agent(stream), domain.agent(other));
    return;
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  const AgentId waiter = stream_agent_locked(s, stream);
  const AgentId waited = stream_agent_locked(s, other);
  s.detector.enqueue(host_agent_locked(s), waited);  // the record on `other` that the wait waits for
  s.detector.join(waiter, waited);
}

void host_synchronized_stream(Stream& stream) {
  State& s = state();
  std::vector<Conflict> conflicts;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    const AgentId agent = stream_agent_locked(s, stream);
    s.detector.join(host_agent_locked(s), agent);
    s.foreign_pending.erase(agent);
    conflicts = host_writes_caught_locked(s);
  }
  report(std::move(conflicts));
}

void host_synchronized_event(EventHandle event) {
  State& s = state();
  std::vector<Conflict> conflicts;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto recorded = s.events.find(event);
    if (recorded == s.events.end()) return;
    s.detector.join(host_agent_locked(s), recorded->second);
    conflicts = host_writes_caught_locked(s);
  }
  report(std::move(conflicts));
}

void host_synchronized_device(int device) {
  State& s = state();
  std::vector<Conflict> conflicts;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    const AgentId host = host_agent_locked(s);
    for (AgentId agent : s.by_device[device]) s.detector.join(host, agent);
    conflicts = host_writes_caught_locked(s);
  }
  report(std::move(conflicts));
}

void host_waited_for_readers(const void* pointer, std::size_t bytes) {
  State& s = state();
  std::vector<Conflict> conflicts;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    const auto begin = reinterpret_cast<std::uintptr_t>(pointer);
    conflicts = s.host_writes.readers_done(begin, begin + bytes, OperationInfo{kHostWrite, trace::current_call_site()},
                                           s.detector.agent_name(host_agent_locked(s)));
  }
  report(std::move(conflicts));
}

void host_callback_returned(const Stream& stream) noexcept {
  try {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.host_writes.size() == 0) return;
    auto agent = s.streams.find(&stream);
    if (agent != s.streams.end()) s.host_writes.rebaseline(agent->second);
  } catch (...) {
    // A lock that failed: the watch keeps its old checksums, which can only report more.
  }
}

void copy_writes_host(Stream& stream, const void* destination, std::size_t bytes) {
  if (capture_of(stream)) return;  // a replay writes the bytes, not this call
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const AgentId agent = stream_agent_locked(s, stream);
  const AgentId host = host_agent_locked(s);
  const auto begin = reinterpret_cast<std::uintptr_t>(destination);
  std::vector<Conflict> caught =
      s.host_writes.device_writes(begin, begin + bytes, agent, s.detector.snapshot(agent).get(agent),
                                  s.detector.snapshot(host), OperationInfo{kHostWrite, trace::current_call_site()},
                                  s.detector.agent_name(host));
  // Reported by the next report(): the caller goes on to queue the copy and hold what it uses.
  s.deferred.insert(s.deferred.end(), caught.begin(), caught.end());
}

void copy_reads_host(Stream& stream, const void* source, std::size_t bytes) {
  if (capture_of(stream)) return;  // a replay reads the bytes, not this call
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const AgentId agent = stream_agent_locked(s, stream);
  const auto begin = reinterpret_cast<std::uintptr_t>(source);
  if (s.host_writes.device_write_pending(begin, begin + bytes, s.detector.snapshot(host_agent_locked(s)))) return;
  s.host_writes.watch(begin, begin + bytes, agent, s.detector.snapshot(agent).get(agent),
                      OperationInfo{"copy", trace::current_call_site()}, s.detector.agent_name(agent));
}

void allocated(const void* pointer, std::size_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(pointer);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.detector.forget(begin, begin + bytes);
  s.host_writes.forget(begin, begin + bytes);
  s.frees_follow.erase(pointer);
}

void foreign_handed_out(const void* pointer, std::size_t bytes, Stream& stream, Allocator allocator) {
  const auto begin = reinterpret_cast<std::uintptr_t>(pointer);
  const std::uintptr_t end = begin + bytes;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const AgentId agent = stream_agent_locked(s, stream);
  // Checked as a reuse only when the bytes come back to the stream whose pool they went back to, as they do in
  // PyTorch's caching allocator: bytes first seen now, or seen on another stream's pool (the allocator gave
  // them back to the driver, which synchronizes, and allocated anew), start afresh.
  std::shared_ptr<Reuse> reuse;
  bool elsewhere = false;
  auto it = s.released_blocks.upper_bound(begin);
  if (it != s.released_blocks.begin() && std::prev(it)->second.end > begin) --it;
  while (it != s.released_blocks.end() && it->first < end) {
    if (it->second.allocating != agent) {
      elsewhere = true;
    } else {
      if (!reuse) {
        reuse = std::make_shared<Reuse>();
        reuse->freed = it->second.freed;
        reuse->handed_out = OperationInfo{"allocation", trace::current_call_site()};
        reuse->allocating_agent = s.detector.agent_name(agent);
        reuse->allocator = allocator;
      }
      reuse->released_after.join(it->second.released_after);  // what the allocator waited for at each free
    }
    it = s.released_blocks.erase(it);
  }
  if (reuse && !elsewhere) {
    s.detector.reused(begin, end, std::move(reuse));
  } else {
    s.detector.forget(begin, end);
  }
  s.host_writes.forget(begin, end);
  s.frees_follow.erase(pointer);
  s.foreign_blocks[begin] = State::ForeignBlock{end, agent, {}};
}

void foreign_stream_recorded(const void* pointer, Stream& stream) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.foreign_blocks.upper_bound(address);
  if (it == s.foreign_blocks.begin() || std::prev(it)->second.end <= address) return;  // not seen handed out
  std::vector<AgentId>& recorded = std::prev(it)->second.recorded;
  const AgentId agent = stream_agent_locked(s, stream);
  if (std::find(recorded.begin(), recorded.end(), agent) == recorded.end()) recorded.push_back(agent);
}

void foreign_freed(const void* pointer) {
  const auto begin = reinterpret_cast<std::uintptr_t>(pointer);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto block = s.foreign_blocks.find(begin);
  if (block == s.foreign_blocks.end()) return;  // handed out before the sanitizer watched
  State::ReleasedBlock released{block->second.end, block->second.allocating, {},
                                OperationInfo{"free", trace::current_call_site()}, ++s.releases};
  for (AgentId recorded : block->second.recorded) released.released_after.join(s.detector.snapshot(recorded));
  s.foreign_blocks.erase(block);
  s.released_blocks[begin] = std::move(released);
  if (s.released_blocks.size() > kMostReleased) {
    auto oldest = std::min_element(s.released_blocks.begin(), s.released_blocks.end(),
                                   [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
    s.released_blocks.erase(oldest);
  }
}

void owner_reports_synchronizes(const Stream& stream) {
  if (!stream.adopted()) return;  // cuweave's own and default streams: seen already
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.synchronizes_reported.insert(stream.raw_handle());
  // Its agent, made now if new, has no pending work to ask CUDA about any more.
  s.foreign_pending.erase(stream_agent_locked(s, stream));
}

void free_follows(const void* pointer, Stream& stream) {
  if (capture_of(stream)) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // Asked before cuweave queues its own bookkeeping on `stream` (an event after its work so far), which
  // would make an adopted stream look busy to the question.
  if (!s.foreign_pending.empty()) observe_foreign_synchronizes_locked(s);
  s.frees_follow[pointer].join(s.detector.snapshot(stream_agent_locked(s, stream)));
}

std::uint64_t held_until_complete(Stream& stream) noexcept {
  try {
    if (in_others_capture(stream)) return 0;
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    // Only a stream the sanitizer knows has work it tracks; asking must not make an agent (a stream being
    // destroyed hands the tracker its last Holds after the sanitizer let it go, and its handle may be reused).
    auto known = s.streams.find(&stream);
    if (known == s.streams.end()) return 0;
    const std::uint64_t point = ++s.next_held;
    s.held.emplace(point, s.detector.snapshot(known->second));
    return point;
  } catch (...) {
    return 0;  // out of memory in the bookkeeping: later frees merely look unordered after this work
  }
}

void held_complete(std::uint64_t point) noexcept {
  if (point == 0) return;
  try {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    auto held = s.held.find(point);
    if (held == s.held.end()) return;  // forgotten as the sanitizer was turned on afresh
    s.frees_after_seen.join(held->second);
    s.held.erase(held);
  } catch (...) {
    // Out of memory in the bookkeeping: later frees merely look unordered after this work.
  }
}

void freed(const void* pointer, std::size_t bytes, const Stream& stream) noexcept {
  try {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.foreign_pending.empty()) observe_foreign_synchronizes_locked(s);
    const AgentId agent = stream_agent_locked(s, stream);
    s.detector.enqueue(host_agent_locked(s), agent);
    // After the streams it follows and what the host saw complete (Note [Releases the host saw complete]).
    auto follows = s.frees_follow.find(pointer);
    const VectorClock* followed = follows != s.frees_follow.end() ? &follows->second : nullptr;
    const auto begin = reinterpret_cast<std::uintptr_t>(pointer);
    std::vector<Conflict> conflicts =
        s.detector.operation(agent, "free", trace::current_call_site(), {{begin, begin + bytes, AccessKind::Free}},
                             OrderedAfter{followed, &s.frees_after_seen});
    if (followed) s.frees_follow.erase(follows);
    s.deferred.insert(s.deferred.end(), conflicts.begin(), conflicts.end());
  } catch (...) {
    // Out of memory in the sanitizer's own bookkeeping: the free itself must still happen.
  }
}

std::optional<std::vector<Access>> capture_ended(const Capture& capture) noexcept {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.captures.find(&capture);
  if (it == s.captures.end()) return std::nullopt;
  std::vector<Access> accesses = std::move(it->second->accesses);
  s.captures.erase(it);
  return accesses;
}

void stream_destroyed(const Stream& stream) noexcept {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.streams.find(&stream);
  if (it == s.streams.end()) {
    if (stream.closable()) {
      // cuweave destroys this handle now, though only its adoptions met the sanitizer (a stream lent to another
      // library as __cuda_stream__): their agent, and what its owner was said to report, go with it. Kept, a later
      // adoption of a stream that takes the same handle would inherit them, and a synchronize it made unseen
      // would never count (a false race).
      auto shared = s.by_handle.find(stream.raw_handle());
      if (shared != s.by_handle.end()) {
        s.foreign_pending.erase(shared->second.first);
        s.by_handle.erase(shared);
      }
      s.synchronizes_reported.erase(stream.raw_handle());
    }
    return;
  }
  // The agent's clock stays in the detector (its accesses may still be compared); only the mapping goes,
  // so that a new stream at the same address is a new agent.
  const AgentId agent = it->second;
  s.streams.erase(it);
  if (s.last_stream == &stream) s.last_stream = nullptr;
  if (shared_by_handle(stream)) {
    auto shared = s.by_handle.find(stream.raw_handle());
    if (shared != s.by_handle.end() && --shared->second.second > 0) {
      // The stream's other objects go on as the agent; an adopted one notes pending work again at its next
      // operation.
      auto pending = s.foreign_pending.find(agent);
      if (pending != s.foreign_pending.end() && pending->second == &stream) s.foreign_pending.erase(pending);
      return;
    }
    if (stream.adopted() && shared != s.by_handle.end()) {
      s.foreign_pending.erase(agent);  // its owner's stream goes on: the agent stays (count 0)
      return;
    }
    if (shared != s.by_handle.end()) s.by_handle.erase(shared);
    s.synchronizes_reported.erase(stream.raw_handle());  // a later stream of this handle is another's
  }
  for (auto& device : s.blocking) device.second.erase(agent);
  s.foreign_pending.erase(agent);
  agent_gone_locked(s, agent);
}

void closed_stream_gone(const Stream& stream) noexcept {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.streams.find(&stream);
  if (it == s.streams.end()) return;
  const AgentId agent = it->second;
  s.streams.erase(it);
  if (s.last_stream == &stream) s.last_stream = nullptr;
  for (auto& device : s.blocking) device.second.erase(agent);
  s.foreign_pending.erase(agent);
  agent_gone_locked(s, agent);
}

void event_destroyed(EventHandle event) noexcept {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.events.erase(event);
}

std::size_t bytes_of(NumericType type, std::size_t count) noexcept {
  switch (type) {
    case NumericType::Float32:
    case NumericType::Int32: return 4 * count;
    case NumericType::Float64:
    case NumericType::Int64: return 8 * count;
  }
  return 0;
}

Access touches(const DeviceArray& array, AccessKind kind) {
  if (array.size() == 0) return {0, 0, kind};
  const auto [begin, end] = array.byte_span();
  return {begin, end, kind};
}

std::size_t shadow_ranges() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.detector.shadow_ranges();
}

ClockSizes clock_sizes() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return ClockSizes{s.detector.agents(), s.detector.largest_clock()};
}

}  // namespace cuweave::sanitizer
