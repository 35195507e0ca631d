// The stream-race sanitizer's bookkeeping (Note [Stream races] in race_detector.hpp).
#include "cuweave/race_detector.hpp"

#include <algorithm>

namespace cuweave::sanitizer {

std::uint64_t VectorClock::get(AgentId agent) const noexcept {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), agent,
                             [](const auto& entry, AgentId a) { return entry.first < a; });
  return it != entries_.end() && it->first == agent ? it->second : 0;
}

void VectorClock::set(AgentId agent, std::uint64_t clock) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), agent,
                             [](const auto& entry, AgentId a) { return entry.first < a; });
  if (it != entries_.end() && it->first == agent) {
    it->second = clock;
  } else {
    entries_.insert(it, {agent, clock});
  }
}

std::uint64_t VectorClock::advance(AgentId agent) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), agent,
                             [](const auto& entry, AgentId a) { return entry.first < a; });
  if (it != entries_.end() && it->first == agent) return ++it->second;
  entries_.insert(it, {agent, 1});
  return 1;
}

bool VectorClock::join(const VectorClock& other) {
  // Both sorted. Most joins learn nothing (a stream's next operation after the host's last one): one pass
  // that only reads says so, without the allocation of a merge.
  bool learns = false;
  auto mine = entries_.cbegin();
  for (const auto& theirs : other.entries_) {
    while (mine != entries_.cend() && mine->first < theirs.first) ++mine;
    if (mine == entries_.cend() || mine->first != theirs.first || mine->second < theirs.second) {
      learns = true;
      break;
    }
  }
  if (!learns) return false;
  std::vector<std::pair<AgentId, std::uint64_t>> merged;
  merged.reserve(entries_.size() + other.entries_.size());
  auto a = entries_.begin();
  auto b = other.entries_.begin();
  while (a != entries_.end() || b != other.entries_.end()) {
    if (b == other.entries_.end() || (a != entries_.end() && a->first < b->first)) {
      merged.push_back(*a++);
    } else if (a == entries_.end() || b->first < a->first) {
      merged.push_back(*b++);
    } else {
      merged.emplace_back(a->first, std::max(a->second, b->second));
      ++a;
      ++b;
    }
  }
  entries_ = std::move(merged);
  return true;
}

void VectorClock::drop(const std::vector<bool>& dropped) {
  auto marked = [&dropped](const auto& entry) { return entry.first < dropped.size() && dropped[entry.first]; };
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), marked), entries_.end());
}

const char* to_string(AccessKind kind) noexcept {
  switch (kind) {
    case AccessKind::Read: return "read";
    case AccessKind::Write: return "write";
    case AccessKind::Free: return "free";
  }
  return "?";
}

AgentId RaceDetector::new_agent(std::string name) {
  const auto id = static_cast<AgentId>(agents_.size());
  agents_.push_back(Agent{std::move(name), {}, {}});
  dropped_.push_back(false);
  kept_.push_back(id);
  return id;
}

std::string RaceDetector::agent_name(AgentId agent) const {
  return agents_.at(agent).name;
}

// Note [Operations that follow no new host work]
// Each operation a stream queues follows what its host thread did so far, a join of the host's clock into the
// stream's. In a loop the host does nothing the sanitizer sees between two operations, and the join learns
// nothing. A clock only grows between its changes counted (drop_gone takes the dropped agents' entries out of every
// clock at once, so a clock that held all of another's still does, and a dropped agent's clock is empty), so a
// stream that learned the host's clock at some count of its changes holds all of it while that count stands, and
// the join is skipped.
void RaceDetector::enqueue(AgentId host, AgentId stream) {
  Agent& into = agents_.at(stream);
  const std::uint64_t host_changes = agents_.at(host).changes;
  if (into.host_learned == host && into.host_changes_learned == host_changes) return;
  join(stream, host);
  into.host_learned = host;
  into.host_changes_learned = host_changes;
}

void RaceDetector::join(AgentId into, AgentId from) {
  if (into == from) return;
  Agent& learner = agents_.at(into);
  // Two agents: the clock read is not the one written.
  if (learner.clock.join(agents_.at(from).clock)) ++learner.changes;
}

VectorClock RaceDetector::snapshot(AgentId agent) const {
  return agents_.at(agent).clock;
}

void RaceDetector::join(AgentId into, const VectorClock& recorded) {
  Agent& learner = agents_.at(into);
  if (learner.clock.join(recorded)) ++learner.changes;
  if (kept_.size() < agents_.size()) learner.clock.drop(dropped_);  // a snapshot may name agents dropped since
}

