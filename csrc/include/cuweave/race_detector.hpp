// The stream-race sanitizer's bookkeeping: happens-before between streams and host threads, and the
// memory each operation reads and writes. CUDA-free and backend-free: the core feeds it what it issues.
//
// Note [Stream races]
// ~~~~~~~~~~~~~~~~~~~
// Each agent (a stream, or a host thread) has a vector clock. An operation on a stream ticks the stream's
// own entry; its accesses are stamped with that epoch. What orders work is what CUDA's rules order:
//  * program order on a stream (the stream's own clock);
//  * issue order from the host: work a host thread queues follows everything that thread did before
//    (enqueue() joins the thread's clock into the stream's);
//  * events: a record snapshots the stream's clock, a wait joins the snapshot;
//  * host waits: synchronizing a stream or an event joins its clock into the waiting thread's; a device
//    synchronize joins every stream of the device.
// Two accesses to overlapping bytes conflict when one of them writes (a free counts as a write) and the
// earlier is not ordered before the later (any access after a free is reported, ordered or not: a use
// after free). The earlier epoch (agent a, clock c) is ordered before an
// agent whose clock has an entry for `a` of at least c. This is the vector-clock check of dynamic race
// detectors (FastTrack, Flanagan & Freund 2009), here over streams instead of threads.
//
// Shadow memory is an interval map from byte ranges to their last write and the reads since it (one per
// agent: a later read by the same agent is ordered after its earlier one). A new allocation of cuweave's
// forgets what the range held before: cuweave's frees follow every stream that used the memory, so its
// allocator orders its own reuse. Another library's allocator is checked instead (Note [Reused blocks]).
//
// Note [Reused blocks]
// ~~~~~~~~~~~~~~~~~~~~
// PyTorch's caching allocator (and CuPy's pool) gives a freed block back to the pool of the stream that
// allocated it and hands it out again at once to that stream's next allocation. That is safe only for the
// earlier uses the reuse is ordered after: the allocating stream's own (stream order), those on streams
// recorded on the block (record_stream: at the free the allocator records an event on each and reuses the
// block only once they have completed), and any the allocating stream has waited for. So a block handed out
// again keeps its history, marked with what the allocator waited for at the free; the first accesses of its
// new holder are checked against it like any access, also counting as ordered what that mark orders, and a
// race found there is reported as the reuse it is (where the block was freed and handed out again, and the
// two fixes). A write by the new holder replaces the old history.
//
// Note [Agents that are gone]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A stream's agent outlives the stream: its accesses stay in the history, to be checked against later work,
// and every clock that learned of it (through a synchronize, a wait, the host's issue order) keeps its entry.
// Kept for ever, those entries made each clock as long as the number of streams the process ever made, and
// every join as slow: after 8000 streams made and destroyed, a record, wait, copy and synchronize cost 5x
// what they cost at the start (measured on the simulator), and a long sanitized test run lost its overlap.
// So an agent whose stream is gone is dropped once nothing can compare against it: no history holds an access
// of it (a free's does not count: any access after a free is reported, so only the agent's name is kept for
// the report), and the sanitizer holds it nowhere else (a watch, a block, another adoption of its stream). It then
// leaves every clock; entries for it in clocks kept outside (an event's snapshot) are ignored by a join. Its
// id is not given out again: a snapshot kept elsewhere may still name it.
//
// Note [Stepped accesses]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A stepped view's bytes are runs with gaps (x[::2] of float32: 4 bytes every 8), and another view may fill the
// gaps on another stream with no race (x[1::2]). Up to 64 runs, an operation lists each run as an access. Past
// that, a range per element would cost as much as the elements; so runs at one stride are one access with a
// period and a width, and other layouts take their extent (which orders more, never less). The interval map
// cannot hold such an access without splitting it into its runs, so stepped accesses are kept in a list beside
// it, each with its epoch: every later access is checked against the list by whether the two share a byte
// (first_shared_run, a few steps for two patterns), and a stepped access is checked against the map's
// segments the same way before it joins the list. A stepped write replaces the history of exactly its own
// pattern; a contiguous write replaces the stepped accesses that lie wholly inside it; a free forgets those it
// reaches. The weave keeps its writers and readers of stepped bytes the same way (Note [Weaving]). The list is
// scanned whole, so a program that keeps thousands of different stepped views alive (each column of a wide
// matrix written on its own) pays for each on every access; the usual stepped views (even and odd halves, a few
// columns) are a handful of entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cuweave/byte_pattern.hpp"

