// Note [Host writes under a copy]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A copy from pinned host memory reads it some time after copy_async returns; the host must not write
// those bytes until it has waited for the copy (transfer.wait(), a synchronize, an event). The host's
// stores are plain memory writes that nothing can hook cheaply, so the sanitizer compares contents: when
// such a copy is queued it keeps a checksum of the bytes, and when the host's clock first follows the
// copy (the host waited for it, in any way the sanitizer sees) it checksums them again. Bytes that
// changed in between were written by the host while the copy could still read them: a race, whatever
// the timing was this time. The report names the copy's call site and the wait's (where it was found),
// not the store's, which no hook saw. Writes that restore the old bytes go unseen; memory handed out
// anew (allocated) stops being watched; a host callback's writes count as ordered with the copies on
// its stream (see rebaseline).
// The cost is two passes over the bytes checked, sanitized runs only; a range up to kExactBytes (1 MiB)
// is checked whole. Beyond that, a full pass cost more than the copy it checks (a 64 MB checksum took
// 24 ms at the H100 host's 2.7 GB/s, the copy 1.2 ms), delayed the work queued after it (notebooks'
// overlapping copies ran one after the other) and grew without bound, so a larger range is sampled: one
// 64-byte line per stride (the range over 16384 lines: 4 KiB for 64 MiB), from a phase drawn per copy,
// plus the last line. A write of at least a stride is always seen; a smaller one in a large buffer, with
// probability (its lines / stride lines) per copy.
// The device may write those bytes too, in order: a copy from a device into the same pinned memory queued
// after the reading copy (say, the next round of a staging buffer), or before it with the reading copy
// ordered after it (device -> pinned -> device, on one stream or through an event). Both are
// legitimate, and both change the bytes, so such a write ends the watch of the copies reading there
// before it (checked first: a change already there when it is queued can only be the host's, since the
// write has not run yet), and until the host follows the write, a copy queued to read those bytes is not
// watched: its bytes are still to change. (The race detector checks the copies against each other.) A
// host write racing with such a reading copy then goes unseen, as one that restores the old bytes does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "cuweave/race_detector.hpp"

namespace cuweave::sanitizer {

// The name of the later operation in a report of this kind.
inline constexpr const char* kHostWrite = "a host write";

// A 64-bit checksum of `bytes` bytes at `data` (not cryptographic: any change of a word changes it,
// short of a collision).
std::uint64_t checksum(const void* data, std::size_t bytes) noexcept;

// Which bytes of a range the watch checks (Note [Host writes under a copy]).
struct Sampling {
  static constexpr std::size_t kExactBytes = std::size_t{1} << 20;
  std::size_t stride = 0;  // 0: every byte; else one 64-byte line in `stride` bytes, and the last line
  std::size_t phase = 0;   // the first sampled line's offset
  // Every byte up to kExactBytes, else lines spread over the range with a random phase.
  static Sampling of(std::size_t bytes) noexcept;
};

// The checksum of the bytes `sampling` picks.
std::uint64_t checksum(const void* data, std::size_t bytes, Sampling sampling) noexcept;

// Not synchronized: the sanitizer's state mutex guards it.
class HostWriteWatch {
 public:
  // A copy, operation `copy` of `agent` (called `agent_name`) at `clock`, reads host bytes [begin, end).
  void watch(std::uintptr_t begin, std::uintptr_t end, AgentId agent, std::uint64_t clock, OperationInfo copy,
             std::string agent_name);
  // The host's clock is now `host`: each watched range whose copy it follows is checked and dropped. The
  // ranges that changed come back as conflicts, the later side being `wait` by `host_name`.
  std::vector<Conflict> host_caught_up(const VectorClock& host, const OperationInfo& wait, const std::string& host_name);
  // The host waited for every copy reading [begin, end) (cuweave waited for them on its behalf): each
  // watched range there is checked and dropped, as host_caught_up does.
  std::vector<Conflict> readers_done(std::uintptr_t begin, std::uintptr_t end, const OperationInfo& wait,
                                     const std::string& host_name);
  // A host callback on `agent` returned: what it wrote follows that stream's earlier copies (a callback
  // runs after the work queued before it) and, for a stream-ordered one, precedes its later copies; the
  // bytes the stream's copies read are taken as they are now. (A plain callback's write racing with a
  // copy queued after it on the same stream goes unreported.)
  void rebaseline(AgentId agent) noexcept;
  // A copy of `agent` at `clock` writes host bytes [begin, end) (device to pinned memory; the host's
  // clock is `host`): each watched range there is checked and dropped, as readers_done does, and until the
  // host follows this write, device_write_pending says so for those bytes (Note [Host writes under a copy]).
  std::vector<Conflict> device_writes(std::uintptr_t begin, std::uintptr_t end, AgentId agent, std::uint64_t clock,
                                      const VectorClock& host, const OperationInfo& write,
                                      const std::string& host_name);
  // Whether a copy's write into [begin, end) that the host does not yet follow (clock `host`) is pending:
  // a copy reading those bytes now is not watched, since they are still to change.
  bool device_write_pending(std::uintptr_t begin, std::uintptr_t end, const VectorClock& host) const noexcept;
  // Memory handed out anew: its bytes are someone's new data.
  void forget(std::uintptr_t begin, std::uintptr_t end);
  void clear() noexcept {
    watched_.clear();
    device_writes_.clear();
  }
  std::size_t size() const noexcept { return watched_.size(); }
  // Adds the agents whose copies it still watches, or whose writes it still waits for the host to follow.
  void agents_in_use(std::unordered_set<AgentId>& agents) const;

 private:
  struct Watched {
    std::uintptr_t begin;
    std::uintptr_t end;
    Sampling sampling;
    std::uint64_t checksum;
    AgentId agent;
    std::uint64_t clock;
    OperationInfo copy;
    std::string agent_name;
  };
  // Checks and drops the watched ranges `done` says are no longer read.
  template <class Done>
  std::vector<Conflict> check(Done done, const OperationInfo& wait, const std::string& host_name);

  // A copy's write into host bytes, until the host follows it.
  struct DeviceWrite {
    std::uintptr_t begin;
    std::uintptr_t end;
    AgentId agent;
    std::uint64_t clock;
  };

  std::vector<Watched> watched_;
  std::vector<DeviceWrite> device_writes_;
};

}  // namespace cuweave::sanitizer
