#include "cuweave/host_copy_threads.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#ifdef __linux__
#include <sched.h>
#endif

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define CUWEAVE_HAVE_STREAMING_STORES 1
#endif

namespace cuweave {

namespace {
// Smaller pieces cost more to hand out than to copy (one thread copies 256 KiB in about 25 us). Pieces of a
// quarter MiB let a 1 MB graph-function input use four threads.
constexpr std::size_t kMinimumPiece = std::size_t{256} << 10;

// Large copies bypass the caches on their stores: a regular store first reads the destination line
// (read-for-ownership), a third stream of memory traffic beside the read and the write, and copies
// this size are bound by memory bandwidth. CUWEAVE_COPY_STREAMING=0 turns this off (for measuring).
bool use_streaming_stores() {
  static const bool enabled = [] {
    const char* value = std::getenv("CUWEAVE_COPY_STREAMING");
    return value == nullptr || std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

void copy_piece(void* destination, const void* source, std::size_t bytes, bool streaming) {
#ifdef CUWEAVE_HAVE_STREAMING_STORES
  if (streaming && use_streaming_stores() && bytes >= (std::size_t{256} << 10)) {
    auto* out = static_cast<char*>(destination);
    const auto* in = static_cast<const char*>(source);
    const std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(out) % 16) % 16;  // align the stores
    std::memcpy(out, in, head);
    out += head;
    in += head;
    bytes -= head;
    const std::size_t blocks = bytes / 64;
    for (std::size_t i = 0; i < blocks; ++i, out += 64, in += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(out), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 48), d);
    }
    std::memcpy(out, in, bytes % 64);
    _mm_sfence();  // streaming stores are weakly ordered: make them visible before the copy is reported done
    return;
  }
#endif
  std::memcpy(destination, source, bytes);
}

// CUWEAVE_COPY_THREADS, or 0 when unset.
std::size_t requested_threads() {
  const char* value = std::getenv("CUWEAVE_COPY_THREADS");
  const long requested = value == nullptr ? 0 : std::atol(value);
  return requested >= 1 ? static_cast<std::size_t>(requested) : 0;
}

// One thread copies pageable memory at about a fifth of a PCIe 5 link (11 GB/s on the H100 machine, whose
// pinned copies reach 54), and how many threads copy fastest depends on the host and its load, so the pool
// has up to 32 threads and staged copies choose how many of them to use as they run (Note [Copy threads
// chosen as transfers run]). Counted on the CPUs this process may run on: a container or a taskset gets
// fewer than the machine has, and threads beyond those only take turns.
std::size_t default_threads() {
  std::size_t cpus = std::max(1u, std::thread::hardware_concurrency());
#ifdef __linux__
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) cpus = std::max(1, CPU_COUNT(&allowed));
#endif
  return std::min<std::size_t>(32, cpus);
}
}  // namespace

std::unique_ptr<HostCopyThreads> HostCopyThreads::sized_from_environment() {
  const std::size_t requested = requested_threads();
  return std::unique_ptr<HostCopyThreads>(
      new HostCopyThreads((requested != 0 ? requested : default_threads()) - 1, requested != 0));
}

HostCopyThreads::HostCopyThreads(std::size_t workers, bool size_was_set) : size_was_set_(size_was_set) {
  for (std::size_t i = 0; i < workers; ++i) {
    workers_.emplace_back([this, i] { run(i); });
    workers_.back().detach();
  }
}

std::vector<std::size_t> HostCopyThreads::counts_to_try() const {
  const std::size_t all = threads();
  if (size_was_set_) return {all};
  std::vector<std::size_t> counts;
  for (std::size_t quarters = 1; quarters <= 4; ++quarters) {
    const std::size_t count = std::max<std::size_t>(1, all * quarters / 4);
    if (counts.empty() || counts.back() != count) counts.push_back(count);
  }
  return counts;
}

std::size_t HostCopyThreads::pieces_of(std::size_t bytes, std::size_t threads) const noexcept {
  const std::size_t usable = threads == 0 ? this->threads() : std::min(threads, this->threads());
  return std::max<std::size_t>(1, std::min(usable, bytes / kMinimumPiece));
}

