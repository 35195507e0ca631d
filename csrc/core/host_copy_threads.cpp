#include "cuweave/host_copy_threads.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define CUWEAVE_HAVE_STREAMING_STORES 1
#endif

namespace cuweave {

namespace {
constexpr std::size_t kMinimumPiece = std::size_t{1} << 20;  // smaller pieces cost more to hand out than to copy

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

std::size_t configured_threads() {
  if (const char* value = std::getenv("CUWEAVE_COPY_THREADS")) {
    const long requested = std::atol(value);
    if (requested >= 1) return static_cast<std::size_t>(requested);
  }
  // One thread copies pageable memory at about a fifth of a PCIe 5 link (11 GB/s on the H100 machine, whose
  // pinned copies reach 54), and copying a chunk in pieces does not scale perfectly: there, with 16 MiB
  // chunks, 8 threads staged NumPy->device at 33 GB/s, 12 or 16 at 45. Up to 16 then, as the host has.
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  return std::min<std::size_t>(16, hardware);
}
}  // namespace

HostCopyThreads& HostCopyThreads::instance() {
  static auto* pool = new HostCopyThreads(configured_threads() - 1);  // leaked: threads live until exit
  return *pool;
}

HostCopyThreads::HostCopyThreads(std::size_t workers) {
  for (std::size_t i = 0; i < workers; ++i) {
    workers_.emplace_back([this] { run(); });
    workers_.back().detach();
  }
}

std::size_t HostCopyThreads::pieces_of(std::size_t bytes) const noexcept {
  return std::max<std::size_t>(1, std::min(threads(), bytes / kMinimumPiece));
}

void HostCopyThreads::copy(void* destination, const void* source, std::size_t bytes, bool streaming) {
  if (pieces_of(bytes) == 1) {  // nothing to share: no queue, no lock
    copy_piece(destination, source, bytes, streaming);
    return;
  }
  Copy whole;
  start(whole, destination, source, bytes, streaming);
  finish(whole);  // the caller copies pieces too, from the first one nobody took
}

void HostCopyThreads::start(Copy& copy, void* destination, const void* source, std::size_t bytes, bool streaming) {
  finish(copy);  // a Copy is reused only once its earlier pieces are done
  const std::size_t parts = pieces_of(bytes);
  const std::size_t piece = (bytes + parts - 1) / parts;
  copy.remaining_.store(parts, std::memory_order_release);
  copy.pool_ = this;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t queued = 0;
    try {
      for (; queued < parts; ++queued) {
        const std::size_t offset = queued * piece;
        pieces_.push_back(Piece{static_cast<char*>(destination) + offset, static_cast<const char*>(source) + offset,
                                std::min(piece, bytes - offset), streaming, &copy.remaining_});
      }
    } catch (...) {
      copy.remaining_.fetch_sub(parts - queued, std::memory_order_acq_rel);  // finish() waits for the queued ones
      queued_.store(pieces_.size(), std::memory_order_release);
      throw;
    }
    queued_.store(pieces_.size(), std::memory_order_release);
  }
  work_.notify_all();
}

void HostCopyThreads::finish(Copy& copy) noexcept {
  if (copy.pool_ == nullptr) return;
  for (Piece p; take(p, &copy.remaining_);) {
    copy_piece(p.destination, p.source, p.bytes, p.streaming);
    copy.remaining_.fetch_sub(1, std::memory_order_acq_rel);
  }
  while (copy.remaining_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  copy.pool_ = nullptr;
}

HostCopyThreads::Copy::~Copy() {
  if (pool_ != nullptr) pool_->finish(*this);
}

bool HostCopyThreads::take(Piece& piece, const std::atomic<std::size_t>* remaining) {
  if (queued_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = remaining == nullptr
                ? pieces_.begin()
                : std::find_if(pieces_.begin(), pieces_.end(), [&](const Piece& p) { return p.remaining == remaining; });
  if (it == pieces_.end()) return false;
  piece = *it;
  pieces_.erase(it);
  queued_.store(pieces_.size(), std::memory_order_release);
  return true;
}

void HostCopyThreads::run() {
  constexpr auto kSpin = std::chrono::microseconds(200);
  while (true) {
    Piece p;
    const auto give_up = std::chrono::steady_clock::now() + kSpin;
    bool found = take(p, nullptr);
    while (!found && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
      found = take(p, nullptr);
    }
    if (!found) {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [this] { return !pieces_.empty(); });
      continue;
    }
    copy_piece(p.destination, p.source, p.bytes, p.streaming);
    p.remaining->fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace cuweave
