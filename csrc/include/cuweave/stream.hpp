// Stream: the owner of a backend stream, or a non-owning record of a default or foreign stream.
//
// Streams are shared (std::shared_ptr): a Python object, a pool and queued work may all refer to one.
// They are not copyable, since two owners of one handle would destroy it twice.
#pragma once

#include <atomic>
#include <cstdint>
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
  enum class Kind { Owned, Pooled, LegacyDefault, PerThreadDefault, External };

  // Creates a new stream on `device`. `priority` must lie in the device's range (checked). `name` is
  // for people (trace lanes, repr).
  static std::shared_ptr<Stream> create(int device, int priority, bool blocking, Kind kind = Kind::Owned,
                                        std::string name = {});
  // Creates a new non-blocking stream on `partition` (Note [SM partitions] in sm_partition.hpp), which it keeps
  // alive until its work has completed. Unnamed, it is named "on N SMs".
  static std::shared_ptr<Stream> create_on(std::shared_ptr<SmPartition> partition, int priority,
                                           std::string name = {});
  // The legacy default stream of `device` (one shared object per device).
  static std::shared_ptr<Stream> legacy_default(int device);
  // The per-thread default stream of `device` (one shared object per device; its handle means
  // "the calling thread's own default stream" wherever it is used).
  static std::shared_ptr<Stream> per_thread_default(int device);
  // Refers to a stream made by someone else; `owner` (the foreign object) is kept alive, the handle
  // is never destroyed by cuweave.
  static std::shared_ptr<Stream> adopt(StreamHandle handle, Hold owner);

  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

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
  Kind kind() const noexcept { return kind_; }
  const std::string& name() const noexcept { return name_; }
  // The SM partition this stream was made on, or null.
  const std::shared_ptr<SmPartition>& partition() const noexcept { return partition_; }
  bool closed() const noexcept { return closed_.load(std::memory_order_relaxed); }

  // Destroys an owned stream (work already queued still completes), and closes its adoptions. Refused for other
  // kinds.
  void close();
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
  // Records `event` after the work queued so far, as cuweave's own bookkeeping (traces do not show it).
  void record_unobserved(EventHandle event);
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
    Kind kind;
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

 private:
  Stream(StreamHandle handle, int device, int priority, bool blocking, Kind kind, Hold owner, std::string name = {});
  [[noreturn]] void throw_closed() const;
  // Closes every adoption of this stream's handle, which cuweave is about to destroy (Note [Adoptions of a handle
  // cuweave destroys] in stream.cpp).
  void close_adoptions() noexcept;
  // Records closing_event_ on the handle (left null if that fails).
  void record_closing_event() noexcept;
  // Before the handle is destroyed: the partition stays alive until the work queued so far has completed.
  void release_partition_after_work() noexcept;

  StreamHandle handle_;
  int device_;
  int priority_;
  bool blocking_;
  Kind kind_;
  const std::string name_;
  std::atomic<bool> closed_{false};
  EventHandle closing_event_ = nullptr;  // set once, by close() or the owner's close_adoptions(), before closed_
  Hold external_owner_;
  std::shared_ptr<SmPartition> partition_;
  std::mutex callback_error_mutex_;
  Hold callback_error_;  // LOCK: callback_error_mutex_
  std::uint64_t host_callbacks_launched_ = 0;  // LOCK: HostCallbacks' mutex
  std::uint64_t host_callbacks_finished_ = 0;  // LOCK: HostCallbacks' mutex
};

const char* to_string(Stream::Kind kind) noexcept;

}  // namespace cuweave
