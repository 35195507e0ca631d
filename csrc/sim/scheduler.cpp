#include "sim/scheduler.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <unordered_map>

#include "sim/device_access.hpp"
#include "sim/sim_error.hpp"

namespace cuweave::sim {

namespace {
constexpr int kWorkers = 8;
constexpr auto kStallLimit = std::chrono::seconds(30);

std::optional<std::uint64_t> seed_from_environment() {
  const char* value = std::getenv("CUWEAVE_SIM_SEED");
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::stoull(value);
}
}  // namespace

namespace {
std::atomic<std::uint64_t> schedulers_made{0};
}  // namespace

Scheduler::Scheduler(DeviceAccess& access)
    : access_(access), number_(schedulers_made.fetch_add(1, std::memory_order_relaxed) + 1),
      seed_(seed_from_environment()) {
  if (seed_) {
    random_.seed(*seed_);
  } else {
    start_workers();
  }
}

Scheduler::~Scheduler() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!workers_.empty()) stop_workers(lock);
  for (SimStream* stream : streams_) delete stream;  // with what is still queued: it never runs
  for (void* memory : retired_streams_) ::operator delete(memory);
}

SimStream* Scheduler::new_stream() {
  // CUDA hands a destroyed stream's handle to a stream made later, or not; so does the simulator, the most
  // recently retired first, so that code keyed by handle meets the reuse here as on a GPU. Exploring, each new
  // stream draws whether it takes the oldest handle instead (or new memory, while few are retired): code still
  // holding a destroyed stream's handle then also meets it unreused, where CUDA crashes
  // (Handles::crash_unless_live_stream), as a stream the sanitizer asked about did on an H200.
  const bool not_the_latest = seed_ && (random_() & 1) != 0;
  void* memory = nullptr;
  if (!retired_streams_.empty() && !(not_the_latest && retired_streams_.size() < kFewRetiredStreams)) {
    auto taken = not_the_latest ? retired_streams_.begin() : retired_streams_.end() - 1;
    memory = *taken;
    retired_streams_.erase(taken);
  }
  SimStream* stream = memory != nullptr ? new (memory) SimStream : new SimStream;
  stream->id = ++streams_made_;
  streams_.push_back(stream);
  live_.insert(stream);
  return stream;
}

SimStream* Scheduler::create_stream(int device, int priority, bool blocking) {
  std::lock_guard<std::mutex> lock(mutex_);
  SimStream* stream = new_stream();
  stream->device = device;
  stream->priority = priority;
  stream->blocking = blocking;
  return stream;
}

void Scheduler::destroy_stream(SimStream* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!live_.count(stream) || stream->kind != SimStream::Kind::Regular) return;
  stream->destroyed = true;  // CUDA finishes queued work of a destroyed stream
  if (stream->queue.empty() && !stream->busy) retire(stream);
}

void Scheduler::forget_dependencies_on(const Counter* counter) {
  for (SimStream* other : streams_) {
    for (Operation& operation : other->queue) {
      auto& after = operation.after;
      after.erase(std::remove_if(after.begin(), after.end(), [counter](const Dependency& d) { return d.counter == counter; }),
                  after.end());
    }
  }
}

void Scheduler::retire(SimStream* stream) {
  // It drained, so every dependency on its counter is satisfied: drop them before the counter goes.
  forget_dependencies_on(&stream->done);
  streams_.erase(std::find(streams_.begin(), streams_.end(), stream));
  live_.erase(stream);
  stream->~SimStream();
  retired_streams_.push_back(stream);  // its memory, and so its handle, for the next stream made
}

HostFlag* Scheduler::create_host_flag() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++unraised_host_flags_;
  return new HostFlag;
}

void Scheduler::destroy_host_flag(HostFlag* flag) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (flag->raised.completed == 0) --unraised_host_flags_;
  // The core destroys a flag only after raising it: every wait queued for it is satisfied.
  forget_dependencies_on(&flag->raised);
  delete flag;
}

void Scheduler::wait_host_flag(SimStream* stream, HostFlag* flag) {
  std::lock_guard<std::mutex> lock(mutex_);
  enqueue_locked(stream, [] {}, {}, {Dependency{&flag->raised, 1}});
}

void Scheduler::raise_host_flag(HostFlag* flag) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (flag->raised.completed == 0) --unraised_host_flags_;
    flag->raised.completed = 1;
  }
  changed_.notify_all();
}

SimStream* Scheduler::legacy_stream(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (legacy_.size() <= static_cast<std::size_t>(device)) legacy_.resize(device + 1, nullptr);
  if (!legacy_[device]) {
    SimStream* stream = new_stream();
    stream->device = device;
    stream->kind = SimStream::Kind::LegacyDefault;
    legacy_[device] = stream;
  }
  return legacy_[device];
}

