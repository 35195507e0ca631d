// Weave: sequential code placed on concurrent streams (`with cuweave.weave():`), ordered by what each
// operation reads and writes.
//
// Note [Weaving]
// ~~~~~~~~~~~~~~
// A weave has strands: strand 0 is the thread's current stream when the block begins, the others are streams the
// weave may choose, and a stream named inside the block (`stream=`, or made current by `with stream:`) becomes
// a strand that the weave tracks but never chooses. Each operation arrives with the bytes it reads and writes
// (its Operation's accesses, which the sanitizer checks too: Note [One operation, one path]) before it is
// queued, and place() does three things:
//  1. Dependencies. A shadow map from byte ranges to their last writer and the readers since (at most one
//     per strand) gives what the operation must follow: the last writer of what it reads or writes (RAW,
//     WAW) and, for what it writes, the readers since (WAR). Bytes the block has not touched were last
//     written before it, by the entry: strand 0's work up to the block. Only the latest dependency per strand
//     counts, since a strand runs in order. A stepped view's access past 64 runs of bytes is kept beside the
//     map with its writer and readers, as the sanitizer keeps it (Note [Stepped accesses]): the map's segments
//     under it keep the history of the bytes between its elements.
//  2. The strand. A strand whose last operation is a dependency continues that chain (strand 0 first: work left
//     on the thread's current stream needs no wait when the block ends). Otherwise the least recently used
//     strand takes it, so independent branches spread over the strands.
//  3. The waits. Each strand keeps a vector clock: for every strand, the last of its operations this strand's
//     next work already follows. A dependency the clock covers needs nothing (a chain, or an earlier
//     wait that implied it); one that another needed wait implies is skipped too; the rest are one event
//     wait each, and the wait joins the clock that the event carries.
// An event (a seal) marks an operation's completion for other strands. It is recorded lazily, when a wait
// first needs it, while the operation is still its strand's last one; and before a strand goes on past an
// operation whose results others may still need (the bytes it wrote not all overwritten by the next
// operation), because an event recorded later would include the later work too, and nothing tells the weave
// whether another strand will read them. What an operation only read is not sealed so: a later writer of those
// bytes on another strand waits for a seal recorded when it needs one, further along the reader's strand, which
// may make it wait for more work than the read, in exchange for no record per reading operation (a kernel
// that reads its weights and writes its output is a chain of its own). So the records are one per completion
// some strand waited for plus those online seals: a chain that overwrites what it writes records nothing; the
// entry is sealed once, as strand 0 goes on past it. tests/python/test_weave_counts.py compares
// both with Taskflow's round-robin levels and CUDASTF's stream context on the same DAGs.
//
// Memory: an allocation in the block is an operation of the strand it is ordered on (or part of the operation
// just placed there, whose output it is), writing its bytes, so a user on another strand waits for it; the
// free follows every strand that used the memory (Note [Memory follows its stream]).
// What the weave cannot see into counts as touching everything, so all work before it precedes it and all
// work after follows it: a conditional node (its bodies are captured on their own streams, which pass
// through) and a graph replay of unknown footprint (Note [Graph footprints]).
// Work it cannot see at all (another library's, a raw launch) it does not order: Python's Weave.step()
// declares such work's reads and writes, and PyTorch's operators are declared by a dispatch mode (Note
// [PyTorch under a weave]).
//
// Several devices: an operation goes to a strand of the device its data lives on (what it writes, else what it
// reads; else the weave's own device). The first operation on another device than the weave's adds as many
// strands there as the weave has of its own, streams kept for later weaves. Waits between strands of two devices
// are event waits as any others (CUDA orders a stream after another device's event). A copy between devices is
// one operation of the destination's device. Bytes of another device that the block has not touched were not
// written by strand 0's work but by their arrays' writers (Note [Host reads follow the writer]): an operation
// that follows the entry for such bytes also waits for those streams. Under a capture the weave stays on its
// own device.
// An operation that reads another device's array than its own reads a copy of it on its device instead, made
// by an operation of its own (a copy between devices, placed and ordered like any other, so it overlaps other
// work): the weave keeps the copy for later readers on that device until something in the block writes the
// array's bytes, or the array is gone. Not under a capture, nor for a strided view (copy it across first).
//
// Under a capture (the weave begun on a capturing stream), the same decisions are the graph's edges: an
// event records the capture's dependencies at that point, so a wait adds exactly the edge to the sealed
// operation. Each other strand joins the capture before its first operation through the entry's seal, and
// leaving joins every strand back, as a capture requires. A capture begun on the current stream inside the
// block pauses the weave until it ends, and work on a stream of another capture (a graph function's, a
// conditional body's) passes through untouched: that capture orders it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "cuweave/race_detector.hpp"
#include "cuweave/recycled_blocks.hpp"

