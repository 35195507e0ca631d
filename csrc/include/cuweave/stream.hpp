// Stream: a CUDA stream as cuweave queues work into it. Who made the CUDA stream decides what the object may do with
// it, and each case is a type of its own (as RMM's cuda_stream and cuda_stream_view):
//  * OwnedStream (owned_stream.hpp): a stream cuweave made. It is destroyed with its last reference, or by close()
//    unless a StreamPool lends it.
//  * DefaultStream (default_stream.hpp): a device's legacy or per-thread default stream, which nobody destroys.
//  * AdoptedStream (adopted_stream.hpp): a stream someone else made. It keeps its owner's object alive, never
//    destroys the handle, and closes when the cuweave stream it names closes.
// Everything else (queuing work, waits, synchronizing, lifetimes) is the same for all three and lives here.
//
// Streams are shared (std::shared_ptr): a Python object, a pool and queued work may all refer to one.
// They are not copyable, since two owners of one handle would destroy it twice.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuweave/backend.hpp"
#include "cuweave/copy_by.hpp"
#include "cuweave/hold.hpp"
#include "cuweave/strided_copy.hpp"

namespace cuweave {

class EventPool;
class Operation;
class SmPartition;

// enable_shared_from_this: an operation's arrays follow the stream it went to (submission.hpp).
class Stream : public std::enable_shared_from_this<Stream> {
 public:
  // CUDA's two default streams, which synchronize implicitly with other streams: which one this is, if any.
  enum class Default : unsigned char { None, Legacy, PerThread };

  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  virtual ~Stream();

  // The backend handle; throws InvalidArgument once the stream is closed.
  StreamHandle handle() const {
    if (closed_.load(std::memory_order_relaxed)) throw_closed();
    return handle_;
  }
  StreamHandle raw_handle() const noexcept { return handle_; }
  int device() const noexcept { return device_; }
  // Whether `other` queues into the same CUDA stream (each device's legacy default stream has handle 0).
  bool same_queue(const Stream& other) const noexcept {
    return handle_ == other.handle_ && device_ == other.device_;
  }
  int priority() const noexcept { return priority_; }
  bool blocking() const noexcept { return blocking_; }
  Default default_stream() const noexcept { return default_; }
  bool is_legacy_default() const noexcept { return default_ == Default::Legacy; }
  // Whether this names a stream someone else made (an AdoptedStream).
  bool adopted() const noexcept { return adopted_; }
  // Whether cuweave made the CUDA stream and destroys it (an OwnedStream, lent by a pool or not).
  bool made_by_cuweave() const noexcept { return default_ == Default::None && !adopted_; }
  // Whether a StreamPool lends this stream: the pool's to destroy, not its user's to close.
  bool lent_by_pool() const noexcept { return lent_by_pool_; }
  // Whether its user may close it (an OwnedStream no pool lends): its handle may go at any time, and CUDA may give
  // it to the next stream made, cuweave's or another library's.
  bool closable() const noexcept { return made_by_cuweave() && !lent_by_pool_; }
  // Where the stream comes from, for people (repr, trace lanes): "owned", "pooled", "legacy_default",
  // "per_thread_default" or "external".
  const char* origin() const noexcept;
  const std::string& name() const noexcept { return name_; }
  // The SM partition this stream was made on, or null.
  const std::shared_ptr<SmPartition>& partition() const noexcept { return partition_; }
  bool closed() const noexcept { return closed_.load(std::memory_order_relaxed); }

  // Destroys a stream cuweave made and no pool lends (work already queued still completes), and closes its
  // adoptions (OwnedStream::close). Refused for every other stream, which is not its user's to destroy.
  virtual void close();
  // Once closed: an event recorded just before the stream was destroyed, complete once the work queued on it
  // is (null if it could not be recorded). Lifetimes of that work wait for it; valid while this object lives.
  EventHandle closing_event() const noexcept { return closing_event_; }
  // Once closed: true when the work queued before it closed has completed (also when no event could be recorded:
  // then nothing of it runs any more).
  bool closed_work_complete();

  // Blocks the calling thread until all queued work, host callbacks included, has completed.
  // Callers release the GIL.
  void synchronize();
  // True when all queued work has completed.
  bool idle();
  // Makes later work on this stream wait for `event` (no host synchronization).
  void wait(EventHandle event);
  // Records `event` (of this stream's device) after the work queued so far, seen by the sanitizer and traces.
  void record(EventHandle event);
  // Records `event` after the work queued so far, as cuweave's own bookkeeping (traces do not show it).
  void record_unobserved(EventHandle event);
  // As record, an event taken from `pool`, which the caller gives back.
  EventHandle record_pooled(EventPool& pool);
  // As record_unobserved, an event taken from `pool`, which the caller gives back.
  EventHandle record_pooled_unobserved(EventPool& pool);
  // Makes later work on this stream wait for all work queued on `other` so far.
  void wait(Stream& other);
  // Makes later work on this stream wait for the work queued so far on each of `writers` (DeviceArray::writers())
  // but itself; a closed one's work through the event it recorded as it closed. Returns the waits queued.
  std::size_t wait_for(const std::vector<std::shared_ptr<Stream>>& writers);

