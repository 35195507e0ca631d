#include "cuweave/host_write_watch.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

namespace cuweave::sanitizer {

namespace {

constexpr std::size_t kAccumulators = 8;  // words per 64-byte line, one per accumulator

// Eight independent accumulators, one word each per 64 bytes: one accumulator's chain of multiplies was latency-bound
// (4.8 GB/s on the CPU machine, 2.7 GB/s on the H100 host's pinned memory); eight run at memory speed
// (11 GB/s here). Each accumulator is order-sensitive, and a word's accumulator is its position mod 8, so swapped words
// still change the sum.
struct Accumulators {
  std::uint64_t accumulator[kAccumulators];

  explicit Accumulators(std::size_t bytes) noexcept {
    for (std::size_t k = 0; k < kAccumulators; ++k) accumulator[k] = (0x9E3779B97F4A7C15ull * (k + 1)) ^ bytes;
  }
  void add_line(const unsigned char* p) noexcept {
    for (std::size_t k = 0; k < kAccumulators; ++k) {
      std::uint64_t word;
      std::memcpy(&word, p + 8 * k, 8);
      accumulator[k] = (accumulator[k] ^ word) * 0xBF58476D1CE4E5B9ull;
      accumulator[k] ^= accumulator[k] >> 31;
    }
  }
  std::uint64_t finish(const unsigned char* tail, std::size_t tail_bytes, std::size_t tail_offset) const noexcept {
    std::uint64_t hash = 0;
    for (std::size_t k = 0; k < kAccumulators; ++k) hash = (hash ^ accumulator[k]) * 0x94D049BB133111EBull;
    for (std::size_t i = 0; i < tail_bytes; ++i) {
      hash = (hash ^ (tail[i] + ((tail_offset + i) << 8))) * 0x94D049BB133111EBull;
    }
    return hash ^ (hash >> 31);
  }
};

// A phase for a new watch's sampled lines (Note [Host writes under a copy]): different from one copy to
// the next, so that a write smaller than the stride is missed by one check, not by every one.
std::size_t random_line(std::size_t lines) noexcept {
  static std::atomic<std::uint64_t> state{0x2545F4914F6CDD1Dull};
  std::uint64_t x = state.fetch_add(0x9E3779B97F4A7C15ull, std::memory_order_relaxed);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::size_t>((x ^ (x >> 31)) % lines);
}

}  // namespace

std::uint64_t checksum(const void* data, std::size_t bytes) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  Accumulators accumulators(bytes);
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) accumulators.add_line(p + i);
  return accumulators.finish(p + i, bytes - i, i);
}

Sampling Sampling::of(std::size_t bytes) noexcept {
  if (bytes <= kExactBytes) return {};
  const std::size_t lines = kExactBytes / 64;
  const std::size_t stride = ((bytes / lines + 63) / 64) * 64;  // at least 64: bytes > kExactBytes
  return {stride, random_line(stride / 64) * 64};
}

std::uint64_t checksum(const void* data, std::size_t bytes, Sampling sampling) noexcept {
  if (sampling.stride == 0) return checksum(data, bytes);
  const auto* p = static_cast<const unsigned char*>(data);
  Accumulators accumulators(bytes);
  for (std::size_t i = sampling.phase; i + 64 <= bytes; i += sampling.stride) accumulators.add_line(p + i);
  const std::size_t tail = bytes - std::min<std::size_t>(bytes, 64);  // the last line, always
  return accumulators.finish(p + tail, bytes - tail, tail);
}

void HostWriteWatch::watch(std::uintptr_t begin, std::uintptr_t end, AgentId agent, std::uint64_t clock,
                           OperationInfo copy, std::string agent_name) {
  const Sampling sampling = Sampling::of(end - begin);
  const std::uint64_t sum = checksum(reinterpret_cast<const void*>(begin), end - begin, sampling);
  watched_.push_back(Watched{begin, end, sampling, sum, agent, clock, std::move(copy), std::move(agent_name)});
}

template <class Done>
std::vector<Conflict> HostWriteWatch::check(Done done, const OperationInfo& wait, const std::string& host_name) {
  std::vector<Conflict> changed;
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (!done(*it)) {
      ++it;
      continue;
    }
    if (checksum(reinterpret_cast<const void*>(it->begin), it->end - it->begin, it->sampling) != it->checksum) {
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
    if (w.agent == agent) w.checksum = checksum(reinterpret_cast<const void*>(w.begin), w.end - w.begin, w.sampling);
  }
}

std::vector<Conflict> HostWriteWatch::device_writes(std::uintptr_t begin, std::uintptr_t end, AgentId agent,
                                                    std::uint64_t clock, const VectorClock& host,
                                                    const OperationInfo& write, const std::string& host_name) {
  std::vector<Conflict> changed = readers_done(begin, end, write, host_name);
  device_writes_.erase(std::remove_if(device_writes_.begin(), device_writes_.end(),
                                      [&host](const DeviceWrite& w) { return host.get(w.agent) >= w.clock; }),
                       device_writes_.end());
  device_writes_.push_back(DeviceWrite{begin, end, agent, clock});
  return changed;
}

bool HostWriteWatch::device_write_pending(std::uintptr_t begin, std::uintptr_t end,
                                          const VectorClock& host) const noexcept {
  return std::any_of(device_writes_.begin(), device_writes_.end(), [&](const DeviceWrite& w) {
    return w.begin < end && begin < w.end && host.get(w.agent) < w.clock;
  });
}

void HostWriteWatch::forget(std::uintptr_t begin, std::uintptr_t end) {
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (it->begin < end && begin < it->end) {
      it = watched_.erase(it);
    } else {
      ++it;
    }
  }
  device_writes_.erase(std::remove_if(device_writes_.begin(), device_writes_.end(),
                                      [=](const DeviceWrite& w) { return w.begin < end && begin < w.end; }),
                       device_writes_.end());
}

void HostWriteWatch::agents_in_use(std::unordered_set<AgentId>& agents) const {
  for (const Watched& w : watched_) agents.insert(w.agent);
  for (const DeviceWrite& w : device_writes_) agents.insert(w.agent);
}

}  // namespace cuweave::sanitizer