namespace cuweave {

class Capture;
class DeviceArray;
class Event;
class Stream;

struct WeaveCounts {
  std::size_t operations = 0;           // operations placed (allocations included)
  std::size_t records = 0;              // events recorded to order strands
  std::size_t waits = 0;                // stream waits queued
  std::vector<std::size_t> per_stream;    // operations per strand, strand 0 first
};

class Weave {
 public:
  // Starts weaving on this thread: `first` is the thread's current stream (strand 0), `others` the streams the
  // weave may place work on besides it. Throws InvalidArgument when a weave is active on this thread.
  static std::shared_ptr<Weave> begin(std::shared_ptr<Stream> first, std::vector<std::shared_ptr<Stream>> others);
  // Starts weaving on this thread's current stream (strand 0) and `count - 1` more of its device: streams that no
  // other weave holds now, kept between weaves and taken in the same order each time, so that a loop of weaves
  // keeps each array on the stream it used before; on an SM partition, streams made for the block on it. Throws
  // InvalidArgument when a weave is active on this thread.
  static std::shared_ptr<Weave> begin_on_current(std::size_t count);
  // The weave active on this thread, or null (one thread-local load).
  static Weave* active() noexcept { return active_; }

  Weave(const Weave&) = delete;
  Weave& operator=(const Weave&) = delete;
  ~Weave();

  // Strand 0 waits for every strand's work that it does not already follow (no host synchronization); the
  // weave is no longer active, and its spare streams go back for the next weaves. Idempotent. Throws what a
  // record or wait throws (the weave ends anyway).
  void end();

  // The stream for an operation touching `accesses`, after queuing the waits they need: `chosen` when given
  // (a strand the weave tracks but does not choose), else the current stream when a `with stream:` inside the
  // block changed it, else the weave's choice among its strands of `device` (-1: the weave's own device). Work
  // on a stream of another capture, or of a conditional body, passes through untracked. `placed`: the operation
  // placed, where there is one: the streams that wrote its arrays before the block are followed where that data is
  // another device's (asked only of an operation that follows the entry, never of a chain's step).
  std::shared_ptr<Stream> place(sanitizer::AccessSpan accesses, std::shared_ptr<Stream> chosen,
                                int device = -1, const cuweave::Operation* placed = nullptr);
  // Memory just allocated in `stream`'s order: later users elsewhere wait for the allocation.
  void allocated(const void* pointer, std::size_t bytes, const Stream& stream);

  // The copy of `source`'s bytes on `device` made in this block (Note [Weaving]: several devices), while nothing
  // placed since has written those bytes; null otherwise.
  std::shared_ptr<DeviceArray> copy_on(const DeviceArray& source, int device) const;
  void keep_copy(const std::shared_ptr<DeviceArray>& source, std::shared_ptr<DeviceArray> copy);

  WeaveCounts counts() const;
  // Whether the weave chooses the streams of operations given none now, outside any capture: not begun on a
  // capturing stream, no `with stream:` inside the block, no capture begun on its first stream since.
  bool chooses_streams() const;
  // Strand 0's capture as the weave began (the weave's decisions are that graph's edges); null outside any.
  const std::shared_ptr<Capture>& capture() const noexcept { return capture_; }
  // The device of the weave's own streams.
  int device() const noexcept { return device_; }
  // The streams of the strands, strand 0 first.
  std::vector<std::shared_ptr<Stream>> streams() const;

 private:
  struct Seal;
  struct Operation;
  // A counted reference to one of the weave's operations, which live in operation_memory_. The count is not
  // atomic: a weave is used by the thread it is active on (std::shared_ptr's atomic counts were a good part of a
  // step's own work). Defined in weave.cpp, the only user.
  class OperationRef {
   public:
    OperationRef() noexcept = default;
    inline explicit OperationRef(Operation* operation) noexcept;  // counts `operation` once more
    inline OperationRef(const OperationRef& other) noexcept;
    OperationRef(OperationRef&& other) noexcept : operation_(other.operation_) { other.operation_ = nullptr; }
    inline OperationRef& operator=(const OperationRef& other) noexcept;
    inline OperationRef& operator=(OperationRef&& other) noexcept;
    inline ~OperationRef();

    Operation* get() const noexcept { return operation_; }
    Operation* operator->() const noexcept { return operation_; }
    explicit operator bool() const noexcept { return operation_ != nullptr; }
    bool operator==(const OperationRef& other) const noexcept { return operation_ == other.operation_; }
    bool operator!=(const OperationRef& other) const noexcept { return operation_ != other.operation_; }

   private:
    Operation* operation_ = nullptr;
  };
  struct Strand;
  struct DeviceCopy {
    std::weak_ptr<DeviceArray> source;
    std::uintptr_t begin = 0;  // the source's bytes
    std::uintptr_t end = 0;
    std::shared_ptr<DeviceArray> copy;
  };
  struct Segment {
    std::uintptr_t end = 0;
    OperationRef write;               // the entry for bytes written before the block
    std::vector<OperationRef> reads;  // since the write; at most one per strand
  };
  // A stepped view's bytes, kept beside the shadow map as the sanitizer keeps them (Note [Stepped accesses]).
  struct SteppedBytes {
    BytePattern bytes;
    OperationRef write;               // null: only read here (the map and the entry hold the writer)
    std::vector<OperationRef> reads;  // since the write; at most one per strand
  };