bool RaceDetector::ordered_before(const Epoch& earlier, const VectorClock& later) const {
  return earlier.clock <= later.get(earlier.agent);
}

void RaceDetector::split_at(std::uintptr_t at) {
  auto it = shadow_.upper_bound(at);
  if (it == shadow_.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;  // already a boundary, or `at` lies in no segment
  Segment tail = it->second;
  it->second.end = at;
  shadow_.emplace(at, std::move(tail));
}

Conflict RaceDetector::conflict(const Epoch& earlier, AccessKind earlier_kind, const Epoch& later,
                                AccessKind later_kind, std::uintptr_t begin, std::uintptr_t end) const {
  Conflict c;  // (the caller sets reuse)
  c.earlier = *earlier.operation;
  c.earlier_agent = agents_.at(earlier.agent).name;
  c.earlier_kind = earlier_kind;
  c.later = *later.operation;
  c.later_agent = agents_.at(later.agent).name;
  c.later_kind = later_kind;
  c.begin = begin;
  c.end = end;
  return c;
}

const std::shared_ptr<const OperationInfo>& RaceDetector::description(Agent& agent, std::string_view name,
                                                                       std::uint32_t call_site) {
  // An agent's operations from one call site in a loop share one description: a new one per operation cost an
  // allocation and a free, a sixth of the check.
  for (const std::shared_ptr<const OperationInfo>& recent : agent.recent_operations) {
    if (recent && recent->call_site == call_site && recent->name == name) return recent;
  }
  std::shared_ptr<const OperationInfo>& replaced = agent.recent_operations[agent.next_replaced];
  agent.next_replaced ^= 1;
  replaced = std::make_shared<const OperationInfo>(OperationInfo{std::string(name), call_site});
  return replaced;
}

std::vector<Conflict> RaceDetector::operation(AgentId agent, const OperationInfo& info,
                                              AccessSpan accesses, OrderedAfter also_after) {
  return operation(agent, info.name, info.call_site, accesses, also_after);
}

std::vector<Conflict> RaceDetector::operation(AgentId agent, std::string_view name, std::uint32_t call_site,
                                              AccessSpan accesses, OrderedAfter also_after) {
  std::vector<Conflict> conflicts;
  Agent& self = agents_.at(agent);
  const std::uint64_t tick = self.clock.advance(agent);
  ++self.changes;
  const Epoch now{agent, tick, description(self, name, call_site)};
  // Ordered by the agent's clock or what this operation also follows, or, for the block's previous holder, by what
  // its allocator waited for.
  auto unordered = [&](const Epoch& earlier, const std::shared_ptr<const Reuse>& reuse) {
    return earlier.agent != agent && !ordered_before(earlier, self.clock) &&
           !(also_after.first && ordered_before(earlier, *also_after.first)) &&
           !(also_after.second && ordered_before(earlier, *also_after.second)) &&
           !(reuse && ordered_before(earlier, reuse->released_after));
  };
  for (const Access& access : accesses) {
    if (access.end <= access.begin) continue;
    const bool writes = access.kind != AccessKind::Read;
    // Off the usual path (no stepped access anywhere): Note [Stepped accesses].
    if (!stepped_.empty() || access.stepped()) {
      check_stepped(access, now, unordered, conflicts);
      if (access.stepped()) {
        record_stepped(access, now);
        continue;
      }
    }
    // The usual access is an array's bytes again, one segment already: one search instead of three.
    auto it = shadow_.lower_bound(access.begin);
    if (it == shadow_.end() || it->first != access.begin || it->second.end != access.end) {
      split_at(access.begin);
      split_at(access.end);
      it = shadow_.lower_bound(access.begin);
    }
    // Bytes of the range no segment covers yet: fill them with empty segments first, so that the loop
    // below visits every byte of the range once.
    std::uintptr_t cursor = access.begin;
    while (cursor < access.end) {
      if (it == shadow_.end() || it->first > cursor) {
        const std::uintptr_t gap_end = it == shadow_.end() ? access.end : std::min(access.end, it->first);
        it = shadow_.emplace_hint(it, cursor, Segment{gap_end, false, {}, AccessKind::Write, {}});
      }
      Segment& segment = it->second;
      const std::uintptr_t begin = it->first;
      const std::uintptr_t end = segment.end;
      // Report each earlier operation once per range (an operation that both wrote and read it is
      // reported as its write), merged over adjacent segments.
      const OperationInfo* reported_here = nullptr;
      auto report = [&](const Epoch& earlier, AccessKind earlier_kind) {
        if (reported_here == earlier.operation.get()) return;
        reported_here = earlier.operation.get();
        if (!conflicts.empty()) {
          Conflict& last = conflicts.back();
          if (last.end == begin && last.earlier_kind == earlier_kind && last.later_kind == access.kind &&
              last.reuse == segment.reuse && last.earlier_agent == agents_.at(earlier.agent).name &&
              last.earlier.name == earlier.operation->name && last.earlier.call_site == earlier.operation->call_site) {
            last.end = end;
            return;
          }
        }
        conflicts.push_back(conflict(earlier, earlier_kind, now, access.kind, begin, end));
        conflicts.back().reuse = segment.reuse;
      };
      if (segment.written && (segment.write_kind == AccessKind::Free || unordered(segment.write, segment.reuse))) {
        report(segment.write, segment.write_kind);
      }
      if (writes) {
        for (const Epoch& read : segment.reads) {
          if (unordered(read, segment.reuse)) report(read, AccessKind::Read);
        }
        segment.written = true;
        segment.write.become(now);
        segment.write_kind = access.kind;
        segment.reads.clear();
        segment.reuse.reset();  // the previous holder's history is gone
      } else {
        auto same_agent = std::find_if(segment.reads.begin(), segment.reads.end(),
                                       [agent](const Epoch& read) { return read.agent == agent; });
        if (same_agent != segment.reads.end()) {
          same_agent->become(now);
        } else {
          segment.reads.push_back(now);
        }
      }
      cursor = end;
      ++it;
    }
    if (writes && !stepped_.empty()) {  // stepped accesses wholly inside the write are history it replaces
      stepped_.erase(std::remove_if(stepped_.begin(), stepped_.end(),
                                    [&](const SteppedAccess& earlier) {
                                      return earlier.bytes.lies_within(access.begin, access.end);
                                    }),
                     stepped_.end());
    }
  }
  return conflicts;
}

template <typename Unordered>
void RaceDetector::check_stepped(const Access& access, const Epoch& now, const Unordered& unordered,
                                 std::vector<Conflict>& conflicts) const {
  const bool writes = access.kind != AccessKind::Read;
  // Each earlier operation is reported once per access, from the first bytes both touch.
  std::vector<const OperationInfo*> reported;
  auto report_once = [&](const Epoch& earlier, AccessKind earlier_kind, std::pair<std::uintptr_t, std::uintptr_t> run,
                         const std::shared_ptr<const Reuse>& reuse) {
    if (std::find(reported.begin(), reported.end(), earlier.operation.get()) != reported.end()) return;
    reported.push_back(earlier.operation.get());
    conflicts.push_back(conflict(earlier, earlier_kind, now, access.kind, run.first, run.second));
    conflicts.back().reuse = reuse;
    conflicts.back().first_run_only = true;
  };
  for (const SteppedAccess& earlier : stepped_) {
    const auto shared = first_shared_run(earlier.bytes, access.bytes());
    if (!shared) continue;
    const bool earlier_writes = earlier.kind != AccessKind::Read;
    if (earlier.kind == AccessKind::Free || ((earlier_writes || writes) && unordered(earlier.epoch, earlier.reuse))) {
      report_once(earlier.epoch, earlier.kind, *shared, earlier.reuse);
    }
  }
  if (!access.stepped()) return;  // the interval map checks a contiguous access itself
  auto it = shadow_.upper_bound(access.begin);
  if (it != shadow_.begin()) --it;
  for (; it != shadow_.end() && it->first < access.end; ++it) {
    const Segment& segment = it->second;
    const auto shared = first_shared_run(BytePattern{it->first, segment.end}, access.bytes());
    if (!shared) continue;
    if (segment.written && (segment.write_kind == AccessKind::Free || unordered(segment.write, segment.reuse))) {
      report_once(segment.write, segment.write_kind, *shared, segment.reuse);
    }
    if (writes) {
      for (const Epoch& read : segment.reads) {
        if (unordered(read, segment.reuse)) report_once(read, AccessKind::Read, *shared, segment.reuse);
      }
    }
  }
}

void RaceDetector::record_stepped(const Access& access, const Epoch& now) {
  const BytePattern bytes = access.bytes();
  if (access.kind != AccessKind::Read) {
    // A write replaces the history of exactly its bytes: the earlier accesses of the same pattern.
    stepped_.erase(std::remove_if(stepped_.begin(), stepped_.end(),
                                  [&](const SteppedAccess& earlier) { return earlier.bytes == bytes; }),
                   stepped_.end());
  } else {
    // A later read by the same agent is ordered after its earlier one (one read per agent, as in a segment).
    auto same = std::find_if(stepped_.begin(), stepped_.end(), [&](const SteppedAccess& earlier) {
      return earlier.bytes == bytes && earlier.kind == AccessKind::Read && earlier.epoch.agent == now.agent;
    });
    if (same != stepped_.end()) {
      same->epoch.become(now);
      return;
    }
  }
  stepped_.push_back(SteppedAccess{bytes, access.kind, now, nullptr});
}

void RaceDetector::forget(std::uintptr_t begin, std::uintptr_t end) {
  if (end <= begin) return;
  auto same = shadow_.lower_bound(begin);
  if (same != shadow_.end() && same->first == begin && same->second.end == end) {
    // The usual allocation takes a block of the same size again: its segment, emptied, is what the new array's
    // first access finds (no split, no node freed and made again). An empty segment holds no history.
    Segment& segment = same->second;
    segment.written = false;
    segment.write = Epoch{};
    segment.write_kind = AccessKind::Write;
    segment.reads.clear();
    segment.reuse.reset();
  } else {
    split_at(begin);
    split_at(end);
    shadow_.erase(shadow_.lower_bound(begin), shadow_.lower_bound(end));
  }
  if (stepped_.empty()) return;
  stepped_.erase(std::remove_if(stepped_.begin(), stepped_.end(),
                                [&](const SteppedAccess& earlier) { return earlier.bytes.meets(begin, end); }),
                 stepped_.end());
}

void RaceDetector::reused(std::uintptr_t begin, std::uintptr_t end, std::shared_ptr<const Reuse> reuse) {
  if (end <= begin) return;
  split_at(begin);
  split_at(end);
  for (auto it = shadow_.lower_bound(begin); it != shadow_.end() && it->first < end; ++it) it->second.reuse = reuse;
  for (SteppedAccess& earlier : stepped_) {
    if (earlier.bytes.meets(begin, end)) earlier.reuse = reuse;
  }
}

std::size_t RaceDetector::shadow_ranges() const {
  return shadow_.size() + stepped_.size();
}

std::vector<AgentId> RaceDetector::drop_gone(const std::vector<AgentId>& gone,
                                             const std::unordered_set<AgentId>& in_use) {
  // A free's epoch orders nothing (any later access is a use after free), so it holds only its agent's name.
  std::unordered_set<AgentId> held(in_use);
  std::unordered_set<AgentId> named;
  for (const auto& [begin, segment] : shadow_) {
    if (segment.written) (segment.write_kind == AccessKind::Free ? named : held).insert(segment.write.agent);
    for (const Epoch& read : segment.reads) held.insert(read.agent);
  }
  for (const SteppedAccess& earlier : stepped_) {
    (earlier.kind == AccessKind::Free ? named : held).insert(earlier.epoch.agent);
  }
  std::vector<AgentId> dropped;
  for (AgentId agent : gone) {
    if (agent >= agents_.size() || dropped_[agent] || held.count(agent) != 0) continue;
    dropped_[agent] = true;
    if (named.count(agent) != 0) {
      agents_[agent].clock = VectorClock{};
    } else {
      agents_[agent] = Agent{};  // its name and clock go; the id stays taken
    }
    dropped.push_back(agent);
  }
  if (dropped.empty()) return dropped;
  kept_.erase(std::remove_if(kept_.begin(), kept_.end(), [this](AgentId agent) { return dropped_[agent]; }),
              kept_.end());
  for (AgentId agent : kept_) agents_[agent].clock.drop(dropped_);
  return dropped;
}

void RaceDetector::prune(VectorClock& clock) const {
  if (kept_.size() < agents_.size()) clock.drop(dropped_);
}

std::size_t RaceDetector::agents() const {
  return kept_.size();
}

std::size_t RaceDetector::largest_clock() const {
  std::size_t largest = 0;
  for (AgentId agent : kept_) largest = std::max(largest, agents_[agent].clock.size());
  return largest;
}

}  // namespace cuweave::sanitizer
