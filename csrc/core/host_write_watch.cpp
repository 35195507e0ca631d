#include "cuweave/host_write_watch.hpp"

#include <cstring>
#include <utility>

namespace cuweave::sanitizer {

std::uint64_t checksum(const void* data, std::size_t bytes) noexcept {
  // Word at a time, each mixed with its position (so that swapped words differ), then a final avalanche.
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t hash = 0x9E3779B97F4A7C15ull ^ bytes;
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    hash = (hash ^ (word + i)) * 0xBF58476D1CE4E5B9ull;
    hash ^= hash >> 29;
  }
  for (; i < bytes; ++i) hash = (hash ^ (p[i] + (i << 8))) * 0x94D049BB133111EBull;
  hash ^= hash >> 31;
  return hash;
}

void HostWriteWatch::watch(std::uintptr_t begin, std::uintptr_t end, AgentId agent, std::uint64_t clock,
                           OperationInfo copy, std::string agent_name) {
  const std::uint64_t sum = checksum(reinterpret_cast<const void*>(begin), end - begin);
  watched_.push_back(Watched{begin, end, sum, agent, clock, std::move(copy), std::move(agent_name)});
}

template <class Done>
std::vector<Conflict> HostWriteWatch::check(Done done, const OperationInfo& wait, const std::string& host_name) {
  std::vector<Conflict> changed;
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (!done(*it)) {
      ++it;
      continue;
    }
    if (checksum(reinterpret_cast<const void*>(it->begin), it->end - it->begin) != it->checksum) {
      Conflict c;
      c.earlier = it->copy;
      c.earlier_agent = it->agent_name;
      c.earlier_kind = AccessKind::Read;
      c.later = wait;
      c.later.name = kHostWrite;
      c.later_agent = host_name;
      c.later_kind = AccessKind::Write;
      c.begin = it->begin;
      c.end = it->end;
      changed.push_back(std::move(c));
    }
    it = watched_.erase(it);
  }
  return changed;
}

std::vector<Conflict> HostWriteWatch::host_caught_up(const VectorClock& host, const OperationInfo& wait,
                                                     const std::string& host_name) {
  return check([&host](const Watched& w) { return host.get(w.agent) >= w.clock; }, wait, host_name);
}

std::vector<Conflict> HostWriteWatch::readers_done(std::uintptr_t begin, std::uintptr_t end, const OperationInfo& wait,
                                                   const std::string& host_name) {
  return check([=](const Watched& w) { return w.begin < end && begin < w.end; }, wait, host_name);
}

void HostWriteWatch::rebaseline(AgentId agent) noexcept {
  for (Watched& w : watched_) {
    if (w.agent == agent) w.checksum = checksum(reinterpret_cast<const void*>(w.begin), w.end - w.begin);
  }
}

void HostWriteWatch::forget(std::uintptr_t begin, std::uintptr_t end) {
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (it->begin < end && begin < it->end) {
      it = watched_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace cuweave::sanitizer
