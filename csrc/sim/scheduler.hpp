// Note [Simulator scheduling]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The simulator keeps CUDA's ordering rules and nothing more: work on a stream runs in order; work on
// different streams is ordered only by what the program declared (event waits) and by the legacy default
// stream's implicit synchronization with blocking streams. An operation is ready when it heads its
// stream's queue, no other operation of that stream is running, and every dependency is satisfied.
//
// Two modes:
//  * concurrent (default): worker threads run ready operations as soon as they are ready, several
//    streams at once, preferring higher priority. Like a GPU, work proceeds while the host does other things.
//  * exploring (a seed is set): nothing runs until the host waits (synchronize, an event, a query, a
//    copy into pageable memory); then ready operations run one at a time, chosen by a random generator
//    seeded with that seed, in any order the dependencies allow. Work is as late as it can be and the
//    interleaving varies with the seed, so a missing wait or a host read before a copy finished shows
//    up as a wrong result within a few seeds, and the same seed replays the same schedule.
//
// Dependencies are (counter, value) pairs: satisfied once counter.completed >= value. Each stream and
// each event has a counter. An operation's `work` moves data and may run without the scheduler's lock;
// its `complete` step updates scheduler state and always runs under the lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_set>
#include <vector>

#include "sim/sim_tracer.hpp"

namespace cuweave::sim {

struct Counter {
  std::uint64_t completed = 0;  // LOCK: Scheduler::mutex_
};

struct Dependency {
  const Counter* counter;
  std::uint64_t value;
};

struct Operation {
  std::function<void()> work;      // data movement; may run unlocked
  std::function<void()> complete;  // scheduler bookkeeping; runs under the lock
  std::vector<Dependency> after;
  std::uint64_t sequence = 0;
  std::shared_ptr<OperationTrace> trace;  // stamped and delivered when it runs; null unless traced
};

struct SimStream {
  enum class Kind { Regular, LegacyDefault, PerThreadDefault };
  std::uint64_t id = 0;  // unique, never reused: names the stream in traces
  int device = 0;
  int priority = 0;
  bool blocking = true;
  Kind kind = Kind::Regular;
  std::deque<Operation> queue;  // LOCK: Scheduler::mutex_
  bool busy = false;            // LOCK: an operation of this stream is running
  bool destroyed = false;       // LOCK: deleted once drained
  std::uint64_t enqueued = 0;   // LOCK
  Counter done;
};

// One recording of an event. Recordings on different streams complete in any order, so each has its own
// counter: a wait queued after one recording is not satisfied by a later recording that completes first.
struct EventGeneration {
  Counter done;                                           // 1 once the work before the recording has run
  std::chrono::steady_clock::time_point completed_at{};  // LOCK
};

struct SimEvent {
  int device = 0;
  unsigned flags = 0;
  std::shared_ptr<EventGeneration> latest;  // LOCK: what waits and queries refer to; null: never recorded
  std::uint64_t link = 0;      // LOCK: links the latest traced recording to the waits for it (0: untraced)
  int users = 0;               // LOCK: queued operations that refer to this event
  bool destroyed = false;      // LOCK
};

// A flag that the host raises once and streams can wait for (StreamBackend's host flags).
struct HostFlag {
  Counter raised;  // 1 once raised
};

// One of the operations that Scheduler::enqueue_launch queues together, in order, on one stream.
struct Step {
  std::function<void()> work;      // as Operation's
  std::function<void()> complete;  // as Operation's
  std::vector<Dependency> after;
  std::shared_ptr<OperationTrace> trace;
};

// Operations that must run one after another whatever streams they are queued on (the launches of one
// executable graph). Shared by the operations, so it outlives whoever queued them.
struct Serial {
  Counter done;
  std::uint64_t issued = 0;  // LOCK: Scheduler::mutex_
};

class DeviceAccess;

class Scheduler {
 public:
  // Runs operations on the streams it makes; `access` says which devices' contexts are lost (their work
  // does not run). Seeded from CUWEAVE_SIM_SEED, if set.
  explicit Scheduler(DeviceAccess& access);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  // Stops the worker threads; queued work is dropped. The process's simulator is never destroyed; a test's own is,
  // once its work is done.
  ~Scheduler();

  SimStream* create_stream(int device, int priority, bool blocking);
  void destroy_stream(SimStream* stream);
  SimStream* legacy_stream(int device);
  SimStream* per_thread_stream(int device);
  // True if `stream` is a live stream (for validating handles from outside).
  bool known(const SimStream* stream);

  SimEvent* create_event(int device, unsigned flags);
  void destroy_event(SimEvent* event);
  bool known(const SimEvent* event);

  // Queues an operation on `stream`; returns the stream's count of operations once it has run.
  std::uint64_t enqueue(SimStream* stream, std::function<void()> work, std::function<void()> complete = {},
                        std::vector<Dependency> after = {}, std::shared_ptr<OperationTrace> trace = nullptr);

  // Queues `steps` on `stream`, one operation each, in order: the first also waits for the latest recording
  // of each event of `waits` and runs after the launch queued before it through `serial`; the last records
  // each event of `records` (the new generation completes with it). `trace` spans them all, from the first's
  // start to the last's end. (A graph launch is one step, or several where it meets collectives.)
  void enqueue_launch(SimStream* stream, std::vector<Step> steps, const std::vector<SimEvent*>& waits,
                      const std::vector<SimEvent*>& records, std::shared_ptr<Serial> serial,
                      std::shared_ptr<OperationTrace> trace = nullptr);