void HostCopyThreads::copy(void* destination, const void* source, std::size_t bytes, bool streaming,
                           std::size_t threads) {
  if (pieces_of(bytes, threads) == 1) {  // nothing to share: no queue, no lock
    copy_piece(destination, source, bytes, streaming);
    return;
  }
  Copy whole;
  start(whole, destination, source, bytes, streaming, threads);
  finish(whole);  // the caller copies pieces too, from the first one nobody took
}

void HostCopyThreads::start(Copy& copy, void* destination, const void* source, std::size_t bytes, bool streaming,
                            std::size_t threads) {
  finish(copy);  // a Copy is reused only once its earlier pieces are done
  const std::size_t parts = pieces_of(bytes, threads);
  const std::size_t piece = (bytes + parts - 1) / parts;
  const std::size_t workers = (threads == 0 ? this->threads() : std::min(threads, this->threads())) - 1;
  copy.finished_at_.store(0, std::memory_order_relaxed);
  copy.remaining_.store(parts, std::memory_order_release);
  copy.pool_ = this;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t queued = 0;
    try {
      for (; queued < parts; ++queued) {
        const std::size_t offset = queued * piece;
        pieces_.push_back(Piece{static_cast<char*>(destination) + offset, static_cast<const char*>(source) + offset,
                                std::min(piece, bytes - offset), streaming, &copy, workers});
      }
    } catch (...) {
      copy.remaining_.fetch_sub(parts - queued, std::memory_order_acq_rel);  // finish() waits for the queued ones
      pieces_changed();
      throw;
    }
    pieces_changed();
  }
  work_.notify_all();
}

void HostCopyThreads::finish(Copy& copy) noexcept {
  if (copy.pool_ == nullptr) return;
  auto own = [&](const Piece& p) { return p.copy == &copy; };
  for (Piece p; take_first(p, own);) {
    copy_piece(p.destination, p.source, p.bytes, p.streaming);
    copy.piece_done();
  }
  while (!copy.done()) std::this_thread::yield();
  copy.pool_ = nullptr;
}

void HostCopyThreads::Copy::piece_done() noexcept {
  // Before the count: whoever sees the last piece counted sees its time (pieces end in any order: the latest wins).
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  auto latest = finished_at_.load(std::memory_order_relaxed);
  while (latest < now && !finished_at_.compare_exchange_weak(latest, now, std::memory_order_relaxed)) {
  }
  remaining_.fetch_sub(1, std::memory_order_acq_rel);
}

HostCopyThreads::Copy::~Copy() {
  if (pool_ != nullptr) pool_->finish(*this);
}

template <typename Eligible>
bool HostCopyThreads::take_first(Piece& piece, Eligible eligible) {
  if (queued_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(pieces_.begin(), pieces_.end(), eligible);
  if (it == pieces_.end()) return false;
  piece = *it;
  pieces_.erase(it);
  pieces_changed();
  return true;
}

void HostCopyThreads::pieces_changed() {
  std::size_t widest = 0;
  for (const Piece& p : pieces_) widest = std::max(widest, p.workers);
  widest_.store(widest, std::memory_order_release);
  queued_.store(pieces_.size(), std::memory_order_release);
}

bool HostCopyThreads::has_piece_for(std::size_t worker) const {
  return std::any_of(pieces_.begin(), pieces_.end(), [&](const Piece& p) { return worker < p.workers; });
}

// A copy limited to fewer threads than the pool has leaves the workers with higher numbers asleep, so that
// limit is the number of threads copying, even with two chunks' copies in the pool at once.
void HostCopyThreads::run(std::size_t worker) {
  constexpr auto kSpin = std::chrono::microseconds(200);
  while (true) {
    // Workers a piece leaves out look at widest_ alone: no lock taken, none held up.
    auto look = [&](Piece& p) {
      return worker < widest_.load(std::memory_order_acquire) &&
             take_first(p, [worker](const Piece& q) { return worker < q.workers; });
    };
    Piece p;
    const auto give_up = std::chrono::steady_clock::now() + kSpin;
    bool found = look(p);
    while (!found && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
      found = look(p);
    }
    if (!found) {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [&] { return has_piece_for(worker); });
      continue;
    }
    copy_piece(p.destination, p.source, p.bytes, p.streaming);
    p.copy->piece_done();
  }
}

}  // namespace cuweave