  Weave() = default;
  void start(std::shared_ptr<Stream> first, std::vector<std::shared_ptr<Stream>> others);
  // The streams taken from the spare ones, back for the next weaves (as the weave ends, or goes).
  void give_back_streams() noexcept;

  int find_strand(const Stream& stream) const;  // -1: not a strand
  int add_strand(std::shared_ptr<Stream> stream, bool placeable);
  // True when work on `stream` (strand `strand`, or -1) belongs to another capture's order than the weave's.
  bool passes_through(const Stream& stream, int strand) const;
  // The strand an operation touching `accesses` continues without a wait or a seal, or -1: it writes exactly the
  // bytes its strand's last operation alone touched, which nothing has touched since (the usual step of a chain).
  // `chosen`: the strand named, or -1 when the weave chooses one of `device`. Leaves those bytes' segments in
  // continued_.
  int continued_strand(sanitizer::AccessSpan accesses, int chosen, int device);
  // needed_ = the latest operation per strand that an operation touching `accesses` must follow.
  void collect_dependencies(sanitizer::AccessSpan accesses);
  // The strand of `device` for the operation whose dependencies needed_ holds.
  int choose_strand(int device) const;
  // Adds the weave's count of placeable strands on `device` (Note [Weaving]: several devices).
  void add_device(int device);
  // Queues on `strand` the waits that make it follow every operation in needed_.
  void order_after(int strand);
  // The sealed operation a wait for `operation` waits for: `operation`, its seal recorded now if it is its strand's
  // last operation; else the strand's last one, sealed now.
  Operation* sealed_for(Operation* operation);
  void seal_last(int strand);
  // Seals `strand`'s last operation when an operation touching `accesses` would leave some of its bytes as it
  // made them (others may still need them alone).
  void seal_unless_overwritten(int strand, sanitizer::AccessSpan accesses);
  // A new last operation on `strand` (seal first, as needed); the caller sets the strand's last_touched.
  OperationRef extend(int strand);
  // `operation` as the newest of `strand`: its tick the strand's next, and counted.
  void count_in(int strand, Operation& operation);
  OperationRef make_operation(int strand, std::uint64_t tick);
  void record(const sanitizer::Access& access, const OperationRef& operation);
  void record_stepped(const sanitizer::Access& access, const OperationRef& operation);
  // The streams outside the weave that wrote `placed`'s arrays before the block, where the operation (of `device`)
  // or the array is another device's than the weave's.
  std::vector<std::shared_ptr<Stream>> writers_outside(const cuweave::Operation& placed, int device) const;
  // Drops the kept copies of other devices' arrays whose bytes `accesses` write.
  void forget_copies_written(sanitizer::AccessSpan accesses);
  void split_at(std::uintptr_t at);
  // The segment that begins at `begin`, or null: found again where a recent lookup left it (Note [Segments found
  // again] in weave.cpp), else in the map.
  Segment* find_segment(std::uintptr_t begin);
  void forget_found_segments() noexcept { found_.fill(FoundSegment{}); }

  inline static thread_local Weave* active_ = nullptr;

  RecycledBlocks operation_memory_;  // first: outlives every operation
  // What a chain's step reads, together (Note [A placement's cache lines] in weave.cpp).
  std::vector<Strand> strands_;
  const Stream* first_stream_ = nullptr;      // strands_[0]'s, for the current stream's compare without reading it
  std::vector<Segment*> continued_;           // continued_strand()'s: the segments of the accesses, in order
  std::vector<SteppedBytes> stepped_;         // usually none
  std::vector<DeviceCopy> device_copies_;     // Note [Weaving]: several devices
  OperationRef entry_;
  OperationRef just_placed_;                  // place()'s operation, until the next: an allocation for it joins it
  std::shared_ptr<Capture> capture_;          // strand 0's capture at the start, if any
  std::uint64_t uses_ = 0;                    // ticks for least-recently-used
  int device_ = 0;                            // strand 0's
  bool touches_entry_ = false;                // place()'s scratch: bytes the block has not touched
  bool ended_ = false;
  struct FoundSegment {
    std::uintptr_t begin = 0;
    Segment* segment = nullptr;  // shadow_'s node for `begin`; all forgotten as any node is erased
  };
  static constexpr int kFoundSegmentBits = 4;
  std::array<FoundSegment, 1 << kFoundSegmentBits> found_{};  // by a hash of the address
  // The rest: the general path's, and the block's start and end.
  std::vector<Operation*> needed_;            // place()'s scratch, per strand
  std::vector<sanitizer::Access> touched_;    // place()'s scratch: the accesses that add to the others
  std::vector<Operation*> sealed_;            // order_after()'s scratch
  std::map<std::uintptr_t, Segment> shadow_;  // key: segment begin
  std::size_t strands_per_device_ = 1;        // placeable strands on the weave's own device
  std::vector<std::shared_ptr<Stream>> borrowed_;  // spare streams taken, in the order taken; given back as it ends
  std::size_t records_ = 0;  // events recorded to order strands (WeaveCounts; its operations are the strands')
  std::size_t waits_ = 0;    // stream waits queued
};

}  // namespace cuweave