SimStream* Scheduler::per_thread_stream(int device) {
  // Each thread's own default stream per device, of each scheduler (a test may make one of its own).
  thread_local std::unordered_map<std::uint64_t, std::vector<SimStream*>> by_scheduler;
  std::vector<SimStream*>& mine = by_scheduler[number_];
  if (mine.size() <= static_cast<std::size_t>(device)) mine.resize(device + 1, nullptr);
  if (!mine[device]) {
    std::lock_guard<std::mutex> lock(mutex_);
    SimStream* stream = new_stream();
    stream->device = device;
    stream->kind = SimStream::Kind::PerThreadDefault;  // blocking: ordered with the legacy stream
    mine[device] = stream;
  }
  return mine[device];
}

bool Scheduler::known(const SimStream* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_.count(stream) && !stream->destroyed;
}

SimEvent* Scheduler::create_event(int device, unsigned flags) {
  auto* event = new SimEvent;
  event->device = device;
  event->flags = flags;
  std::lock_guard<std::mutex> lock(mutex_);
  live_.insert(event);
  return event;
}

void Scheduler::destroy_event(SimEvent* event) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!live_.count(event)) return;
  event->destroyed = true;
  if (event->users == 0) {
    live_.erase(event);
    delete event;
  }
}

bool Scheduler::known(const SimEvent* event) {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_.count(event) && !event->destroyed;
}

void Scheduler::implicit_dependencies(SimStream* stream, std::vector<Dependency>& after) {
  // The legacy default stream waits for all blocking streams of its device, and they wait for it.
  if (stream->kind == SimStream::Kind::LegacyDefault) {
    for (SimStream* other : streams_) {
      if (other != stream && other->device == stream->device && other->blocking &&
          other->enqueued > other->done.completed) {
        after.push_back({&other->done, other->enqueued});
      }
    }
  } else if (stream->blocking && static_cast<std::size_t>(stream->device) < legacy_.size()) {
    SimStream* legacy = legacy_[stream->device];
    if (legacy && legacy->enqueued > legacy->done.completed) after.push_back({&legacy->done, legacy->enqueued});
  }
}

std::uint64_t Scheduler::enqueue(SimStream* stream, std::function<void()> work, std::function<void()> complete,
                                 std::vector<Dependency> after, std::shared_ptr<OperationTrace> trace) {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueue_locked(stream, std::move(work), std::move(complete), std::move(after), std::move(trace));
}

std::uint64_t Scheduler::enqueue_locked(SimStream* stream, std::function<void()> work, std::function<void()> complete,
                                        std::vector<Dependency> after, std::shared_ptr<OperationTrace> trace) {
  implicit_dependencies(stream, after);
  stream->queue.push_back(
      Operation{std::move(work), std::move(complete), std::move(after), ++sequence_, std::move(trace)});
  const std::uint64_t count = ++stream->enqueued;
  if (!seed_) changed_.notify_all();
  return count;
}

void Scheduler::release_user(SimEvent* event) {
  if (--event->users == 0 && event->destroyed) {
    live_.erase(event);
    delete event;
  }
}

void Scheduler::make_progress(std::unique_lock<std::mutex>& lock) {
  if (!seed_) return;
  for (int step = std::uniform_int_distribution<int>(0, 2)(random_); step > 0; --step) {
    SimStream* stream = pick(true);
    if (!stream) break;
    run_head(stream, lock, false);
  }
}

bool Scheduler::ready(const SimStream* stream) const {
  if (stream->busy || stream->queue.empty()) return false;
  for (const Dependency& dependency : stream->queue.front().after) {
    if (dependency.counter->completed < dependency.value) return false;
  }
  return true;
}

SimStream* Scheduler::pick(bool at_random) {
  std::vector<SimStream*> candidates;
  for (SimStream* stream : streams_) {
    if (ready(stream)) candidates.push_back(stream);
  }
  if (candidates.empty()) return nullptr;
  auto more_urgent = [](const SimStream* a, const SimStream* b) {
    if (a->priority != b->priority) return a->priority < b->priority;  // numerically lower is more urgent
    return a->queue.front().sequence < b->queue.front().sequence;
  };
  if (!at_random) return *std::min_element(candidates.begin(), candidates.end(), more_urgent);
  // Priority is a preference: three times in four, choose among the most urgent streams only.
  if (std::uniform_int_distribution<int>(0, 3)(random_) != 0) {
    const int best = (*std::min_element(candidates.begin(), candidates.end(), more_urgent))->priority;
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [best](const SimStream* s) { return s->priority != best; }),
                     candidates.end());
  }
  return candidates[std::uniform_int_distribution<std::size_t>(0, candidates.size() - 1)(random_)];
}