  // `trace` (for records and waits) gets its link here.
  void record(SimEvent* event, SimStream* stream, std::shared_ptr<OperationTrace> trace = nullptr);
  // Makes `event` look never recorded (complete, waited for by nothing) until it is recorded again;
  // generations already queued still complete, unobserved.
  void forget_recordings(SimEvent* event);
  bool has_recording(SimEvent* event);
  void wait(SimStream* stream, SimEvent* event, std::shared_ptr<OperationTrace> trace = nullptr);
  HostFlag* create_host_flag();
  // Only once raised.
  void destroy_host_flag(HostFlag* flag);
  // Queues on `stream` a wait until `flag` is raised.
  void wait_host_flag(SimStream* stream, HostFlag* flag);
  void raise_host_flag(HostFlag* flag);

  bool event_complete(SimEvent* event);
  // event_complete without letting any work run first: a question from a thread other than the program's
  // (the collectives' watchdog), which must not change the schedule a seed draws.
  bool event_done(SimEvent* event);
  // Satisfies what waits for `counter` (sets it to at least 1) from outside any operation.
  void release(Counter& counter);
  // The waits answer false if `until` came first.
  using TimePoint = std::chrono::steady_clock::time_point;
  bool synchronize_event(SimEvent* event, TimePoint until = TimePoint::max());
  double elapsed_ms(SimEvent* start, SimEvent* end);

  bool stream_idle(SimStream* stream);
  bool synchronize_stream(SimStream* stream, TimePoint until = TimePoint::max());
  // Waits until the operation that made `stream`'s count reach `count` has run.
  void wait_for_count(SimStream* stream, std::uint64_t count);
  bool synchronize_device(int device, TimePoint until = TimePoint::max());

  // Exploring mode with `seed`, or concurrent mode (nullopt). Finishes all queued work first.
  void configure(std::optional<std::uint64_t> seed);
  std::optional<std::uint64_t> seed();
  // When exploring, a number from the seeded generator (to draw choices made outside the scheduler, such
  // as the order of a graph's nodes, so that a seed replays them); nullopt in concurrent mode.
  std::optional<std::uint64_t> exploring_draw();

 private:
  void implicit_dependencies(SimStream* stream, std::vector<Dependency>& after);  // caller holds the lock
  std::uint64_t enqueue_locked(SimStream* stream, std::function<void()> work, std::function<void()> complete,
                               std::vector<Dependency> after = {},
                               std::shared_ptr<OperationTrace> trace = nullptr);   // caller holds the lock
  SimStream* new_stream();                                                         // caller holds the lock
  void release_user(SimEvent* event);  // a queued operation no longer refers to `event`; caller holds the lock
  // Exploring mode: a query lets a little work run first, so that polling loops make progress.
  void make_progress(std::unique_lock<std::mutex>& lock);
  bool ready(const SimStream* stream) const;                                       // caller holds the lock
  SimStream* pick(bool at_random);                                                 // caller holds the lock
  // Runs the head operation of `stream`; the lock is held on entry and exit (released around `work`
  // in concurrent mode).
  void run_head(SimStream* stream, std::unique_lock<std::mutex>& lock, bool unlock_for_work);
  // Blocks until predicate() holds (evaluated under the lock), running work itself when exploring;
  // false if `until` came first.
  bool wait_until(std::unique_lock<std::mutex>& lock, const std::function<bool()>& predicate, TimePoint until);
  bool wait_for_count(std::unique_lock<std::mutex>& lock, SimStream* stream, std::uint64_t count, TimePoint until);
  void retire(SimStream* stream);  // caller holds the lock
  // Drops every queued dependency on `counter`, which is about to go (all are satisfied); caller holds the lock.
  void forget_dependencies_on(const Counter* counter);
  void start_workers();
  void stop_workers(std::unique_lock<std::mutex>& lock);
  void worker();

  DeviceAccess& access_;
  const std::uint64_t number_;  // never reused: keys this scheduler's per-thread default streams
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<SimStream*> streams_;            // LOCK: mutex_
  std::unordered_set<const void*> live_;       // LOCK: mutex_ (streams and events)
  std::vector<SimStream*> legacy_;             // LOCK: mutex_ (index: device)
  std::uint64_t sequence_ = 0;                 // LOCK: mutex_
  std::uint64_t streams_made_ = 0;             // LOCK: mutex_
  std::vector<void*> retired_streams_;          // LOCK: mutex_; memory of destroyed streams, reused as CUDA reuses handles
  static constexpr std::size_t kFewRetiredStreams = 8;  // below it, exploring may make a stream in new memory
  std::optional<std::uint64_t> seed_;          // LOCK: mutex_
  std::mt19937_64 random_;                     // LOCK: mutex_
  std::vector<std::thread> workers_;           // LOCK: mutex_
  bool stopping_ = false;                      // LOCK: mutex_
  int running_ = 0;                            // LOCK: operations running unlocked
  int unraised_host_flags_ = 0;                // LOCK: mutex_
};

}  // namespace cuweave::sim