  // Keeps `holds` alive until the work queued so far has completed (nothing to do when empty).
  void hold(Holds holds);

  // Stream-ordered operations: each makes its backend call through the one submission path (submission.hpp),
  // on this stream, for `operation`, which describes what the call touches and keeps alive.
  // Note: none of these synchronizes the stream.
  void copy_async(Operation& operation, void* destination, const void* source, std::size_t bytes,
                  CopyBy by = CopyBy::CopyEngine);
  // A copy between the memory of two devices, this stream's and another (Note [Copies between devices]).
  void copy_between_devices(Operation& operation, void* destination, int destination_device, const void* source,
                            int source_device, std::size_t bytes);
  void memset_async(Operation& operation, void* destination, int value, std::size_t bytes);
  void fill_async(Operation& operation, void* destination, std::size_t count, const void* pattern,
                  std::size_t pattern_bytes);
  void copy_strided_async(Operation& operation, const StridedCopy& copy);
  void arithmetic_async(Operation& operation, const Arithmetic& arithmetic);
  // `scratch`: null, or KernelBackend::sum_scratch_bytes(count) bytes that `operation` keeps alive.
  void sum_async(Operation& operation, void* out, const void* x, std::size_t count, NumericType type, void* scratch);
  // Sets `condition` of the graph this stream captures into (Note [Conditional nodes]).
  void set_condition_async(Operation& operation, ConditionHandle condition, const ConditionRule& rule);
  void spin_async(Operation& operation, std::uint64_t nanoseconds, unsigned blocks, std::uint64_t* start_time);
  // Host callbacks launched / finished on this stream (see Note [Host callbacks off the backend thread]);
  // both are guarded by HostCallbacks' mutex.
  void count_host_callback_launched() noexcept { ++host_callbacks_launched_; }
  void count_host_callback_finished() noexcept { ++host_callbacks_finished_; }
  std::uint64_t host_callbacks_launched() const noexcept { return host_callbacks_launched_; }
  std::uint64_t host_callbacks_finished() const noexcept { return host_callbacks_finished_; }

  // What a trace needs to name a stream's lane.
  struct Description {
    StreamHandle handle;
    int device;
    const char* origin;  // origin()
    int priority;
    bool blocking;
    std::string name;
  };
  Description describe() const;
  // Every stream object alive now that is not closed (for naming trace lanes).
  static std::vector<Description> live();

  // A host function that failed stores its error here (opaque to the core); synchronize() callers take it.
  void store_callback_error(Hold error);
  Hold take_callback_error();

 protected:
  // What the final type says of the CUDA stream it names.
  struct Origin {
    Default default_stream = Default::None;
    bool adopted = false;
    bool lent_by_pool = false;
  };
  Stream(StreamHandle handle, int device, int priority, bool blocking, Origin origin, std::string name = {});

  // Leaves the sanitizer, the set of live streams and open traces (which label its lane now). Each final type's
  // destructor calls it before it lets go of anything the handle needs (its destroy, an adoption's owner); then a
  // trace or the sanitizer never asks about a handle that is gone. Runs once.
  void retire() noexcept;
  // An open trace keeps the label of a stream that goes away (or closes) before it ends.
  void label_in_open_traces() const noexcept;
  // Calls `visit` for every live stream, the set's lock held: none can finish its destructor meanwhile.
  static void for_each_live(const std::function<void(Stream&)>& visit);
  // Records closing_event_ on the handle (left null if that fails).
  void record_closing_event() noexcept;
  void mark_closed() noexcept { closed_.store(true); }
  [[noreturn]] virtual void throw_closed() const;

  std::shared_ptr<SmPartition> partition_;  // set by OwnedStream::create_on

 private:
  StreamHandle handle_;
  int device_;
  int priority_;
  bool blocking_;
  const Default default_;
  const bool adopted_;
  const bool lent_by_pool_;
  const std::string name_;
  std::atomic<bool> closed_{false};
  EventHandle closing_event_ = nullptr;  // set once as it closes (record_closing_event), before closed_
  bool retired_ = false;
  std::mutex callback_error_mutex_;
  Hold callback_error_;  // LOCK: callback_error_mutex_
  std::uint64_t host_callbacks_launched_ = 0;  // LOCK: HostCallbacks' mutex
  std::uint64_t host_callbacks_finished_ = 0;  // LOCK: HostCallbacks' mutex
};

}  // namespace cuweave