void Scheduler::run_head(SimStream* stream, std::unique_lock<std::mutex>& lock, bool unlock_for_work) {
  Operation operation = std::move(stream->queue.front());
  stream->queue.pop_front();
  stream->busy = true;
  if (operation.trace) operation.trace->activity.start_ns = SimTracer::clock_ns();
  // On a device whose context is lost, queued work moves no data and calls no host function; its bookkeeping
  // still runs, so that nothing waits on it for ever (every call on that device fails anyway).
  if (operation.work && !access_.context_lost(stream->device)) {
    if (unlock_for_work) {
      ++running_;
      lock.unlock();
      operation.work();
      lock.lock();
      --running_;
    } else {
      operation.work();
    }
  }
  if (operation.trace) operation.trace->activity.end_ns = SimTracer::clock_ns();
  if (operation.complete) operation.complete();
  if (operation.trace) trace::deliver(operation.trace->origin, operation.trace->activity);
  stream->busy = false;
  ++stream->done.completed;
  if (stream->destroyed && stream->queue.empty()) retire(stream);
  changed_.notify_all();
}

bool Scheduler::wait_until(std::unique_lock<std::mutex>& lock, const std::function<bool()>& predicate,
                           std::chrono::steady_clock::time_point until) {
  auto last_progress = std::chrono::steady_clock::now();
  while (!predicate()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    if (seed_) {
      if (SimStream* stream = pick(true)) {
        run_head(stream, lock, false);
        last_progress = std::chrono::steady_clock::now();
        continue;
      }
    }
    // Nothing this thread can run: workers, or other host threads enqueueing, must make progress.
    const auto wake = std::min(until, std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
    if (changed_.wait_until(lock, wake) == std::cv_status::no_timeout) {
      last_progress = std::chrono::steady_clock::now();
      continue;
    }
    // Work waiting for a host flag may wait as long as the host likes (a stream-ordered callback).
    if (running_ > 0 || pick(false) != nullptr || unraised_host_flags_ > 0) {
      last_progress = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_progress > kStallLimit) {
      fail("cudaStreamSynchronize", kUnknown,
           "the host waited 30 s for queued work that can never run (a wait on work nobody queued?)");
    }
  }
  return true;
}

void Scheduler::enqueue_launch(SimStream* stream, std::vector<Step> steps, const std::vector<SimEvent*>& waits,
                               const std::vector<SimEvent*>& records, std::shared_ptr<Serial> serial,
                               std::shared_ptr<OperationTrace> trace) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Dependency>& after = steps.front().after;
  std::vector<std::shared_ptr<EventGeneration>> awaited;  // kept until the launch has run
  for (SimEvent* event : waits) {
    ++event->users;
    if (event->latest) {
      after.push_back({&event->latest->done, 1});
      awaited.push_back(event->latest);
    }
  }
  if (serial->issued > serial->done.completed) after.push_back({&serial->done, serial->issued});
  const std::uint64_t turn = ++serial->issued;
  std::vector<std::pair<SimEvent*, std::shared_ptr<EventGeneration>>> generations;
  for (SimEvent* event : records) {
    ++event->users;
    event->latest = std::make_shared<EventGeneration>();
    generations.emplace_back(event, event->latest);
  }
  Step& last = steps.back();
  last.complete = [this, waits, awaited, generations, serial, turn, then = std::move(last.complete)] {
    if (then) then();
    for (SimEvent* event : waits) release_user(event);
    for (const auto& [event, generation] : generations) {
      generation->done.completed = 1;
      generation->completed_at = std::chrono::steady_clock::now();
      release_user(event);
    }
    serial->done.completed = std::max(serial->done.completed, turn);
  };
  if (trace && steps.size() > 1) {
    // The last step carries the activity; it starts when the first step does.
    auto started = std::make_shared<std::uint64_t>(0);
    steps.front().work = [started, work = std::move(steps.front().work)] {
      *started = SimTracer::clock_ns();
      if (work) work();
    };
    last.work = [started, trace, work = std::move(last.work)] {
      trace->activity.start_ns = *started;
      if (work) work();
    };
  }
  last.trace = std::move(trace);
  for (Step& step : steps) {
    enqueue_locked(stream, std::move(step.work), std::move(step.complete), std::move(step.after),
                   std::move(step.trace));
  }
}

void Scheduler::record(SimEvent* event, SimStream* stream, std::shared_ptr<OperationTrace> trace) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto generation = event->latest = std::make_shared<EventGeneration>();
  event->link = trace ? (trace->activity.link = next_link()) : 0;
  ++event->users;
  enqueue_locked(stream, {}, [this, event, generation] {
    generation->done.completed = 1;
    generation->completed_at = std::chrono::steady_clock::now();
    release_user(event);
  }, {}, std::move(trace));
}

