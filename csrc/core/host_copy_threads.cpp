#include "cuweave/host_copy_threads.hpp"

#include <algorithm>
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
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  return std::min<std::size_t>(8, hardware);
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

void HostCopyThreads::copy(void* destination, const void* source, std::size_t bytes, bool streaming) {
  const std::size_t parts = std::max<std::size_t>(1, std::min(threads(), bytes / kMinimumPiece));
  if (parts == 1) {
    copy_piece(destination, source, bytes, streaming);
    return;
  }
  const std::size_t piece = (bytes + parts - 1) / parts;
  std::size_t remaining = parts - 1;  // the caller copies the first piece itself
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 1; i < parts; ++i) {
      const std::size_t offset = i * piece;
      pieces_.push_back(Piece{static_cast<char*>(destination) + offset, static_cast<const char*>(source) + offset,
                              std::min(piece, bytes - offset), streaming, &remaining});
    }
  }
  work_.notify_all();
  copy_piece(destination, source, std::min(piece, bytes), streaming);
  // Help with what is left, then wait for the pieces other threads took.
  std::unique_lock<std::mutex> lock(mutex_);
  while (remaining > 0) {
    auto mine = std::find_if(pieces_.begin(), pieces_.end(), [&](const Piece& p) { return p.remaining == &remaining; });
    if (mine == pieces_.end()) {
      done_.wait(lock, [&] { return remaining == 0; });
      break;
    }
    Piece p = *mine;
    pieces_.erase(mine);
    lock.unlock();
    copy_piece(p.destination, p.source, p.bytes, p.streaming);
    lock.lock();
    --remaining;
  }
}

void HostCopyThreads::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_.wait(lock, [this] { return !pieces_.empty(); });
    Piece p = pieces_.front();
    pieces_.pop_front();
    lock.unlock();
    copy_piece(p.destination, p.source, p.bytes, p.streaming);
    lock.lock();
    if (--*p.remaining == 0) done_.notify_all();
  }
}

}  // namespace cuweave