namespace cuweave::sanitizer {

using AgentId = std::uint32_t;

// A vector clock: sparse, sorted by agent.
class VectorClock {
 public:
  std::uint64_t get(AgentId agent) const noexcept;
  void set(AgentId agent, std::uint64_t clock);
  // The agent's own entry, one higher (an operation of its own): one search, where get and set take two.
  std::uint64_t advance(AgentId agent);
  // Returns whether it learned anything.
  bool join(const VectorClock& other);
  // Removes the entries of the agents `dropped` marks (indexed by agent).
  void drop(const std::vector<bool>& dropped);
  std::size_t size() const noexcept { return entries_.size(); }

 private:
  std::vector<std::pair<AgentId, std::uint64_t>> entries_;
};

// What one operation is ordered after besides its agent's clock, without the agent learning it (a free that cuweave
// keeps behind other streams' work, and behind work the host saw complete): read where they are, never joined
// (an operation ordered after a clock's join is ordered after one of them).
struct OrderedAfter {
  const VectorClock* first = nullptr;
  const VectorClock* second = nullptr;
};

enum class AccessKind : std::uint8_t { Read, Write, Free };
const char* to_string(AccessKind kind) noexcept;

// Bytes [begin, end) read or written by an operation; with a period, only those whose offset from `begin`
// modulo `period` is below `width` (a stepped view's elements: Note [Stepped accesses]).
struct Access {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  AccessKind kind = AccessKind::Read;
  std::uintptr_t period = 0;
  std::uintptr_t width = 0;

  BytePattern bytes() const noexcept { return BytePattern{begin, end, period, width}; }
  bool stepped() const noexcept { return period != 0 && width < period; }
};

// An operation's accesses, viewed where they lie (an operation's inline list, a graph's footprint, a vector): the
// check reads them in place, so an operation's list needs no allocation of its own.
class AccessSpan {
 public:
  AccessSpan() noexcept = default;
  AccessSpan(const Access* data, std::size_t size) noexcept : data_(data), size_(size) {}
  AccessSpan(const std::vector<Access>& accesses) noexcept  // NOLINT(google-explicit-constructor): a view of it
      : data_(accesses.data()), size_(accesses.size()) {}
  // A braced list as an argument: the temporary lives as long as the call (never keep such a span).
  AccessSpan(std::initializer_list<Access> list) noexcept  // NOLINT(google-explicit-constructor)
      : data_(std::data(list)), size_(list.size()) {}
  const Access* begin() const noexcept { return data_; }
  const Access* end() const noexcept { return data_ + size_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const Access& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  const Access* data_ = nullptr;
  std::size_t size_ = 0;
};

// What a report says about an operation.
struct OperationInfo {
  std::string name;            // "kernel scale", "copy host to device", "ops.add", "free"
  std::uint32_t call_site = 0;  // trace::intern_call_site id; 0: unknown
};

// The libraries whose allocators reuse blocks as Note [Reused blocks] says; each has its own fixes.
enum class Allocator : std::uint8_t { PyTorch, CuPy };

// A block another library's allocator handed out again (Note [Reused blocks]).
struct Reuse {
  VectorClock released_after;  // the clocks of the streams recorded on the block, at its free
  OperationInfo freed;         // where the block was freed (call_site 0: unseen)
  OperationInfo handed_out;    // where it was handed out again
  std::string allocating_agent;
  Allocator allocator = Allocator::PyTorch;  // whose fixes the report gives
};

// One race: an earlier operation and a later one touched overlapping bytes, at least one writing, with
// nothing ordering the earlier before the later.
struct Conflict {
  OperationInfo earlier;
  std::string earlier_agent;
  AccessKind earlier_kind = AccessKind::Read;
  OperationInfo later;
  std::string later_agent;
  AccessKind later_kind = AccessKind::Read;
  std::uintptr_t begin = 0;  // the overlapping bytes
  std::uintptr_t end = 0;
  std::shared_ptr<const Reuse> reuse;  // set when the earlier touched the block's previous holder
  bool first_run_only = false;  // a stepped access: [begin, end) is the first run of the bytes both touch
};

// Not synchronized: the sanitizer's state mutex guards it (each operation takes that lock once, not one more
// per step here).
class RaceDetector {
 public:
  RaceDetector() = default;
  RaceDetector(const RaceDetector&) = delete;
  RaceDetector& operator=(const RaceDetector&) = delete;

  // A new stream or host thread; `name` is what reports call it.
  AgentId new_agent(std::string name);
  std::string agent_name(AgentId agent) const;

  // The next operation on `stream` follows everything `host` did so far (issue order).
  void enqueue(AgentId host, AgentId stream);
  // `into` now follows everything `from` did so far: a host synchronize of a stream, a stream's wait for
  // another stream's work so far.
  void join(AgentId into, AgentId from);
  // An event record: the clock of `agent` now.
  VectorClock snapshot(AgentId agent) const;
  // An event wait (a stream) or an event synchronize (a host thread).
  void join(AgentId into, const VectorClock& recorded);