void Scheduler::wait(SimStream* stream, SimEvent* event, std::shared_ptr<OperationTrace> trace) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!event->latest) return;  // waiting on a never-recorded event waits for nothing, as in CUDA
  ++event->users;
  if (trace) trace->activity.link = event->link;
  // The wait keeps its recording alive until it has run, however often the event is recorded again meanwhile.
  enqueue_locked(stream, {}, [this, event, awaited = event->latest] { release_user(event); },
                 {{&event->latest->done, 1}},
                 std::move(trace));
}

void Scheduler::forget_recordings(SimEvent* event) {
  std::lock_guard<std::mutex> lock(mutex_);
  event->latest = nullptr;
}

bool Scheduler::has_recording(SimEvent* event) {
  std::lock_guard<std::mutex> lock(mutex_);
  return event->latest != nullptr;
}

bool Scheduler::event_complete(SimEvent* event) {
  std::unique_lock<std::mutex> lock(mutex_);
  make_progress(lock);
  return !event->latest || event->latest->done.completed >= 1;
}

bool Scheduler::event_done(SimEvent* event) {
  std::lock_guard<std::mutex> lock(mutex_);
  return !event->latest || event->latest->done.completed >= 1;
}

void Scheduler::release(Counter& counter) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    counter.completed = std::max<std::uint64_t>(counter.completed, 1);
  }
  changed_.notify_all();
}

bool Scheduler::synchronize_event(SimEvent* event, std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::shared_ptr<EventGeneration> target = event->latest;
  return wait_until(lock, [&] { return !target || target->done.completed >= 1; }, until);
}

double Scheduler::elapsed_ms(SimEvent* start, SimEvent* end) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!start->latest || !end->latest) {
    fail("cudaEventElapsedTime", kInvalidResourceHandle, "an event has not been recorded");
  }
  if (start->latest->done.completed < 1 || end->latest->done.completed < 1) {
    fail("cudaEventElapsedTime", kNotReady, "an event has not completed yet");
  }
  return std::chrono::duration<double, std::milli>(end->latest->completed_at - start->latest->completed_at)
      .count();
}

bool Scheduler::stream_idle(SimStream* stream) {
  std::unique_lock<std::mutex> lock(mutex_);
  make_progress(lock);
  return stream->queue.empty() && !stream->busy;
}

bool Scheduler::synchronize_stream(SimStream* stream, std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(mutex_);
  return wait_for_count(lock, stream, stream->enqueued, until);
}

void Scheduler::wait_for_count(SimStream* stream, std::uint64_t count) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_for_count(lock, stream, count, std::chrono::steady_clock::time_point::max());
}

bool Scheduler::wait_for_count(std::unique_lock<std::mutex>& lock, SimStream* stream, std::uint64_t count,
                               std::chrono::steady_clock::time_point until) {
  // A stream retires only once drained, so a retired stream has run everything it was given.
  return wait_until(lock, [&] { return !live_.count(stream) || stream->done.completed >= count; }, until);
}

bool Scheduler::synchronize_device(int device, std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::vector<std::pair<SimStream*, std::uint64_t>> targets;
  for (SimStream* stream : streams_) {
    if (stream->device == device) targets.emplace_back(stream, stream->enqueued);
  }
  return wait_until(
      lock,
      [&] {
        return std::all_of(targets.begin(), targets.end(), [&](const auto& target) {
          return !live_.count(target.first) || target.first->done.completed >= target.second;
        });
      },
      until);
}

void Scheduler::configure(std::optional<std::uint64_t> seed) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_until(
      lock,
      [&] {
        return running_ == 0 && std::all_of(streams_.begin(), streams_.end(),
                                            [](const SimStream* s) { return s->queue.empty() && !s->busy; });
      },
      TimePoint::max());
  const bool was_exploring = seed_.has_value();
  seed_ = seed;
  if (seed) random_.seed(*seed);
  if (seed && !was_exploring) stop_workers(lock);
  if (!seed && was_exploring) start_workers();
}

std::optional<std::uint64_t> Scheduler::seed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

std::optional<std::uint64_t> Scheduler::exploring_draw() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!seed_) return std::nullopt;
  return random_();
}

void Scheduler::start_workers() {
  for (int i = 0; i < kWorkers; ++i) workers_.emplace_back([this] { worker(); });
}

void Scheduler::stop_workers(std::unique_lock<std::mutex>& lock) {
  stopping_ = true;
  changed_.notify_all();
  std::vector<std::thread> workers = std::move(workers_);
  workers_.clear();
  lock.unlock();
  for (std::thread& worker : workers) worker.join();
  lock.lock();
  stopping_ = false;
}

void Scheduler::worker() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    SimStream* stream = nullptr;
    changed_.wait(lock, [&] { return stopping_ || (stream = pick(false)) != nullptr; });
    if (stopping_) return;
    run_head(stream, lock, true);
  }
}

}  // namespace cuweave::sim
