#include "cuweave/collective_failures.hpp"

#include <mutex>
#include <vector>

#include "cuweave/stream.hpp"

namespace cuweave::collective_failures {

namespace detail {
std::atomic<std::uint64_t> numbered{0};
std::atomic<int> unreported{0};
}  // namespace detail

namespace {

struct Marked {
  const Stream* key;             // compared, never used: the stream may be gone
  std::weak_ptr<Stream> stream;  // expired once it is, so that a stream made at the same address is another one
  int device;
  std::uint64_t number;
  std::exception_ptr failure;
};

struct Table {
  std::mutex mutex;
  std::vector<Marked> marked;  // LOCK: mutex
};

Table& table() {
  static auto* instance = new Table;  // leaked: waits may report during interpreter exit
  return *instance;
}

// Takes the earliest failure numbered up to `through` that `matches`, or null.
template <typename Matches>
std::exception_ptr take(const Matches& matches, std::uint64_t through) {
  if (!any()) return nullptr;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto earliest = t.marked.end();
  for (auto it = t.marked.begin(); it != t.marked.end(); ++it) {
    if (it->number <= through && matches(*it) && (earliest == t.marked.end() || it->number < earliest->number)) {
      earliest = it;
    }
  }
  if (earliest == t.marked.end()) return nullptr;
  std::exception_ptr failure = earliest->failure;
  t.marked.erase(earliest);
  detail::unreported.fetch_sub(1, std::memory_order_acq_rel);
  return failure;
}

void rethrow_if(const std::exception_ptr& failure) {
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

std::uint64_t next() noexcept { return detail::numbered.fetch_add(1, std::memory_order_acq_rel) + 1; }

void mark(const std::weak_ptr<Stream>& stream, const Stream* key, std::uint64_t number,
          std::exception_ptr failure) noexcept {
  const std::shared_ptr<Stream> alive = stream.lock();
  Table& t = table();
  try {
    std::lock_guard<std::mutex> lock(t.mutex);
    t.marked.push_back(Marked{key, stream, alive ? alive->device() : -1, number, std::move(failure)});
    detail::unreported.fetch_add(1, std::memory_order_acq_rel);
  } catch (...) {
    // Out of memory: the failure goes unreported by waits; the communicator still refuses collectives.
  }
}

void report(const Stream& stream, std::uint64_t through) {
  rethrow_if(take([&](const Marked& m) { return m.key == &stream && !m.stream.expired(); }, through));
}

void report_recorded(const Stream* recorded_on, std::uint64_t through) {
  rethrow_if(take([&](const Marked& m) { return m.key == recorded_on; }, through));
}

void report_device(int device, std::uint64_t through) {
  rethrow_if(take([&](const Marked& m) { return m.device == device && !m.stream.expired(); }, through));
}

}  // namespace cuweave::collective_failures