  // An operation by `agent` with these accesses: ticks the agent's clock, checks each access against
  // the range's history and records it. Returns the conflicts found (the history is updated either way,
  // so one bug is reported once). `also_after`: what this one operation is ordered after besides the
  // agent's own clock.
  std::vector<Conflict> operation(AgentId agent, const OperationInfo& operation, AccessSpan accesses,
                                  OrderedAfter also_after = {});
  // As above, the operation named `name` from `call_site`: its description is made only when none of the agent's
  // recent ones matches (the usual operation repeats one from a loop).
  std::vector<Conflict> operation(AgentId agent, std::string_view name, std::uint32_t call_site,
                                  AccessSpan accesses, OrderedAfter also_after = {});
  // Memory newly allocated: forgets [begin, end)'s history.
  void forget(std::uintptr_t begin, std::uintptr_t end);
  // A block another library's allocator handed out again: [begin, end) keeps its history, marked with `reuse`.
  void reused(std::uintptr_t begin, std::uintptr_t end, std::shared_ptr<const Reuse> reuse);

  // Note [Agents that are gone]: of `gone` (agents whose streams are gone), those that no history holds and that
  // are not `in_use` are dropped from every clock; returns them. The others stay candidates for a later call.
  std::vector<AgentId> drop_gone(const std::vector<AgentId>& gone, const std::unordered_set<AgentId>& in_use);
  // Removes the dropped agents' entries from a clock kept outside the detector (an event's snapshot).
  void prune(VectorClock& clock) const;

  // What the detector holds (for the benchmark's growth figures and the tests of its bounds).
  std::size_t shadow_ranges() const;
  std::size_t agents() const;  // those not dropped
  std::size_t largest_clock() const;  // entries of the longest agent clock

 private:
  static constexpr AgentId kNoAgent = ~AgentId{0};
  struct Epoch {
    AgentId agent = 0;
    std::uint64_t clock = 0;
    std::shared_ptr<const OperationInfo> operation;  // shared by the epoch's ranges; freed with the last
    // Takes `now`'s place. In a loop the description is the same one (shared per agent and call site), and not
    // copying it saves two atomic counts per access.
    void become(const Epoch& now) {
      agent = now.agent;
      clock = now.clock;
      if (operation != now.operation) operation = now.operation;
    }
  };
  struct Segment {
    std::uintptr_t end = 0;
    bool written = false;
    Epoch write;
    AccessKind write_kind = AccessKind::Write;
    std::vector<Epoch> reads;  // at most one per agent
    std::shared_ptr<const Reuse> reuse;  // set while the history is the block's previous holder's
  };
  struct Agent {
    std::string name;
    VectorClock clock;
    // What its recent operations' epochs name: a loop's operation, or the two a loop alternates (an operation
    // making a new array, and the free of the array it replaced).
    std::shared_ptr<const OperationInfo> recent_operations[2];
    unsigned char next_replaced = 0;  // the entry a new description takes
    // Its clock's changes so far: a clock another agent joined at this count has taught it all it holds.
    std::uint64_t changes = 0;
    // The host clock this one last learned in enqueue(), as the host's agent and its count of changes then
    // (Note [Operations that follow no new host work]).
    AgentId host_learned = kNoAgent;
    std::uint64_t host_changes_learned = 0;
  };
  // A stepped access, kept beside the interval map (Note [Stepped accesses]).
  struct SteppedAccess {
    BytePattern bytes;
    AccessKind kind = AccessKind::Read;
    Epoch epoch;
    std::shared_ptr<const Reuse> reuse;
  };

  // The description `agent`'s operation named `name` from `call_site` stamps its accesses with: a recent one
  // when it matches, else a new one.
  static const std::shared_ptr<const OperationInfo>& description(Agent& agent, std::string_view name,
                                                                 std::uint32_t call_site);
  bool ordered_before(const Epoch& earlier, const VectorClock& later) const;
  // Checks `access` against the stepped accesses kept, and a stepped `access` against the interval map too.
  template <typename Unordered>
  void check_stepped(const Access& access, const Epoch& now, const Unordered& unordered,
                     std::vector<Conflict>& conflicts) const;
  void record_stepped(const Access& access, const Epoch& now);
  // Splits segments so that `at` is a boundary (no segment spans it).
  void split_at(std::uintptr_t at);
  Conflict conflict(const Epoch& earlier, AccessKind earlier_kind, const Epoch& later, AccessKind later_kind,
                    std::uintptr_t begin, std::uintptr_t end) const;

  std::vector<Agent> agents_;                     // indexed by AgentId
  std::vector<bool> dropped_;                     // indexed by AgentId
  std::vector<AgentId> kept_;                     // the agents not dropped
  std::map<std::uintptr_t, Segment> shadow_;      // key: segment begin
  std::vector<SteppedAccess> stepped_;            // in the order made
};

}  // namespace cuweave::sanitizer
